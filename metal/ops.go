package metal

import (
	"fmt"

	"github.com/startlux/startlux/tensor"
)

// The tensor.Backend operations: each checks its arguments, picks its
// kernel and grid, and queues the dispatch (see run).

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

// MatMul computes out[rows, O] = x[rows, I] · wᵀ. An int8 weight runs the
// W8A8 product of tensor/int8.go on the int8 kernels (int8.go), which must
// be available (Int8Kernel); otherwise MatMul panics with the reason.
func (b *Backend) MatMul(out, x tensor.Tensor, w *tensor.Weight, rows int) {
	o, in := w.Rows(), w.Cols()
	if rows == 0 || o == 0 {
		return
	}
	checkRange("matmul input", 0, rows*in, x.Len())
	checkRange("matmul output", 0, rows*o, out.Len())
	if w.DType == tensor.I8 {
		b.matMulInt8(out, x, w, rows)
		return
	}
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
