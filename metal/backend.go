package metal

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/startlux/startlux/tensor"
)

// Options configures a Metal backend.
type Options struct {
	// Device picks the GPU by its index in MTLCopyAllDevices (0: the first).
	Device int
	// Compiler is the C++ compiler of the emulator (default: clang++-19).
	Compiler string
	// CacheDir is where the emulator keeps its built kernel libraries
	// (default: the user cache directory, under startlux/metal-emu).
	CacheDir string
}

// NewEmulated returns the Metal backend running on the kernel emulator: the
// same kernels and dispatch code as the GPU backend, compiled as C++ by
// clang-19 and run on the CPU. It is for tests; it is slow.
func NewEmulated(opts Options) (tensor.Backend, error) {
	return NewEmulatedContext(context.Background(), opts)
}

// NewEmulatedContext is NewEmulated with a context for the kernel build.
func NewEmulatedContext(ctx context.Context, opts Options) (tensor.Backend, error) {
	return newEmulated(ctx, opts, "")
}

// newEmulated builds the emulated backend with extra kernel source.
func newEmulated(ctx context.Context, opts Options, extra string) (*Backend, error) {
	lib, _, err := buildEmu(ctx, opts, extra)
	if err != nil {
		return nil, err
	}
	return &Backend{drv: &emuDriver{lib: lib}}, nil
}

// newEmulatedLimits is the emulated backend placing weights as a device
// with lim would (regions wrapped or declined, weights in a region or
// copied, buffers bounded), so tests exercise the GPU driver's placement
// decisions and the dispatch code's buffer offsets.
func newEmulatedLimits(ctx context.Context, opts Options, lim deviceLimits) (*Backend, error) {
	lib, _, err := buildEmu(ctx, opts, "")
	if err != nil {
		return nil, err
	}
	return &Backend{drv: &emuDriver{lib: lib, place: &placement{lim: lim}}}, nil
}

// buffer is a driver's buffer.
type buffer any

// binding binds a buffer (at a byte offset) or inline bytes to a kernel's
// buffer index.
type binding struct {
	index int
	buf   buffer
	off   int
	bytes []byte
}

// driver is what the backend needs of a device: the GPU binding and the
// emulator implement it. Dispatches are queued in order; wait runs them all.
type driver interface {
	name() string
	alloc(size int) (buffer, error)
	// host returns the buffer's memory as the CPU sees it.
	host(b buffer) []byte
	// free releases b once the work queued so far has finished.
	free(b buffer)
	// weight returns a buffer holding data (read-only) and the byte offset
	// of data's first byte in it, a multiple of align (the size of the
	// elements the kernels read).
	weight(data []byte, align int) (buffer, int, error)
	// idle reports whether no queued work may still touch any buffer.
	idle() bool
	dispatch(kernel string, groups, threads [3]int, binds []binding)
	wait(ctx context.Context) error
	close()
}

// Backend is the Metal tensor.Backend. Its methods decide which kernel runs
// with which buffers on which grid; the driver runs them on the GPU or in the
// emulator.
type Backend struct {
	drv driver
	err error
}

var _ tensor.Backend = (*Backend)(nil)

// tens is a Backend tensor: a float32 buffer.
type tens struct {
	buf buffer
	n   int
}

// Len returns the number of float32 elements.
func (t *tens) Len() int { return t.n }

// Name names the backend: "metal" or "metal-emu".
func (b *Backend) Name() string { return b.drv.name() }

// Close releases the device resources. The backend must not be used after.
func (b *Backend) Close() { b.drv.close() }

func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func tn(t tensor.Tensor) *tens {
	x, ok := t.(*tens)
	if !ok {
		panic(fmt.Sprintf("metal: tensor of type %T is not from a metal backend", t))
	}
	return x
}

// Alloc returns a tensor of n float32 elements.
func (b *Backend) Alloc(n int) tensor.Tensor {
	buf, err := b.drv.alloc(4 * n)
	if err != nil {
		panic(fmt.Sprintf("metal: alloc %d floats: %v", n, err))
	}
	return &tens{buf: buf, n: n}
}

