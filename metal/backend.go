package metal

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"
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
	// PoolLimit bounds the bytes of freed tensor buffers kept for reuse
	// (0: bufpool.DefaultLimit, < 0: none kept); see
	// [Backend.SetPoolLimit].
	PoolLimit int64
	// CommandTimeout bounds each wait for the device (Read, Sync): work
	// not finished by then fails with a tensor.ErrDeviceFault. 0 means
	// DefaultCommandTimeout on the GPU and no bound under the emulator
	// (whose kernels run on the CPU, slowly); < 0 means no bound.
	CommandTimeout time.Duration
	// Faults, for tests, injects faults into the emulator's dispatches
	// (see Faults). New refuses it.
	Faults *Faults
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
	return newEmulatedDevice(ctx, opts, emuDevice{}, extra)
}

// newEmulatedDevice is newEmulated on an emulated device that lacks what
// dev says (tests of the int8 probe's refusals).
func newEmulatedDevice(ctx context.Context, opts Options, dev emuDevice, extra string) (*Backend, error) {
	lib, _, err := buildEmu(ctx, opts, extra)
	if err != nil {
		return nil, err
	}
	return newBackend(&emuDriver{lib: lib, dev: dev, faults: opts.Faults}, opts, false), nil
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
	return newBackend(&emuDriver{lib: lib, place: &placement{lim: lim}, faults: opts.Faults}, opts, false), nil
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
	drv  driver
	err  error
	int8 int8State
	mem  memPool
	// timeout bounds each wait for the device (0: none); read-only after
	// the backend is made.
	timeout time.Duration
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
func (b *Backend) Close() {
	b.mem.close(b.drv)
	b.drv.close()
}

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

// Alloc returns a tensor of n float32 elements (a buffer given back by
// Free is reused).
func (b *Backend) Alloc(n int) tensor.Tensor {
	if buf, ok := b.mem.get(4 * n); ok {
		return &tens{buf: buf, n: n}
	}
	buf, err := b.drv.alloc(4 * n)
	if err != nil {
		panic(fmt.Sprintf("metal: alloc %d floats: %v", n, err))
	}
	return &tens{buf: buf, n: n}
}

// Free gives t's buffer back for reuse once the work queued on it has
// finished.
func (b *Backend) Free(t tensor.Tensor) {
	x := tn(t)
	if x.buf != nil {
		b.mem.put(b.drv, 4*x.n, x.buf)
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
// Sync or Read: ctx's end as it is; a failed command buffer, a wait past
// the backend's bound (Options.CommandTimeout) or a kernel that could not
// be dispatched as an error wrapping tensor.ErrDeviceFault.
func (b *Backend) Sync(ctx context.Context) error {
	wctx := ctx
	if b.timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, b.timeout)
		defer cancel()
	}
	werr := b.drv.wait(wctx)
	b.mem.settle(b.drv)
	return b.syncErr(ctx, wctx, werr)
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
	} else if q := w.Int8; q != nil {
		// The channel scales (float32) are the int8 weight's "scales".
		if h.scales, h.sOff, err = b.drv.weight(float32Bytes(q.Scales), 4); err != nil {
			panic(fmt.Sprintf("metal: weight %s: channel scales: %v", w.Name, err))
		}
		h.biases, h.bOff = h.scales, h.sOff
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
// does not pay for it (the emulator has none to create), then probes the
// int8 kernels (see Int8Kernel). int8 being unavailable is not an error of
// WarmUp; it returns an error when a float pipeline cannot be made or ctx
// ends.
func (b *Backend) WarmUp(ctx context.Context) error {
	if w, ok := b.drv.(warmer); ok {
		if err := w.warmUp(ctx); err != nil {
			return err
		}
	}
	return b.probeInt8(ctx)
}
