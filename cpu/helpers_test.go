package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/startlux/startlux/tensor"
)

// testBackend is one configuration every op test runs on.
type testBackend struct {
	name string
	b    *Backend
}

// backends returns the configurations to test: the system BLAS (when one is
// installed) and the pure-Go GEMM, each with several workers, and the
// pure-Go one with a single worker.
func backends(t *testing.T) []testBackend {
	t.Helper()
	var out []testBackend
	if bb, err := New(Options{Threads: 3}); err != nil {
		t.Fatal(err)
	} else if bb.blas != nil {
		out = append(out, testBackend{bb.Name(), bb})
	} else {
		t.Logf("no system BLAS found; testing the pure-Go GEMM only")
	}
	for _, th := range []int{3, 1} {
		bb, err := New(Options{Threads: th, NoBLAS: true})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, testBackend{bb.Name() + "/" + string(rune('0'+th)), bb})
	}
	return out
}

func newRNG(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 7))
}

func randVec(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * scale)
	}
	return v
}

// upload allocates a tensor on b holding v.
func upload(b *Backend, v []float32) tensor.Tensor {
	t := b.Alloc(len(v))
	b.Write(t, 0, v)
	return t
}

// download returns a copy of t's elements.
func download(t *testing.T, b *Backend, x tensor.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Len())
	if err := b.Read(t.Context(), x, 0, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// checkClose fails unless max|got−want| ≤ tol · max(max|want|, 1e-6).
func checkClose(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	checkCloseMin(t, what, got, want, tol, 1e-6)
}

// checkCloseMin is checkClose with the error measured against at least
// minScale: for outputs that can cancel to near zero while their terms stay
// of order one, so that their rounding is not measured against the result.
func checkCloseMin(t *testing.T, what string, got []float32, want []float64, tol, minScale float64) {
	t.Helper()
	if len(got) < len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var maxRef, maxErr float64
	at := -1
	for i, w := range want {
		maxRef = max(maxRef, math.Abs(w))
		g := float64(got[i])
		if math.IsNaN(g) {
			t.Fatalf("%s: NaN at %d", what, i)
		}
		if e := math.Abs(g - w); e > maxErr {
			maxErr, at = e, i
		}
	}
	if maxErr > tol*max(maxRef, minScale) {
		t.Errorf("%s: max error %.3g at %d (got %g, want %g), scale %.3g, tolerance %.1g relative",
			what, maxErr, at, got[at], want[at], maxRef, tol)
	}
}

// quantWeight returns a random MLX affine-quantised [o, in] weight.
func quantWeight(rng *rand.Rand, o, in, bits, group int, sd tensor.DType) *tensor.Weight {
	packed := make([]byte, o*in*bits/8)
	for i := range packed {
		packed[i] = byte(rng.Uint32())
	}
	sc := randVec(rng, o*in/group, 0.05)
	bi := randVec(rng, o*in/group, 0.1)
	return &tensor.Weight{
		Name: "q", DType: tensor.U32, Shape: []int{o, in}, Data: packed,
		Quant: &tensor.Quant{
			Bits: bits, Group: group,
			Scales: tensor.FromFloat32("q.scales", sd, []int{o, in / group}, sc),
			Biases: tensor.FromFloat32("q.biases", sd, []int{o, in / group}, bi),
		},
	}
}

// rows64 returns every row of w as float64 through the reference
// tensor.Weight.Row.
func rows64(w *tensor.Weight) [][]float64 {
	out := make([][]float64, w.Rows())
	row := make([]float32, w.Cols())
	for r := range out {
		w.Row(r, row)
		out[r] = f64s(row)
	}
	return out
}

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func silu64(x float64) float64    { return x * sigmoid64(x) }
