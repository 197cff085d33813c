package metal

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/internal/testenv"
	"github.com/startlux/startlux/tensor"
)

// pair runs every operation on the emulated Metal backend and on the CPU
// backend, the reference.
type pair struct {
	t   *testing.T
	m   tensor.Backend
	c   tensor.Backend
	rng *rand.Rand
}

var (
	testOnce sync.Once
	testBE   tensor.Backend
	testErr  error
)

// deviceUnderTest returns the package's shared backend under test: the
// emulator, or with -tags mactest the Mac's GPU (openUnderTest). A missing
// clang-19 fails the test under CI=true and skips it elsewhere
// (testenv.Missing); any other failure to open fails it.
func deviceUnderTest(t *testing.T) tensor.Backend {
	t.Helper()
	testOnce.Do(func() { testBE, testErr = openUnderTest() })
	if errors.Is(testErr, ErrNoCompiler) {
		testenv.Missing(t, "%v", testErr)
	}
	if testErr != nil {
		t.Fatalf("backend under test: %v", testErr)
	}
	return testBE
}

// OpenUnderTest opens a backend under test for the external test package:
// the emulator, or with -tags mactest the Mac's GPU.
func OpenUnderTest() (tensor.Backend, error) { return openUnderTest() }

func newPair(t *testing.T, seed uint64) *pair {
	t.Helper()
	c, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &pair{t: t, m: deviceUnderTest(t), c: c, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
}

func (p *pair) vec(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(p.rng.NormFloat64() * scale)
	}
	return v
}

// dual is one tensor on both backends.
type dual struct{ m, c tensor.Tensor }

func (p *pair) upload(v []float32) dual {
	d := dual{p.m.Alloc(len(v)), p.c.Alloc(len(v))}
	p.m.Write(d.m, 0, v)
	p.c.Write(d.c, 0, v)
	return d
}

// poisoned returns a tensor of n elements, NaN on the Metal side so that an
// element the kernel never writes shows up.
func (p *pair) poisoned(n int) dual {
	nan := make([]float32, n)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	d := dual{p.m.Alloc(n), p.c.Alloc(n)}
	p.m.Write(d.m, 0, nan)
	p.c.Write(d.c, 0, make([]float32, n))
	return d
}

func (p *pair) read(d dual) (got, want []float32) {
	p.t.Helper()
	got = make([]float32, d.m.Len())
	want = make([]float32, d.c.Len())
	if err := p.m.Read(context.Background(), d.m, 0, got); err != nil {
		p.t.Fatal(err)
	}
	if err := p.c.Read(context.Background(), d.c, 0, want); err != nil {
		p.t.Fatal(err)
	}
	return got, want
}

// check compares a tensor of both backends in vectors of length n: every
// element finite, and ‖got−want‖/‖want‖ ≤ tol per vector.
func (p *pair) check(what string, d dual, n int, tol float64) {
	p.t.Helper()
	got, want := p.read(d)
	checkVecs(p.t, what, got, want, n, tol)
}

// checkMin is check with each vector's error measured against at least
// floor per element (RMS): for outputs that can cancel to near zero, where
// two float32 algorithms differ by rounding far beyond tol of the tiny value.
func (p *pair) checkMin(what string, d dual, n int, tol, floor float64) {
	p.t.Helper()
	got, want := p.read(d)
	checkVecsMin(p.t, what, got, want, n, tol, floor)
}

func checkVecs(t *testing.T, what string, got, want []float32, n int, tol float64) {
	t.Helper()
	checkVecsMin(t, what, got, want, n, tol, 0)
}

func checkVecsMin(t *testing.T, what string, got, want []float32, n int, tol, floor float64) {
	t.Helper()
	if n <= 0 {
		n = len(want)
	}
	for i, g := range got {
		if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
			t.Fatalf("%s: element %d is %v (never written, or computed from unwritten memory)", what, i, g)
		}
	}
	for s := 0; s < len(want); s += n {
		e := min(s+n, len(want))
		var num, den float64
		for i := s; i < e; i++ {
			d := float64(got[i]) - float64(want[i])
			num += d * d
			den += float64(want[i]) * float64(want[i])
		}
		den = max(den, floor*floor*float64(e-s))
		rel := math.Sqrt(num / max(den, 1e-30))
		if den == 0 {
			rel = math.Sqrt(num)
		}
		if rel > tol {
			t.Fatalf("%s: vector %d (elements %d..%d): relative error %.3g > %.3g; got %v want %v",
				what, s/n, s, e, rel, tol, got[s:min(e, s+6)], want[s:min(e, s+6)])
		}
	}
}

// weight returns a random weight [o, in] in the given form: a float dtype,
// or quantised (bits > 0) with scales and biases of dtype d.
func (p *pair) weight(o, in int, d tensor.DType, bits, group int) *tensor.Weight {
	if bits == 0 {
		return tensor.FromFloat32("w", d, []int{o, in}, p.vec(o*in, 0.2))
	}
	packed := make([]byte, o*in*bits/8)
	for i := range packed {
		packed[i] = byte(p.rng.Uint32())
	}
	return &tensor.Weight{
		Name: "wq", DType: tensor.U32, Shape: []int{o, in}, Data: packed,
		Quant: &tensor.Quant{
			Bits: bits, Group: group,
			Scales: tensor.FromFloat32("wq.scales", d, []int{o, in / group}, p.vec(o*in/group, 0.05)),
			Biases: tensor.FromFloat32("wq.biases", d, []int{o, in / group}, p.vec(o*in/group, 0.1)),
		},
	}
}
