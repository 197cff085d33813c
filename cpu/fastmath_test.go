package cpu

import (
	"math"
	"testing"
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
