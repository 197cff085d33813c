package cpu

import (
	"math"
	"testing"

	"github.com/startlux/startlux/tensor"
)

func TestExp32(t *testing.T) {
	var worst float64
	at := float32(0)
	for x := float32(-87); x < 88.3; x += 0.000731 {
		got := float64(exp32(x))
		want := math.Exp(float64(x))
		if e := math.Abs(got-want) / want; e > worst {
			worst, at = e, x
		}
	}
	if worst > 3e-7 {
		t.Errorf("exp32: relative error %.3g at %g", worst, at)
	}
	t.Logf("exp32 worst relative error %.3g at %g", worst, at)
	for _, c := range []struct{ x, want float32 }{{0, 1}, {-100, 0}, {float32(math.Inf(-1)), 0}} {
		if got := exp32(c.x); got != c.want {
			t.Errorf("exp32(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	if got := exp32(float32(math.NaN())); got == got {
		t.Errorf("exp32(NaN) = %g", got)
	}
	if got := exp32(1000); got < 1e38 || math.IsInf(float64(got), 0) {
		t.Errorf("exp32(1000) = %g", got)
	}
	if s := sigmoid(-1000); s > 1e-30 || s < 0 {
		t.Errorf("sigmoid(-1000) = %g", s)
	}
	if s := silu(1000); s != 1000 {
		t.Errorf("silu(1000) = %g", s)
	}
}

// TestVectorLoops checks that the vector loops equal the scalar functions
// bit for bit, including the extremes and every tail length.
func TestVectorLoops(t *testing.T) {
	rng := newRNG(t)
	special := []float32{0, -0, 1e-40, -1e-40, 88, 89, -87, -88, -100, 100, 1e30, -1e30, 20, -20, -60, -59.99, -60.01,
		float32(math.Inf(1)), float32(math.Inf(-1))}
	for n := range 40 {
		src := randVec(rng, n, 8)
		for i := range src {
			if rng.IntN(4) == 0 {
				src[i] = special[rng.IntN(len(special))]
			}
		}
		for _, f := range []struct {
			name   string
			vec    func(dst, src []float32)
			scalar func(float32) float32
		}{{"silu", siluVec, silu}, {"sigmoid", sigmoidVec, sigmoid}} {
			dst := make([]float32, n)
			f.vec(dst, src)
			for i, x := range src {
				if want := f.scalar(x); math.Float32bits(dst[i]) != math.Float32bits(want) {
					t.Errorf("%s(%g) = %g vector, %g scalar", f.name, x, dst[i], want)
				}
			}
			inPlace := append([]float32(nil), src...)
			f.vec(inPlace, inPlace)
			for i := range inPlace {
				if math.Float32bits(inPlace[i]) != math.Float32bits(dst[i]) {
					t.Fatalf("%s in place differs at %d", f.name, i)
				}
			}
		}
		ef := make([]float32, n)
		expFlushVec(ef, src)
		for i, x := range src {
			if want := expFlush(x); math.Float32bits(ef[i]) != math.Float32bits(want) {
				t.Errorf("expFlush(%g) = %g vector, %g scalar", x, ef[i], want)
			}
		}
		a := float32(rng.NormFloat64())
		sc := make([]float32, n)
		scaleVec(sc, src, a)
		sub := append([]float32(nil), ef...)
		subScaled(sub, src, a)
		for i, x := range src {
			if want := a * x; math.Float32bits(sc[i]) != math.Float32bits(want) {
				t.Errorf("scale %g·%g = %g vector, %g scalar", a, x, sc[i], want)
			}
			if want := ef[i] - a*x; math.Float32bits(sub[i]) != math.Float32bits(want) && !(want != want && sub[i] != sub[i]) {
				t.Errorf("%g − %g·%g = %g vector, %g scalar", ef[i], a, x, sub[i], want)
			}
		}
		w, b := randVec(rng, n, 2), randVec(rng, n, 2)
		add := append([]float32(nil), src...)
		addVec(add, b)
		mul := make([]float32, n)
		mulVec(mul, src, b)
		sm := make([]float32, n)
		scaleMulVec(sm, src, w, a)
		for i, x := range src {
			for _, c := range []struct {
				what      string
				got, want float32
			}{{"add", add[i], x + b[i]}, {"mul", mul[i], x * b[i]}, {"scaleMul", sm[i], x * a * w[i]}} {
				if math.Float32bits(c.got) != math.Float32bits(c.want) && !(c.want != c.want && c.got != c.got) {
					t.Errorf("%s at %d of %d: %g vector, %g scalar", c.what, i, n, c.got, c.want)
				}
			}
		}
		raw := make([]byte, 2*n)
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		got := make([]float32, n)
		bf16ToF32(got, raw)
		for i := range got {
			want := tensor.BF16ToF32(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("bf16 %d: got %x, want %x", i, math.Float32bits(got[i]), math.Float32bits(want))
			}
		}
	}
}
