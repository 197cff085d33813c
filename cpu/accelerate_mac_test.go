//go:build mactest

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMacAccelerate (./build.sh mac-test) checks that the CPU backend loads
// Accelerate on a Mac, and holds Accelerate's cblas_sgemm to the pure-Go
// GEMM on shapes with tails, in each transposition the backend uses. The
// package's other tests then run on Accelerate too. Anywhere but macOS the
// BLAS is not Accelerate and the test fails: the tag never skips silently.
func TestMacAccelerate(t *testing.T) {
	b, err := New(Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if b.BLAS() != "accelerate" {
		t.Fatalf("the CPU backend loaded %q, want accelerate (mactest runs on a Mac)", b.BLAS())
	}
	g, err := New(Options{Threads: 1, NoBLAS: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(19, 1))
	for _, s := range []struct {
		m, n, k int
		ta, tb  bool
	}{{1, 1, 1, false, true}, {7, 33, 65, false, true}, {64, 64, 64, false, false}, {70, 9, 130, true, false}, {3, 257, 31, true, true}} {
		a := make([]float32, s.m*s.k)
		w := make([]float32, s.n*s.k)
		for i := range a {
			a[i] = rng.Float32() - 0.5
		}
		for i := range w {
			w[i] = rng.Float32() - 0.5
		}
		lda, ldb := s.k, s.n
		if s.ta {
			lda = s.m
		}
		if s.tb {
			ldb = s.k
		}
		got, want := make([]float32, s.m*s.n), make([]float32, s.m*s.n)
		b.sgemm(s.ta, s.tb, s.m, s.n, s.k, 1, a, lda, w, ldb, 0, got, s.n)
		g.sgemm(s.ta, s.tb, s.m, s.n, s.k, 1, a, lda, w, ldb, 0, want, s.n)
		var num, den float64
		for i := range got {
			d := float64(got[i] - want[i])
			num += d * d
			den += float64(want[i]) * float64(want[i])
		}
		if r := math.Sqrt(num / den); r > 1e-5 || math.IsNaN(r) {
			t.Errorf("%+v: Accelerate differs from the Go GEMM by %.2e relative", s, r)
		}
	}
}