// Free releases t once the work queued on it has finished.
func (b *Backend) Free(t tensor.Tensor) {
	x := tn(t)
	if x.buf != nil {
		b.drv.free(x.buf)
		x.buf = nil
	}
}

func checkRange(what string, off, n, length int) {
	if off < 0 || n < 0 || off+n > length {
		panic(fmt.Sprintf("metal: %s of %d elements at %d outside a tensor of %d", what, n, off, length))
	}
}

// Write copies src into t[off : off+len(src)]. When queued work may still use
// t, the copy is queued behind it.
func (b *Backend) Write(t tensor.Tensor, off int, src []float32) {
	x := tn(t)
	checkRange("write", off, len(src), x.n)
	if len(src) == 0 {
		return
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), 4*len(src))
	if b.drv.idle() {
		copy(b.drv.host(x.buf)[4*off:], raw)
		return
	}
	tmp, err := b.drv.alloc(len(raw))
	if err != nil {
		panic(fmt.Sprintf("metal: staging buffer: %v", err))
	}
	copy(b.drv.host(tmp), raw)
	b.copy2D(x.buf, 4*off, 0, tmp, 0, 0, 1, len(src))
	b.drv.free(tmp)
}

// Read waits for the queued work and copies t[off : off+len(dst)] into dst.
func (b *Backend) Read(ctx context.Context, t tensor.Tensor, off int, dst []float32) error {
	x := tn(t)
	checkRange("read", off, len(dst), x.n)
	if err := b.Sync(ctx); err != nil {
		return err
	}
	if len(dst) > 0 {
		raw := unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst))
		copy(raw, b.drv.host(x.buf)[4*off:])
	}
	return nil
}

// Sync waits for all queued work and reports the first error since the last
// Sync or Read.
func (b *Backend) Sync(ctx context.Context) error {
	err := b.drv.wait(ctx)
	if b.err != nil {
		err = b.err
		b.err = nil
	}
	if err != nil {
		return fmt.Errorf("metal: %w", err)
	}
	return nil
}

// params packs kernel parameters: each value is one 32-bit field (int and
// uint32 as uint, float32 as float), in the order of the MSL struct.
func params(vals ...any) []byte {
	out := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		var u uint32
		switch x := v.(type) {
		case int:
			if x < 0 || x > math.MaxUint32 {
				panic(fmt.Sprintf("metal: kernel parameter %d out of range", x))
			}
			u = uint32(x)
		case uint32:
			u = x
		case float32:
			u = math.Float32bits(x)
		case bool:
			if x {
				u = 1
			}
		default:
			panic(fmt.Sprintf("metal: kernel parameter of type %T", v))
		}
		out = binary.LittleEndian.AppendUint32(out, u)
	}
	return out
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func arg(i int, t tensor.Tensor, offElems int) binding {
	return binding{index: i, buf: tn(t).buf, off: 4 * offElems}
}

func bytesArg(i int, p []byte) binding { return binding{index: i, bytes: p} }

func (b *Backend) run(kernel string, groups, threads [3]int, binds ...binding) {
	for _, g := range groups {
		if g == 0 {
			return // nothing to do
		}
	}
	b.drv.dispatch(kernel, groups, threads, binds)
}

// upload returns a fresh buffer holding data, freed once queued work is done.
func (b *Backend) upload(data []byte) buffer {
	buf, err := b.drv.alloc(len(data))
	if err != nil {
		panic(fmt.Sprintf("metal: upload %d bytes: %v", len(data), err))
	}
	copy(b.drv.host(buf), data)
	return buf
}

func int32Bytes(v []int32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(x))
	}
	return out
}

func (b *Backend) copy2D(dst buffer, dstOffBytes, dstStride int, src buffer, srcOffBytes, srcStride, rows, cols int) {
	b.run("copy_2d", [3]int{ceilDiv(cols, 64), ceilDiv(rows, 4), 1}, [3]int{64, 4, 1},
		binding{index: 0, buf: dst, off: dstOffBytes},
		binding{index: 1, buf: src, off: srcOffBytes},
		bytesArg(2, params(rows, cols, dstStride, srcStride)))
}

