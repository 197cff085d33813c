package metal

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/startlux/startlux/tensor"
)

// This file is the self-check a daemon can run at warm-up before it serves
// on the GPU: every kernel family on small shapes with tails, through the
// backend under check and through a reference backend (the CPU), compared
// vector by vector. It knows nothing of Qwen; the whole-model check (the
// demo model's letter logits) belongs to the caller.

// WeightForm is a stored form of weights MatMul reads: a float dtype, MLX
// affine quantisation (Bits > 0) with scales and biases of DType, or int8
// (DType tensor.I8, the W8A8 weights of tensor/int8.go).
type WeightForm struct {
	DType       tensor.DType
	Bits, Group int
}

// String names the form as the kernels' suffixes do ("bf16", "q4g64_bf16",
// "i8").
func (f WeightForm) String() string {
	d := map[tensor.DType]string{tensor.F32: "f32", tensor.F16: "f16", tensor.BF16: "bf16", tensor.I8: "i8"}[f.DType]
	if d == "" {
		d = f.DType.String()
	}
	if f.Bits > 0 {
		return fmt.Sprintf("q%dg%d_%s", f.Bits, f.Group, d)
	}
	return d
}

// FamilyResult is the outcome of one kernel family.
type FamilyResult struct {
	// Family names it: "elementwise", "copy", "embed bf16", "matmul
	// q4g64_bf16", "matmul i8", "rmsnorm", "rope", "attention", "conv",
	// "gated delta".
	Family string
	// MaxRel is the largest relative error of one output vector against
	// the reference, and Tol its bound.
	MaxRel, Tol float64
	// Where names that vector ("head 2 of token 5", "row 3").
	Where string
	// Err is why the family could not be compared at all: a kernel that
	// did not compile or dispatch, a failed command buffer, a panic, the
	// context's end, or an output that is not finite.
	Err error
}

// OK reports whether the family ran and agreed within its tolerance.
func (r FamilyResult) OK() bool { return r.Err == nil && r.MaxRel <= r.Tol }

// Note is the line a daemon shows when the family fails, such as "Metal
// disabled: attention kernel differs from the CPU by 3.1e-02 at head 2 of
// token 5"; "" when it passed. A failed int8 family disables int8 only:
// "int8 disabled: …".
func (r FamilyResult) Note() string {
	off := "Metal"
	if r.Family == int8Family {
		off = "int8"
	}
	switch {
	case r.Err != nil:
		return fmt.Sprintf("%s disabled: %s kernel failed: %v", off, r.Family, r.Err)
	case r.MaxRel > r.Tol:
		return fmt.Sprintf("%s disabled: %s kernel differs from the CPU by %.1e at %s", off, r.Family, r.MaxRel, r.Where)
	}
	return ""
}

// AllWeightForms are the float and MLX-quantised forms the kernels are
// instantiated for, each probed when SelfCheck is given none. The int8 form
// ({DType: tensor.I8}) is not among them: it runs only where the int8
// kernels are available, and is checked when a caller names it.
func AllWeightForms() []WeightForm {
	return []WeightForm{
		{DType: tensor.F32}, {DType: tensor.F16}, {DType: tensor.BF16},
		{DType: tensor.F32, Bits: 4, Group: 64}, {DType: tensor.F16, Bits: 4, Group: 64}, {DType: tensor.BF16, Bits: 4, Group: 64},
		{DType: tensor.BF16, Bits: 8, Group: 64},
	}
}

