package metal

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"unsafe"

	"github.com/startlux/startlux/tensor"
)

// The int8 self-check: MatMul over int8 weights on the backend under check
// against tensor.Int8MatMul, the CPU int8 reference (the CPU backend's
// kernels agree with it bit for bit), on two products:
//
//   - the integer part: 5 rows × 70 channels × 1041 in-features, the
//     activations integers and halves in [−127, 127] with 127 in every
//     row (so rowScale = 127/127 = 1 and q = rint(x), ties to even) and
//     channel scales of 1, so every output is float32(Σ q·w) and must
//     equal the reference exactly; one sum is 2²⁴ + 12819, where the
//     conversion to float32 rounds (to even) and truncation would not
//     agree; the weights take the extremes −128 and 127;
//   - the epilogue: 37 rows × 70 channels × 93 in-features of random
//     activations (one row zero, one below the 2⁻¹⁰⁰ floor, one holding a
//     NaN, one an infinity) and a quantised random weight; every output
//     within 1e-6 relative of the reference (NaN where it is NaN), a
//     result below the float32 normal range also matching when flushed to
//     zero.
//
// 5 and 37 rows take the two tile heights, 70 channels a full and a partial
// channel tile, 1041 and 93 in-features are multiples of nothing the
// kernels tile by. Outputs start as a NaN no kernel computes, so an element
// never written is told apart from a NaN result.

// int8Family names the int8 family of SelfCheck.
const int8Family = "matmul i8"

// int8Poison marks an output element not yet written.
const int8Poison = 0x7fa5a5a5

// int8Tol is the epilogue's bound, relative per element.
const int8Tol = 1e-6

// checkInt8 runs the int8 self-check on be.
func checkInt8(ctx context.Context, be tensor.Backend) FamilyResult {
	p := &probe{ctx: ctx, be: be, rng: rand.New(rand.NewPCG(8, 19))}
	p.res.Family = int8Family
	p.runGuarded(probeInt8Products)
	return p.res
}

// probeInt8 is the SelfCheck family: the self-check of a backend that says
// it runs int8 (tensor.Int8Backend); one that says it does not fails the
// family with its reason.
func probeInt8(p *probe) {
	if ib, ok := p.be.(tensor.Int8Backend); ok {
		if _, err := ib.Int8Kernel(); err != nil {
			p.res.Err = fmt.Errorf("int8 %w", err)
			return
		}
	}
	probeInt8Products(p)
}

// int8Reason is the reason a failed int8 self-check gives Int8Kernel.
func (r FamilyResult) int8Reason() string {
	if r.Err != nil {
		return fmt.Sprintf("the int8 self-check failed: %v", r.Err)
	}
	return fmt.Sprintf("the int8 self-check differs from the CPU int8 reference by %.1e at %s", r.MaxRel, r.Where)
}

func probeInt8Products(p *probe) {
	const o = 70
	// The integer part.
	rows, n := 5, 1041
	x := int8IntegerRows(p.rng, rows, n)
	for i := range n {
		x[i] = 127
	}
	x[1] = 125
	w := int8UnitWeight(p.rng, o, n)
	q := w.Int8Row(0)
	for i := range n {
		q[i] = 127
	}
	w = tensor.Int8FromValues(w.Name, o, n, int8View(w.Data), w.Int8.Scales) // the sums again
	p.int8Product("integer part", x, w, rows, 0)
	// The epilogue.
	rows, n = 37, 93
	x = p.vec(rows*n, 1)
	for i := range n {
		x[3*n+i] = 0
		x[4*n+i] = float32(p.rng.NormFloat64() * 1e-31)
	}
	x[5*n+7] = float32(math.NaN())
	x[6*n+90] = float32(math.Inf(-1))
	w, err := tensor.QuantizeInt8(tensor.FromFloat32("selfcheck.i8", tensor.F32, []int{o, n}, p.vec(o*n, 0.2)))
	if err != nil {
		p.res.Err = err
		return
	}
	p.int8Product("epilogue", x, w, rows, int8Tol)
}

// int8IntegerRows returns rows × n activations whose quantisation is exact:
// integers and halves in [−127, 127], each row holding ±127, so that
// rowScale = 1 and q = rint(x) (halves round to even).
func int8IntegerRows(rng *rand.Rand, rows, n int) []float32 {
	x := make([]float32, rows*n)
	for r := range rows {
		for i := range n {
			x[r*n+i] = float32(rng.IntN(254*2+1)-254) / 2
		}
		x[r*n+(r*37)%n] = float32(127 * (1 - 2*(r%2)))
	}
	return x
}

// int8UnitWeight returns an int8 weight [o, n] of random values over the
// whole int8 range (−128 and 127 among them) with channel scales of 1.
func int8UnitWeight(rng *rand.Rand, o, n int) *tensor.Weight {
	q := make([]int8, o*n)
	for i := range q {
		q[i] = int8(rng.IntN(256) - 128)
	}
	q[len(q)-2], q[len(q)-1] = -128, 127
	ones := make([]float32, o)
	for i := range ones {
		ones[i] = 1
	}
	return tensor.Int8FromValues("selfcheck.i8", o, n, q, ones)
}

// int8View returns b's bytes as int8 values, in place.
func int8View(b []byte) []int8 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}

// int8Product runs x[rows, I] · wᵀ on the backend under check and compares
// it with tensor.Int8MatMul element by element: exactly when tol is 0.
func (p *probe) int8Product(part string, x []float32, w *tensor.Weight, rows int, tol float64) {
	if p.res.Err != nil {
		return
	}
	o := w.Rows()
	want := make([]float32, rows*o)
	tensor.Int8MatMul(want, x, w, rows)
	xb := p.be.Alloc(len(x))
	ob := p.be.Alloc(len(want))
	p.held = append(p.held, pairT{b: xb}, pairT{b: ob})
	p.be.Write(xb, 0, x)
	poison := make([]float32, len(want))
	for i := range poison {
		poison[i] = math.Float32frombits(int8Poison)
	}
	p.be.Write(ob, 0, poison)
	p.be.MatMul(ob, xb, w, rows)
	got := make([]float32, len(want))
	if err := p.be.Read(p.ctx, ob, 0, got); err != nil {
		p.res.Err = err
		return
	}
	for i, g := range got {
		where := fmt.Sprintf("row %d, channel %d of %d × %d (%s)", i/o, i%o, rows, o, part)
		if math.Float32bits(g) == int8Poison {
			p.res.Err = fmt.Errorf("%s: never written", where)
			return
		}
		r := int8Error(g, want[i])
		if p.res.Where == "" || severity(r, tol) > severity(p.res.MaxRel, p.res.Tol) {
			p.res.MaxRel, p.res.Tol, p.res.Where = r, tol, fmt.Sprintf("%s: %v, want %v", where, g, want[i])
		}
	}
}

// int8Error is the relative error of one output: 0 when got and want are
// the same value (both NaN included) or want is below the float32 normal
// range and got is flushed to zero, +Inf when one is NaN or want is 0 and
// got is not.
func int8Error(got, want float32) float64 {
	g, w := float64(got), float64(want)
	switch {
	case math.IsNaN(g) || math.IsNaN(w):
		if math.IsNaN(g) && math.IsNaN(w) {
			return 0
		}
		return math.Inf(1)
	case g == w:
		return 0
	case g == 0 && math.Abs(w) < 0x1p-126:
		return 0
	case w == 0 || math.IsInf(w, 0):
		return math.Inf(1)
	}
	return math.Abs(g-w) / math.Abs(w)
}
