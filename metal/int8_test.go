package metal

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/startlux/startlux/tensor"
)

// int8Device returns the backend under test when it runs int8. Where it
// cannot (a Mac without an M5 or macOS 26, with -tags mactest) it checks
// the refusal instead: the reason wraps ErrInt8Unavailable and MatMul over
// an int8 weight panics with it; it then returns nil. Under the emulator
// int8 must be available.
func int8Device(t *testing.T) *Backend {
	t.Helper()
	be := deviceUnderTest(t).(*Backend)
	if _, err := be.Int8Kernel(); err != nil {
		if int8Required {
			t.Fatalf("int8 unavailable on %s: %v", be.Name(), err)
		}
		checkInt8Refused(t, be, err)
		t.Logf("int8 unavailable on this GPU, refusal checked: %v", err)
		return nil
	}
	return be
}

// checkInt8Refused checks that be reports err as its int8 unavailability
// and that MatMul over an int8 weight panics with it.
func checkInt8Refused(t *testing.T, be *Backend, err error) {
	t.Helper()
	if !strings.HasPrefix(err.Error(), "unavailable — ") {
		t.Errorf("Int8Kernel error %q does not read \"unavailable — <reason>\"", err)
	}
	w := tensor.Int8FromValues("w", 2, 3, []int8{1, 2, 3, 4, 5, 6}, []float32{1, 1})
	x, out := be.Alloc(3), be.Alloc(2)
	defer be.Free(x)
	defer be.Free(out)
	want := fmt.Sprintf("metal: int8 weight w: int8 %v", err)
	defer func() {
		if r := recover(); fmt.Sprint(r) != want {
			t.Errorf("MatMul over an int8 weight panicked with %q, want %q", r, want)
		}
	}()
	be.MatMul(out, x, w, 1)
}

// TestMatMulInt8 holds MatMul over int8 weights to the CPU backend's int8
// path on every row count 1..37 (both tile heights, every tail of them)
// and shapes with K and O tails: the integer part (activations whose
// quantisation is exact, channel scales 1, so outputs are float32 of the
// int32 sums) exactly, the epilogue (random activations with a zero, a
// NaN and a sub-floor row, a quantised random weight) within 1e-6 per
// element. Outputs start poisoned.
func TestMatMulInt8(t *testing.T) {
	be := int8Device(t)
	if be == nil {
		return
	}
	type shape struct{ rows, o, k int }
	var shapes []shape
	for r := 1; r <= 37; r++ {
		shapes = append(shapes, shape{r, 70, 93})
	}
	shapes = append(shapes, shape{70, 129, 64}, shape{3, 64, 1}, shape{65, 1, 200}, shape{2, 5, 3000})
	for _, sh := range shapes {
		t.Run(fmt.Sprintf("%dx%dx%d", sh.rows, sh.o, sh.k), func(t *testing.T) {
			p := newPair(t, uint64(1000*sh.rows+sh.o))
			x := int8IntegerRows(p.rng, sh.rows, sh.k)
			w := int8UnitWeight(p.rng, sh.o, sh.k)
			p.int8Compare("integer part", x, w, sh.rows, 0)

			x = p.vec(sh.rows*sh.k, 1)
			if sh.rows >= 4 {
				for i := range sh.k {
					x[sh.k+i] = 0
					x[3*sh.k+i] = float32(p.rng.NormFloat64() * 1e-31)
				}
				x[2*sh.k+sh.k/2] = float32(math.NaN())
			}
			wq, err := tensor.QuantizeInt8(p.weight(sh.o, sh.k, tensor.BF16, 0, 0))
			if err != nil {
				t.Fatal(err)
			}
			p.int8Compare("epilogue", x, wq, sh.rows, 1e-6)
		})
	}
}