// FormsOf returns the distinct stored forms of the two-dimensional weights
// among ws (the matrices MatMul and Embed read as stored; vectors are
// converted to float32 once and need no form of their own), in the order
// they first appear: the forms a daemon passes to SelfCheck for the
// checkpoint it loaded.
func FormsOf(ws []*tensor.Weight) []WeightForm {
	var out []WeightForm
	seen := map[WeightForm]bool{}
	for _, w := range ws {
		if w == nil || len(w.Shape) != 2 {
			continue
		}
		f := WeightForm{DType: w.DType}
		switch {
		case w.Quant != nil:
			f = WeightForm{DType: w.Quant.Scales.DType, Bits: w.Quant.Bits, Group: w.Quant.Group}
		case w.Int8 != nil:
			f = WeightForm{DType: tensor.I8}
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// SelfCheck runs every kernel family on be and on ref and compares their
// outputs: elementwise operations, strided copies, embedding and MatMul in
// each weight form of forms (all of AllWeightForms when nil; a daemon
// passes those of its checkpoint), both norms, RoPE, attention with a
// prefix and padding, the causal conv with its states, and the chunked
// gated delta rule with its states. The int8 form gets one family, "matmul
// i8": the int8 self-check that Int8Kernel's probe runs (selfcheck_int8.go),
// against tensor.Int8MatMul rather than ref, failed with the reason when be
// reports int8 unavailable. Inputs are fixed pseudo-random data, so a run
// is repeatable. A family that panics, fails to run or runs past ctx is
// reported with Err; the others still run.
func SelfCheck(ctx context.Context, be, ref tensor.Backend, forms []WeightForm) []FamilyResult {
	if forms == nil {
		forms = AllWeightForms()
	}
	type family struct {
		name string
		run  func(p *probe)
	}
	fams := []family{{"elementwise", probeElementwise}, {"copy", probeCopy}}
	for _, f := range forms {
		f := f
		if f.DType == tensor.I8 {
			fams = append(fams, family{int8Family, probeInt8})
			continue
		}
		fams = append(fams, family{"embed " + f.String(), func(p *probe) { probeEmbed(p, f) }},
			family{"matmul " + f.String(), func(p *probe) { probeMatMul(p, f) }})
	}
	fams = append(fams, family{"rmsnorm", probeNorms}, family{"rope", probeRoPE}, family{"attention", probeAttention},
		family{"conv", probeConv}, family{"gated delta", probeDelta})
	out := make([]FamilyResult, 0, len(fams))
	for i, f := range fams {
		p := &probe{ctx: ctx, be: be, ref: ref, rng: rand.New(rand.NewPCG(uint64(i), 19))}
		p.res.Family = f.name
		p.runGuarded(f.run)
		out = append(out, p.res)
	}
	return out
}

// probe is one family's run: its inputs on both backends (on be only when
// ref is nil, as for the int8 self-check) and its result.
type probe struct {
	ctx     context.Context
	be, ref tensor.Backend
	rng     *rand.Rand
	res     FamilyResult
	held    []pairT
}

// pairT is one tensor on both backends.
type pairT struct{ b, r tensor.Tensor }

func (p *probe) runGuarded(f func(*probe)) {
	defer func() {
		if r := recover(); r != nil && p.res.Err == nil {
			p.res.Err = fmt.Errorf("panic: %v", r)
		}
		for _, t := range p.held {
			if t.b != nil {
				p.be.Free(t.b)
			}
			if t.r != nil {
				p.ref.Free(t.r)
			}
		}
		// A failure of this family must not be reported by the next. Once
		// ctx has ended the wait returns at once (every family after
		// reports ctx's end anyway), so a GPU that never finishes cannot
		// hold the check.
		if err := p.be.Sync(p.ctx); err != nil && p.res.Err == nil {
			p.res.Err = err
		}
	}()
	if err := p.ctx.Err(); err != nil {
		p.res.Err = err
		return
	}
	f(p)
}

func (p *probe) vec(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(p.rng.NormFloat64() * scale)
	}
	return v
}

// put uploads v to both backends.
func (p *probe) put(v []float32) pairT {
	t := pairT{p.be.Alloc(len(v)), p.ref.Alloc(len(v))}
	p.be.Write(t.b, 0, v)
	p.ref.Write(t.r, 0, v)
	p.held = append(p.held, t)
	return t
}

// out makes an output of n elements, NaN on the backend under check so an
// element its kernel never writes fails the comparison.
func (p *probe) out(n int) pairT {
	nan := make([]float32, n)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	t := pairT{p.be.Alloc(n), p.ref.Alloc(n)}
	p.be.Write(t.b, 0, nan)
	p.held = append(p.held, t)
	return t
}

// compare reads t from both backends and measures each vector of n
// elements: its relative error (counted against at least floor RMS per
// element) against tol. The result keeps the vector that comes closest to
// (or furthest past) its bound, named by where.
func (p *probe) compare(t pairT, n int, tol, floor float64, where func(i int) string) {
	if p.res.Err != nil {
		return
	}
	got, want := make([]float32, t.b.Len()), make([]float32, t.r.Len())
	if err := p.be.Read(p.ctx, t.b, 0, got); err != nil {
		p.res.Err = err
		return
	}
	if err := p.ref.Read(p.ctx, t.r, 0, want); err != nil {
		p.res.Err = fmt.Errorf("reference backend: %w", err)
		return
	}
	for s := 0; s < len(want); s += n {
		e := min(s+n, len(want))
		var num, den float64
		for i := s; i < e; i++ {
			if g := float64(got[i]); math.IsNaN(g) || math.IsInf(g, 0) {
				p.res.Err = fmt.Errorf("element %d of %s is %v (never written, or computed from unwritten memory)", i-s, where(s/n), got[i])
				return
			}
			d := float64(got[i]) - float64(want[i])
			num += d * d
			den += float64(want[i]) * float64(want[i])
		}
		r := math.Sqrt(num / max(den, floor*floor*float64(e-s), 1e-30))
		if p.res.Where == "" || severity(r, tol) > severity(p.res.MaxRel, p.res.Tol) {
			p.res.MaxRel, p.res.Tol, p.res.Where = r, tol, where(s/n)
		}
	}
}

// severity is how close an error comes to its bound (above 1: past it).
func severity(r, tol float64) float64 {
	switch {
	case tol > 0:
		return r / tol
	case r > 0:
		return math.Inf(1)
	}
	return 0
}

func rowOf(i int) string { return fmt.Sprintf("row %d", i) }

func probeElementwise(p *probe) {
	const n = 257
	a, g, u := p.put(p.vec(n, 1)), p.put(p.vec(n, 3)), p.put(p.vec(n, 1))
	sum := p.put(p.vec(n, 1))
	p.be.Add(sum.b, a.b, n)
	p.ref.Add(sum.r, a.r, n)
	p.compare(sum, n, 1e-6, 0, func(int) string { return "add" })
	sw := p.out(n)
	p.be.SwiGLU(sw.b, g.b, u.b, n)
	p.ref.SwiGLU(sw.r, g.r, u.r, n)
	p.compare(sw, n, 1e-5, 0, func(int) string { return "swiglu" })
	p.be.SigmoidMul(a.b, g.b, n)
	p.ref.SigmoidMul(a.r, g.r, n)
	p.compare(a, n, 1e-5, 0, func(int) string { return "sigmoid_mul" })
}

func probeCopy(p *probe) {
	src := p.put(p.vec(9*70, 1))
	dst := p.put(p.vec(3+8*100+65+2, 1))
	p.be.Copy(dst.b, 3, 100, src.b, 7, 70, 9, 63)
	p.ref.Copy(dst.r, 3, 100, src.r, 7, 70, 9, 63)
	p.compare(dst, 100, 0, 0, rowOf)
}

// weight makes an [o, in] weight in form f (in a multiple of the group).
func (p *probe) weight(o, in int, f WeightForm) *tensor.Weight {
	if f.Bits == 0 {
		return tensor.FromFloat32("selfcheck", f.DType, []int{o, in}, p.vec(o*in, 0.2))
	}
	packed := make([]byte, o*in*f.Bits/8)
	for i := range packed {
		packed[i] = byte(p.rng.Uint32())
	}
	return &tensor.Weight{
		Name: "selfcheck", DType: tensor.U32, Shape: []int{o, in}, Data: packed,
		Quant: &tensor.Quant{
			Bits: f.Bits, Group: f.Group,
			Scales: tensor.FromFloat32("selfcheck.scales", f.DType, []int{o, in / f.Group}, p.vec(o*in/f.Group, 0.05)),
			Biases: tensor.FromFloat32("selfcheck.biases", f.DType, []int{o, in / f.Group}, p.vec(o*in/f.Group, 0.1)),
		},
	}
}

// inDim is an input width with a tail for float forms and whole groups for
// quantised ones.
func inDim(f WeightForm) int {
	if f.Bits > 0 {
		return 2 * f.Group
	}
	return 93
}

func probeEmbed(p *probe, f WeightForm) {
	h := inDim(f)
	w := p.weight(37, h, f)
	ids := []int32{0, 36, 5, 5, 17}
	out := p.out(len(ids) * h)
	p.be.Embed(out.b, w, ids)
	p.ref.Embed(out.r, w, ids)
	p.compare(out, h, 1e-6, 0, func(i int) string { return fmt.Sprintf("id %d", ids[i]) })
}

// probeMatMul runs both kernel shapes: the matrix-vector one (3 rows) and
// the tiled one (70 rows, a partial last tile), with 37 outputs.
func probeMatMul(p *probe, f WeightForm) {
	in := inDim(f)
	w := p.weight(37, in, f)
	for _, rows := range []int{3, 70} {
		x := p.put(p.vec(rows*in, 1))
		out := p.out(rows * 37)
		p.be.MatMul(out.b, x.b, w, rows)
		p.ref.MatMul(out.r, x.r, w, rows)
		p.compare(out, 37, 1e-5, 0, func(i int) string { return fmt.Sprintf("row %d of %d", i, rows) })
	}
}

func probeNorms(p *probe) {
	const rows, n = 5, 93
	w := tensor.FromFloat32("selfcheck.norm", tensor.BF16, []int{n}, p.vec(n, 0.3))
	x, z := p.put(p.vec(rows*n, 2)), p.put(p.vec(rows*n, 1))
	out := p.out(rows * n)
	p.be.RMSNorm(out.b, x.b, w, rows, n, 1e-6, 1)
	p.ref.RMSNorm(out.r, x.r, w, rows, n, 1e-6, 1)
	p.compare(out, n, 1e-5, 0, rowOf)
	g := p.out(rows * n)
	p.be.GatedRMSNorm(g.b, x.b, z.b, w, rows, n, 1e-6)
	p.ref.GatedRMSNorm(g.r, x.r, z.r, w, rows, n, 1e-6)
	p.compare(g, n, 1e-5, 0, func(i int) string { return "gated, " + rowOf(i) })
}

func probeRoPE(p *probe) {
	const heads, hd, rd = 3, 40, 16
	pos := []int32{0, 1, 63, 64, 1000, 32767}
	x := p.put(p.vec(len(pos)*heads*hd, 1))
	p.be.RoPE(x.b, pos, heads, hd, rd, 1e7)
	p.ref.RoPE(x.r, pos, heads, hd, rd, 1e7)
	p.compare(x, hd, 1e-4, 0, func(i int) string { return fmt.Sprintf("head %d at position %d", i%heads, pos[i/heads]) })
}

// probeAttention: two rows of 9 queries, GQA 4 over 2, head dim 40, the
// second row after a prefix of 31 positions and padded after 6.
func probeAttention(p *probe) {
	const b, t, heads, kv, hd = 2, 9, 4, 2, 40
	n := b * t
	q, k, v := p.put(p.vec(n*heads*hd, 1)), p.put(p.vec(n*kv*hd, 1)), p.put(p.vec(n*kv*hd, 1))
	pk, pv := p.put(p.vec(31*kv*hd, 1)), p.put(p.vec(31*kv*hd, 1))
	out := p.out(n * heads * hd)
	a := tensor.AttnArgs{B: b, T: t, Heads: heads, KVHeads: kv, HeadDim: hd, Scale: float32(1 / math.Sqrt(hd)), Len: []int{9, 6}}
	ab, ar := a, a
	ab.Prefix = []tensor.KV{{}, {K: pk.b, V: pv.b, Len: 31}}
	ar.Prefix = []tensor.KV{{}, {K: pk.r, V: pv.r, Len: 31}}
	p.be.Attention(out.b, q.b, k.b, v.b, ab)
	p.ref.Attention(out.r, q.r, k.r, v.r, ar)
	p.compare(out, hd, 1e-5, 0, func(i int) string { return fmt.Sprintf("head %d of token %d", i%heads, i/heads) })
}

// probeConv: two rows of 17 positions (the second 5 long), 33 channels,
// width 4, one row resuming a state; both new states compared too.
func probeConv(p *probe) {
	const b, t, d, k = 2, 17, 33, 4
	x := p.put(p.vec(b*t*d, 1))
	w := tensor.FromFloat32("selfcheck.conv", tensor.BF16, []int{d, 1, k}, p.vec(d*k, 0.5))
	st := p.put(p.vec((k-1)*d, 1))
	ns0, ns1 := p.out((k-1)*d), p.out((k-1)*d)
	out := p.out(b * t * d)
	a := tensor.ConvArgs{B: b, T: t, D: d, K: k, Len: []int{17, 5}}
	ab, ar := a, a
	ab.State, ab.NewState = []tensor.Tensor{st.b, nil}, []tensor.Tensor{ns0.b, ns1.b}
	ar.State, ar.NewState = []tensor.Tensor{st.r, nil}, []tensor.Tensor{ns0.r, ns1.r}
	p.be.CausalConv(out.b, x.b, w, ab)
	p.ref.CausalConv(out.r, x.r, w, ar)
	p.compare(out, d, 1e-5, 0, func(i int) string { return fmt.Sprintf("position %d of row %d", i%t, i/t) })
	p.compare(ns0, d, 0, 0, func(i int) string { return "new state of row 0" })
	p.compare(ns1, d, 0, 0, func(i int) string { return "new state of row 1" })
}

// probeDelta: two rows of 65 positions (a full chunk and a short one),
// GQA 2 over 1, dk 24 ≠ dv 40, both rows resuming a state.
func probeDelta(p *probe) {
	const b, t, nk, nv, dk, dv = 2, 65, 1, 2, 24, 40
	n := b * t
	qkv := p.put(p.vec(n*(2*nk*dk+nv*dv), 1))
	alpha, beta := p.put(p.vec(n*nv, 2)), p.put(p.vec(n*nv, 2))
	aLog := tensor.FromFloat32("selfcheck.A_log", tensor.F32, []int{nv}, p.vec(nv, 1))
	dtb := tensor.FromFloat32("selfcheck.dt_bias", tensor.BF16, []int{nv}, p.vec(nv, 1))
	out := p.out(n * nv * dv)
	a := tensor.DeltaArgs{B: b, T: t, NK: nk, NV: nv, DK: dk, DV: dv, Chunk: 64}
	ab, ar := a, a
	var states []pairT
	for range b {
		s := p.put(p.vec(nv*dk*dv, 0.1))
		states = append(states, s)
		ab.State = append(ab.State, s.b)
		ar.State = append(ar.State, s.r)
	}
	p.be.GatedDelta(out.b, qkv.b, alpha.b, beta.b, aLog, dtb, ab)
	p.ref.GatedDelta(out.r, qkv.r, alpha.r, beta.r, aLog, dtb, ar)
	// Strong decays make some outputs cancel to ~1e-5; errors count
	// against at least 1e-2 per element (as the kernel tests do).
	p.compare(out, dv, 5e-5, 1e-2, func(i int) string { return fmt.Sprintf("value head %d of token %d", i%nv, i/nv) })
	for r, s := range states {
		p.compare(s, dk*dv, 5e-5, 0, func(i int) string { return fmt.Sprintf("state of value head %d of row %d", i, r) })
	}
}