// Copy copies rows × cols elements between strided row layouts.
func (b *Backend) Copy(dst tensor.Tensor, dstOff, dstStride int, src tensor.Tensor, srcOff, srcStride, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	checkRange("copy destination", dstOff, (rows-1)*dstStride+cols, dst.Len())
	checkRange("copy source", srcOff, (rows-1)*srcStride+cols, src.Len())
	b.copy2D(tn(dst).buf, 4*dstOff, dstStride, tn(src).buf, 4*srcOff, srcStride, rows, cols)
}

// weightHandle is what the backend caches in tensor.Weight.Handle.
type weightHandle struct {
	owner                *Backend
	data, scales, biases buffer
	dOff, sOff, bOff     int
	f32                  buffer // float32 copy of a vector weight
}

// handle returns w's buffers, cached in w.Handle when that is free.
func (b *Backend) handle(w *tensor.Weight) *weightHandle {
	if h, ok := w.Handle.(*weightHandle); ok && h.owner == b {
		return h
	}
	h := &weightHandle{owner: b}
	var err error
	if h.data, h.dOff, err = b.drv.weight(w.Data, w.DType.Size()); err != nil {
		panic(fmt.Sprintf("metal: weight %s: %v", w.Name, err))
	}
	if q := w.Quant; q != nil {
		if h.scales, h.sOff, err = b.drv.weight(q.Scales.Data, q.Scales.DType.Size()); err != nil {
			panic(fmt.Sprintf("metal: weight %s: %v", q.Scales.Name, err))
		}
		if h.biases, h.bOff, err = b.drv.weight(q.Biases.Data, q.Biases.DType.Size()); err != nil {
			panic(fmt.Sprintf("metal: weight %s: %v", q.Biases.Name, err))
		}
	} else {
		h.scales, h.sOff, h.biases, h.bOff = h.data, h.dOff, h.data, h.dOff
	}
	if w.Handle == nil {
		w.Handle = h
	}
	return h
}

// rowsKernel returns the kernel name for a weight's stored form and its
// loader parameters (cols, bits, group, row bytes).
func rowsKernel(base string, w *tensor.Weight) (string, []any) {
	cols := w.Cols()
	if q := w.Quant; q != nil {
		return base + "_q" + dtypeSuffix(q.Scales.DType), []any{cols, q.Bits, q.Group, w.RowBytes()}
	}
	return base + dtypeSuffix(w.DType), []any{cols, 0, 1, w.RowBytes()}
}

func dtypeSuffix(d tensor.DType) string {
	switch d {
	case tensor.F32:
		return "_f32"
	case tensor.F16:
		return "_f16"
	case tensor.BF16:
		return "_bf16"
	}
	panic(fmt.Sprintf("metal: no kernels for weights of dtype %s", d))
}

func (h *weightHandle) binds(first int) []binding {
	return []binding{
		{index: first, buf: h.data, off: h.dOff},
		{index: first + 1, buf: h.scales, off: h.sOff},
		{index: first + 2, buf: h.biases, off: h.bOff},
	}
}

// vector returns a float32 buffer holding all elements of a small weight
// (norm weights, conv taps, A_log, dt_bias), converted once and cached.
func (b *Backend) vector(w *tensor.Weight) buffer {
	h := b.handle(w)
	if h.f32 != nil {
		return h.f32
	}
	v := w.Float32s()
	buf := b.upload(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)))
	if w.Handle == h {
		h.f32 = buf
	} else {
		defer b.drv.free(buf)
	}
	return buf
}

// Embed writes row ids[i] of w to out[i·H : (i+1)·H].
func (b *Backend) Embed(out tensor.Tensor, w *tensor.Weight, ids []int32) {
	if len(ids) == 0 {
		return
	}
	v, hdim := w.Rows(), w.Cols()
	for i, id := range ids {
		if id < 0 || int(id) >= v {
			panic(fmt.Sprintf("metal: embed: id %d at %d outside the %d rows of %s", id, i, v, w.Name))
		}
	}
	checkRange("embed output", 0, len(ids)*hdim, out.Len())
	k, lp := rowsKernel("embed", w)
	idb := b.upload(int32Bytes(ids))
	binds := append([]binding{arg(0, out, 0), {index: 1, buf: idb}}, b.handle(w).binds(2)...)
	binds = append(binds, bytesArg(5, params(append([]any{len(ids)}, lp...)...)))
	b.run(k, [3]int{ceilDiv(hdim, 64), len(ids), 1}, [3]int{64, 1, 1}, binds...)
	b.drv.free(idb)
}

