package cpu

import (
	"fmt"
	"testing"

	"github.com/startlux/startlux/tensor"
)

// TestPortableLoops runs the operations that have amd64 vector loops once
// with them and once with the portable Go loops (what arm64 and CPUs without
// AVX2 run), on the pure-Go GEMM, and compares.
func TestPortableLoops(t *testing.T) {
	if !kernelOK {
		t.Skip("no vector loops on this CPU: every test already ran the portable ones")
	}
	rng := newRNG(t)
	b, _ := New(Options{Threads: 2, NoBLAS: true})
	n, h := 37, 70
	x, y := randVec(rng, n*h, 1), randVec(rng, n*h, 1)
	w := tensor.FromFloat32("w", tensor.BF16, []int{50, h}, randVec(rng, 50*h, 0.3))
	nw := tensor.FromFloat32("n", tensor.F32, []int{h}, randVec(rng, h, 0.3))
	cw := tensor.FromFloat32("c", tensor.BF16, []int{h, 1, 4}, randVec(rng, 4*h, 0.3))
	dc := newDeltaCase(rng, 1, 70, 1, 2, 16, 8, false)
	// Heads of 32 values run the recurrent form with the vector loops and
	// the chunked form without them.
	dr := newDeltaCase(rng, 2, 70, 2, 4, 32, 32, false)
	ops := map[string]func() []float32{
		"MatMul": func() []float32 {
			out := b.Alloc(n * 50)
			b.MatMul(out, upload(b, x), w, n)
			return download(t, b, out)
		},
		"SwiGLU": func() []float32 {
			out := b.Alloc(n * h)
			b.SwiGLU(out, upload(b, x), upload(b, y), n*h)
			return download(t, b, out)
		},
		"SigmoidMul": func() []float32 {
			xt := upload(b, x)
			b.SigmoidMul(xt, upload(b, y), n*h)
			return download(t, b, xt)
		},
		"GatedRMSNorm": func() []float32 {
			out := b.Alloc(n * h)
			b.GatedRMSNorm(out, upload(b, x), upload(b, y), nw, n, h, 1e-6)
			return download(t, b, out)
		},
		"CausalConv": func() []float32 {
			out := b.Alloc(n * h)
			b.CausalConv(out, upload(b, x), cw, tensor.ConvArgs{B: 1, T: n, D: h, K: 4})
			return download(t, b, out)
		},
		"Attention": func() []float32 {
			out := b.Alloc(n * h)
			b.Attention(out, upload(b, x), upload(b, y), upload(b, x), tensor.AttnArgs{B: 1, T: n, Heads: 2, KVHeads: 2, HeadDim: h / 2, Scale: 0.3})
			return download(t, b, out)
		},
		"GatedDelta": func() []float32 {
			return dc.run(b, []tensor.Tensor{upload(b, dc.state[0])}, 0, dc.t, 64)
		},
		"GatedDelta, heads of 32": func() []float32 {
			return dr.run(b, []tensor.Tensor{upload(b, dr.state[0]), upload(b, dr.state[1])}, 0, dr.t, 64)
		},
	}
	defer func() { haveKernel = kernelOK }()
	for name, op := range ops {
		haveKernel = true
		vec := op()
		haveKernel = false
		portable := op()
		checkClose(t, fmt.Sprintf("%s portable vs vector", name), portable, f64s(vec), 1e-5)
	}
}