// int8Compare runs x · wᵀ on both backends and compares every element:
// exactly for tol 0, else within tol relative (int8Error).
func (p *pair) int8Compare(what string, x []float32, w *tensor.Weight, rows int, tol float64) {
	p.t.Helper()
	o := w.Rows()
	xd := p.upload(x)
	out := dual{p.m.Alloc(rows * o), p.c.Alloc(rows * o)}
	poison := make([]float32, rows*o)
	for i := range poison {
		poison[i] = math.Float32frombits(int8Poison)
	}
	p.m.Write(out.m, 0, poison)
	p.m.MatMul(out.m, xd.m, w, rows)
	p.c.MatMul(out.c, xd.c, w, rows)
	got, want := p.read(out)
	exact := 0
	for i, g := range got {
		if math.Float32bits(g) == int8Poison {
			p.t.Fatalf("%s: row %d, channel %d never written", what, i/o, i%o)
		}
		if e := int8Error(g, want[i]); e > tol {
			p.t.Fatalf("%s: row %d, channel %d: %v, want %v (relative error %.2g > %.2g)", what, i/o, i%o, g, want[i], e, tol)
		}
		if math.Float32bits(g) == math.Float32bits(want[i]) || (g != g && want[i] != want[i]) {
			exact++
		}
	}
	// The emulator computes in IEEE float32 as the CPU does, so there the
	// epilogue must be bit-identical too (1e-6 would pass a reordered one).
	if exact < len(got) {
		if int8Required {
			p.t.Fatalf("%s: %d of %d outputs bit-identical to the CPU's, want all under the emulator", what, exact, len(got))
		}
		p.t.Logf("%s: %d of %d outputs bit-identical", what, exact, len(got))
	}
}

// TestQuantizeInt8Rows holds quant_i8 to tensor.QuantizeInt8Vec bit for bit:
// the int8 values (and the zero padding to the row stride) and the row
// scales, on rows with ties, zeros, values below and at the 2⁻¹⁰⁰ floor,
// subnormals, a NaN, both infinities and values near the float32 maximum.
func TestQuantizeInt8Rows(t *testing.T) {
	be := int8Device(t)
	if be == nil {
		return
	}
	for _, n := range []int{1, 31, 33, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			p := newPair(t, uint64(n))
			rows := [][]float32{
				p.vec(n, 1),
				make([]float32, n),
				p.vec(n, 1e-31),
				p.vec(n, 1e-40),
				p.vec(n, 1e37),
				int8IntegerRows(p.rng, 1, n),
			}
			atFloor := make([]float32, n)
			atFloor[n-1] = -0x1p-100
			withSub := p.vec(n, 1e-3)
			withSub[0] = 1e-40
			nan, inf, ninf := p.vec(n, 1), p.vec(n, 1), p.vec(n, 1)
			nan[n/2] = float32(math.NaN())
			inf[0] = float32(math.Inf(1))
			ninf[n-1] = float32(math.Inf(-1))
			huge := p.vec(n, 1)
			huge[n/3] = -math.MaxFloat32
			rows = append(rows, atFloor, withSub, nan, inf, ninf, huge)
			var x []float32
			for _, r := range rows {
				x = append(x, r...)
			}
			xd := be.Alloc(len(x))
			defer be.Free(xd)
			be.Write(xd, 0, x)
			q, rs, ldq := be.quantizeInt8(xd, len(rows), n)
			defer be.drv.free(q)
			defer be.drv.free(rs)
			if err := be.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			gq, grs := be.drv.host(q), be.drv.host(rs)
			want := make([]int8, n)
			for r, row := range rows {
				scale, _ := tensor.QuantizeInt8Vec(want, row)
				if g := math.Float32frombits(leUint32(grs[4*r:])); math.Float32bits(g) != math.Float32bits(scale) && !(g != g && scale != scale) {
					t.Errorf("row %d: scale %g (%#x), want %g (%#x)", r, g, math.Float32bits(g), scale, math.Float32bits(scale))
				}
				for i := range ldq {
					var w int8
					if i < n {
						w = want[i]
					}
					if g := int8(gq[r*ldq+i]); g != w {
						t.Fatalf("row %d, element %d of %d (stride %d): %d, want %d (x = %g)", r, i, n, ldq, g, w, row[min(i, n-1)])
					}
				}
			}
		})
	}
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