// mvMaxRows is the largest row count that takes the matrix-vector kernel.
const mvMaxRows = 8

// MatMul computes out[rows, O] = x[rows, I] · wᵀ.
func (b *Backend) MatMul(out, x tensor.Tensor, w *tensor.Weight, rows int) {
	o, in := w.Rows(), w.Cols()
	if rows == 0 || o == 0 {
		return
	}
	checkRange("matmul input", 0, rows*in, x.Len())
	checkRange("matmul output", 0, rows*o, out.Len())
	h := b.handle(w)
	if rows <= mvMaxRows {
		k, lp := rowsKernel("mv", w)
		binds := append([]binding{arg(0, out, 0), arg(1, x, 0)}, h.binds(2)...)
		binds = append(binds, bytesArg(5, params(append([]any{rows, o}, lp...)...)))
		b.run(k, [3]int{ceilDiv(o, 16), 1, 1}, [3]int{128, 1, 1}, binds...)
		return
	}
	base, tile := "mm", 32
	if rows >= 64 && o >= 64 {
		base, tile = "mm64", 64
	}
	k, lp := rowsKernel(base, w)
	binds := append([]binding{arg(0, out, 0), arg(1, x, 0)}, h.binds(2)...)
	binds = append(binds, bytesArg(5, params(append([]any{rows, o}, lp...)...)))
	b.run(k, [3]int{ceilDiv(o, tile), ceilDiv(rows, tile), 1}, [3]int{128, 1, 1}, binds...)
}

func (b *Backend) elementwise(kernel string, n int, ts ...tensor.Tensor) {
	if n == 0 {
		return
	}
	var binds []binding
	for i, t := range ts {
		checkRange(kernel, 0, n, t.Len())
		binds = append(binds, arg(i, t, 0))
	}
	binds = append(binds, bytesArg(len(ts), params(n)))
	b.run(kernel, [3]int{ceilDiv(n, 256), 1, 1}, [3]int{256, 1, 1}, binds...)
}

// Add computes dst[i] += src[i] for i < n.
func (b *Backend) Add(dst, src tensor.Tensor, n int) { b.elementwise("add_f32", n, dst, src) }

// SwiGLU computes out[i] = silu(gate[i]) · up[i] for i < n.
func (b *Backend) SwiGLU(out, gate, up tensor.Tensor, n int) {
	b.elementwise("swiglu_f32", n, out, gate, up)
}

// SigmoidMul computes x[i] *= sigmoid(gate[i]) for i < n.
func (b *Backend) SigmoidMul(x, gate tensor.Tensor, n int) {
	b.elementwise("sigmoid_mul_f32", n, x, gate)
}

func checkVector(what string, w *tensor.Weight, n int) {
	if w.Elems() != n || w.Quant != nil {
		panic(fmt.Sprintf("metal: %s weight %s has %d elements, want %d float", what, w.Name, w.Elems(), n))
	}
}

// RMSNorm normalises rows of length n with weight shift + w.
func (b *Backend) RMSNorm(out, x tensor.Tensor, w *tensor.Weight, rows, n int, eps, shift float32) {
	if rows == 0 {
		return
	}
	checkVector("rmsnorm", w, n)
	checkRange("rmsnorm input", 0, rows*n, x.Len())
	checkRange("rmsnorm output", 0, rows*n, out.Len())
	wb := b.vector(w)
	b.run("rmsnorm", [3]int{ceilDiv(rows, 4), 1, 1}, [3]int{128, 1, 1},
		arg(0, out, 0), arg(1, x, 0), binding{index: 2, buf: wb}, bytesArg(3, params(rows, n, eps, shift)))
}

// GatedRMSNorm computes out = w · rms(x) · silu(z) over rows of length n.
func (b *Backend) GatedRMSNorm(out, x, z tensor.Tensor, w *tensor.Weight, rows, n int, eps float32) {
	if rows == 0 {
		return
	}
	checkVector("gated rmsnorm", w, n)
	for _, t := range []tensor.Tensor{out, x, z} {
		checkRange("gated rmsnorm", 0, rows*n, t.Len())
	}
	wb := b.vector(w)
	b.run("gated_rmsnorm", [3]int{ceilDiv(rows, 4), 1, 1}, [3]int{128, 1, 1},
		arg(0, out, 0), arg(1, x, 0), arg(2, z, 0), binding{index: 3, buf: wb}, bytesArg(4, params(rows, n, eps, float32(0))))
}

// RoPE rotates the first rd dims of every head of x in place.
func (b *Backend) RoPE(x tensor.Tensor, pos []int32, heads, hd, rd int, theta float32) {
	if len(pos) == 0 || rd == 0 {
		return
	}
	if rd%2 != 0 || rd > hd {
		panic(fmt.Sprintf("metal: rope: %d rotated dims of a %d-dim head", rd, hd))
	}
	checkRange("rope", 0, len(pos)*heads*hd, x.Len())
	pb := b.upload(int32Bytes(pos))
	half := rd / 2
	tx := min(half, 32)
	b.run("rope", [3]int{ceilDiv(half, tx), heads, len(pos)}, [3]int{tx, 1, 1},
		arg(0, x, 0), binding{index: 1, buf: pb}, bytesArg(2, params(len(pos), heads, hd, rd, theta)))
	b.drv.free(pb)
}

// attMaxHD is the largest head dimension of the attention kernel.
const attMaxHD = 512

// Attention computes causal grouped-query attention; one dispatch per row.
// The queries at padding positions (a.Len) are skipped and get zeros.
func (b *Backend) Attention(out, q, k, v tensor.Tensor, a tensor.AttnArgs) {
	if a.B == 0 || a.T == 0 {
		return
	}
	if a.HeadDim > attMaxHD || a.KVHeads == 0 || a.Heads%a.KVHeads != 0 {
		panic(fmt.Sprintf("metal: attention: %d heads over %d kv heads of dim %d (max %d)", a.Heads, a.KVHeads, a.HeadDim, attMaxHD))
	}
	if a.Prefix != nil && len(a.Prefix) != a.B {
		panic(fmt.Sprintf("metal: attention: %d prefixes for %d rows", len(a.Prefix), a.B))
	}
	if a.Len != nil && len(a.Len) != a.B {
		panic(fmt.Sprintf("metal: attention: %d row lengths for %d rows", len(a.Len), a.B))
	}
	n := a.B * a.T
	checkRange("attention q", 0, n*a.Heads*a.HeadDim, q.Len())
	checkRange("attention k", 0, n*a.KVHeads*a.HeadDim, k.Len())
	checkRange("attention v", 0, n*a.KVHeads*a.HeadDim, v.Len())
	checkRange("attention out", 0, n*a.Heads*a.HeadDim, out.Len())
	for row := 0; row < a.B; row++ {
		pk, pv, plen := k, v, 0
		if a.Prefix != nil && a.Prefix[row].Len > 0 {
			p := a.Prefix[row]
			checkRange("attention prefix k", 0, p.Len*a.KVHeads*a.HeadDim, p.K.Len())
			checkRange("attention prefix v", 0, p.Len*a.KVHeads*a.HeadDim, p.V.Len())
			pk, pv, plen = p.K, p.V, p.Len
		}
		b.run("attention", [3]int{a.T, a.Heads, 1}, [3]int{32, 1, 1},
			arg(0, out, 0), arg(1, q, 0), arg(2, k, 0), arg(3, v, 0), arg(4, pk, 0), arg(5, pv, 0),
			bytesArg(6, params(a.T, a.Heads, a.KVHeads, a.HeadDim, plen, row, a.RowLen(row), a.Scale)))
	}
}

// CausalConv computes the depthwise causal conv plus SiLU, and the new
// states; one dispatch per row.
func (b *Backend) CausalConv(out, x tensor.Tensor, w *tensor.Weight, a tensor.ConvArgs) {
	if a.B == 0 || a.T == 0 {
		return
	}
	if w.Elems() != a.D*a.K || w.Quant != nil {
		panic(fmt.Sprintf("metal: conv weight %s has %d elements, want %d×%d", w.Name, w.Elems(), a.D, a.K))
	}
	n := a.B * a.T * a.D
	checkRange("conv input", 0, n, x.Len())
	checkRange("conv output", 0, n, out.Len())
	wb := b.vector(w)
	stateOf := func(row int) (tensor.Tensor, bool) {
		if a.State == nil || a.State[row] == nil || a.K < 2 {
			return x, false
		}
		checkRange("conv state", 0, (a.K-1)*a.D, a.State[row].Len())
		return a.State[row], true
	}
	for row := 0; row < a.B; row++ {
		st, has := stateOf(row)
		b.run("causal_conv", [3]int{ceilDiv(a.D, 64), a.T, 1}, [3]int{64, 1, 1},
			arg(0, out, 0), arg(1, x, 0), binding{index: 2, buf: wb}, arg(3, st, 0),
			bytesArg(4, params(a.T, a.D, a.K, row, has, 0)))
	}
	if a.NewState == nil || a.K < 2 {
		return
	}
	for row := 0; row < a.B; row++ {
		ns := a.NewState[row]
		if ns == nil {
			continue
		}
		ln := a.T
		if a.Len != nil {
			ln = a.Len[row]
		}
		if ln < 0 || ln > a.T {
			panic(fmt.Sprintf("metal: conv: row %d length %d outside 0..%d", row, ln, a.T))
		}
		checkRange("conv new state", 0, (a.K-1)*a.D, ns.Len())
		st, has := stateOf(row)
		if has && tn(st) == tn(ns) {
			// Resuming in place: read the old state from a copy.
			tmp := b.Alloc((a.K - 1) * a.D)
			b.Copy(tmp, 0, a.D, st, 0, a.D, a.K-1, a.D)
			defer b.Free(tmp)
			st = tmp
		}
		b.run("conv_state", [3]int{ceilDiv(a.D, 64), a.K - 1, 1}, [3]int{64, 1, 1},
			arg(0, ns, 0), arg(1, x, 0), arg(2, st, 0), bytesArg(3, params(a.T, a.D, a.K, row, has, ln)))
	}
}

// Limits of the chunked delta rule kernels: key and value head dimensions
// and the chunk length (their threadgroup arrays are sized for these).
const (
	deltaMaxDK    = 128
	deltaMaxDV    = 128
	deltaMaxChunk = 64
)

// GatedDelta runs the gated delta rule in the chunked form of qwen35.md §5.5
// with a float32 state: delta_chunk_prep solves every chunk's triangular
// system of every row and head at once (it does not depend on the state),
// then delta_chunk_scan carries each row's state through its chunks in order.
func (b *Backend) GatedDelta(out, qkv, alpha, beta tensor.Tensor, aLog, dtBias *tensor.Weight, a tensor.DeltaArgs) {
	if a.B == 0 || a.T == 0 {
		return
	}
	if a.DK > deltaMaxDK || a.DV > deltaMaxDV || a.DK <= 0 || a.DV <= 0 || a.NK <= 0 || a.NV%a.NK != 0 {
		panic(fmt.Sprintf("metal: gated delta: %d value heads of dim %d over %d key heads of dim %d (dims at most %d and %d)",
			a.NV, a.DV, a.NK, a.DK, deltaMaxDK, deltaMaxDV))
	}
	if a.Chunk <= 0 || a.Chunk > deltaMaxChunk {
		panic(fmt.Sprintf("metal: gated delta: chunk %d outside 1..%d", a.Chunk, deltaMaxChunk))
	}
	if len(a.State) != a.B {
		panic(fmt.Sprintf("metal: gated delta: %d states for %d rows", len(a.State), a.B))
	}
	checkVector("A_log", aLog, a.NV)
	checkVector("dt_bias", dtBias, a.NV)
	n := a.B * a.T
	checkRange("delta qkv", 0, n*(2*a.NK*a.DK+a.NV*a.DV), qkv.Len())
	checkRange("delta alpha", 0, n*a.NV, alpha.Len())
	checkRange("delta beta", 0, n*a.NV, beta.Len())
	checkRange("delta out", 0, n*a.NV*a.DV, out.Len())
	for row, st := range a.State {
		if st == nil {
			panic(fmt.Sprintf("metal: gated delta: row %d has no state", row))
		}
		checkRange("delta state", 0, a.NV*a.DK*a.DV, st.Len())
	}
	c := a.Chunk
	nc := ceilDiv(a.T, c)
	blocks := a.B * a.NV * nc
	c8, k8, v32 := 8*ceilDiv(c, 8), 8*ceilDiv(a.DK, 8), 32*ceilDiv(a.DV, 32)
	qn := b.Alloc(n * a.NK * a.DK)
	kn := b.Alloc(n * a.NK * a.DK)
	bt := b.Alloc(n * a.NV)
	g := b.Alloc(n * a.NV)
	e := b.Alloc(blocks * 2 * c)
	w := b.Alloc(blocks * c8 * k8)
	u := b.Alloc(blocks * c8 * v32)
	pm := b.Alloc(blocks * c8 * c8)
	qe := b.Alloc(blocks * c8 * k8)
	kd := b.Alloc(blocks * c8 * k8)
	defer func() {
		for _, t := range []tensor.Tensor{qn, kn, bt, g, e, w, u, pm, qe, kd} {
			b.Free(t)
		}
	}()
	p := params(a.T, a.NK, a.NV, a.DK, a.DV, 0, n)
	b.run("delta_qk", [3]int{a.NK, n, 1}, [3]int{32, 1, 1}, arg(0, qn, 0), arg(1, kn, 0), arg(2, qkv, 0), bytesArg(3, p))
	b.run("delta_gates", [3]int{ceilDiv(a.NV, 32), n, 1}, [3]int{32, 1, 1},
		arg(0, bt, 0), arg(1, g, 0), arg(2, alpha, 0), arg(3, beta, 0),
		binding{index: 4, buf: b.vector(aLog)}, binding{index: 5, buf: b.vector(dtBias)}, bytesArg(6, p))
	b.run("delta_chunk_prep", [3]int{nc, a.NV, a.B}, [3]int{128, 1, 1},
		arg(0, e, 0), arg(1, w, 0), arg(2, u, 0), arg(3, pm, 0), arg(4, qe, 0), arg(5, kd, 0),
		arg(6, qn, 0), arg(7, kn, 0), arg(8, qkv, 0), arg(9, bt, 0), arg(10, g, 0),
		bytesArg(11, params(a.T, a.NK, a.NV, a.DK, a.DV, 0, c, nc)))
	for row, st := range a.State {
		b.run("delta_chunk_scan", [3]int{ceilDiv(a.DV, 32), a.NV, 1}, [3]int{128, 1, 1},
			arg(0, out, 0), arg(1, st, 0), arg(2, e, 0), arg(3, w, 0), arg(4, u, 0), arg(5, pm, 0),
			arg(6, qe, 0), arg(7, kd, 0), bytesArg(8, params(a.T, a.NK, a.NV, a.DK, a.DV, row, c, nc)))
	}
}

// regionMapper is implemented by drivers that can wrap a whole mmap'd file.
type regionMapper interface {
	mapRegion(data []byte) error
}

// MapRegion tells the backend that data (a whole mmap'd checkpoint file)
// stays mapped for the backend's life; weights that lie inside it are then
// used without a copy. A region the device cannot wrap (not page-aligned,
// larger than its largest buffer, or refused by Metal) is declined, not an
// error: its weights are copied into buffers instead. The emulator ignores
// it unless a test gave it a device's limits.
func (b *Backend) MapRegion(data []byte) error {
	if m, ok := b.drv.(regionMapper); ok {
		return m.mapRegion(data)
	}
	return nil
}

// warmer is implemented by drivers that compile pipelines ahead of use.
type warmer interface {
	warmUp(ctx context.Context) error
}

// WarmUp creates every kernel pipeline now, so that the first forward pass
// does not pay for it. The emulator has nothing to warm.
func (b *Backend) WarmUp(ctx context.Context) error {
	if w, ok := b.drv.(warmer); ok {
		return w.warmUp(ctx)
	}
	return nil
}
