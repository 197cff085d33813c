package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/startlux/startlux/tensor"
)

// Shapes of Qwen3.5-0.8B (qwen35.md §1.3) for a 512-token prefill.
var benchMatMuls = []struct {
	name        string
	rows, o, in int
}{
	{"qkv_512x1024x6144", 512, 6144, 1024},
	{"down_512x3584x1024", 512, 1024, 3584},
	{"up_512x1024x3584", 512, 3584, 1024},
	{"ab_512x1024x16", 512, 16, 1024},
}

func benchBackends(b *testing.B) []testBackend {
	var out []testBackend
	if bb, _ := New(Options{}); bb.blas != nil {
		out = append(out, testBackend{bb.Name(), bb})
	}
	gb, _ := New(Options{NoBLAS: true})
	return append(out, testBackend{gb.Name(), gb})
}

// BenchmarkMatMul multiplies the 0.8B shapes against bf16 (and f32) weights
// and reports the rate as a fraction of a plain float32 sgemm of the same
// size ("sgemm-ratio").
func BenchmarkMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, be := range benchBackends(b) {
		for _, mm := range benchMatMuls {
			var sg float64
			for _, d := range []tensor.DType{tensor.BF16, tensor.F32} {
				b.Run(fmt.Sprintf("%s/%s/%s", be.name, mm.name, d), func(b *testing.B) {
					if sg == 0 {
						var err error
						sg, err = be.b.MeasureSgemm(b.Context(), mm.rows, mm.o, mm.in, 300*time.Millisecond)
						if err != nil {
							b.Fatal(err)
						}
					}
					w := tensor.FromFloat32("w", d, []int{mm.o, mm.in}, randVec(rng, mm.o*mm.in, 0.05))
					x := upload(be.b, randVec(rng, mm.rows*mm.in, 1))
					out := be.b.Alloc(mm.rows * mm.o)
					be.b.MatMul(out, x, w, mm.rows)
					b.ResetTimer()
					for b.Loop() {
						be.b.MatMul(out, x, w, mm.rows)
					}
					gf := 2 * float64(mm.rows*mm.o*mm.in) * float64(b.N) / b.Elapsed().Seconds() / 1e9
					b.ReportMetric(gf, "GFLOP/s")
					b.ReportMetric(sg, "sgemm-GFLOP/s")
					b.ReportMetric(gf/sg, "sgemm-ratio")
				})
			}
		}
	}
}

// BenchmarkGatedDelta runs the delta rule of one 0.8B DeltaNet layer over a
// 512-token row.
func BenchmarkGatedDelta(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			c := newDeltaCase(rng, 1, 512, 16, 16, 128, 128, false)
			bk := be.b
			width := 2*c.nk*c.dk + c.nv*c.dv
			qkv, al, bt := upload(bk, c.qkv), upload(bk, c.alpha), upload(bk, c.beta)
			st := []tensor.Tensor{upload(bk, c.state[0])}
			out := bk.Alloc(c.t * c.nv * c.dv)
			_ = width
			for b.Loop() {
				bk.GatedDelta(out, qkv, al, bt, c.aLog, c.dtBias, tensor.DeltaArgs{B: 1, T: c.t, NK: c.nk, NV: c.nv, DK: c.dk, DV: c.dv, Chunk: 64, State: st})
			}
		})
	}
}

// BenchmarkAttention runs one 0.8B full-attention layer's attention over a
// 512-token row.
func BenchmarkAttention(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			bk := be.b
			t, h, kvh, hd := 512, 8, 2, 256
			q := upload(bk, randVec(rng, t*h*hd, 1))
			k := upload(bk, randVec(rng, t*kvh*hd, 1))
			v := upload(bk, randVec(rng, t*kvh*hd, 1))
			out := bk.Alloc(t * h * hd)
			for b.Loop() {
				bk.Attention(out, q, k, v, tensor.AttnArgs{B: 1, T: t, Heads: h, KVHeads: kvh, HeadDim: hd, Scale: 1.0 / 16})
			}
		})
	}
}

// BenchmarkElementwise times the cheap per-layer ops at 0.8B sizes.
func BenchmarkElementwise(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	bk, _ := New(Options{})
	t, hdim, inter := 512, 1024, 3584
	x := upload(bk, randVec(rng, t*inter, 1))
	y := upload(bk, randVec(rng, t*inter, 1))
	out := bk.Alloc(t * inter)
	w := tensor.FromFloat32("w", tensor.BF16, []int{hdim}, randVec(rng, hdim, 0.1))
	b.Run("SwiGLU", func(b *testing.B) {
		for b.Loop() {
			bk.SwiGLU(out, x, y, t*inter)
		}
	})
	b.Run("RMSNorm", func(b *testing.B) {
		for b.Loop() {
			bk.RMSNorm(out, x, w, t, hdim, 1e-6, 1)
		}
	})
	cw := tensor.FromFloat32("c", tensor.BF16, []int{6144, 1, 4}, randVec(rng, 6144*4, 0.1))
	b.Run("CausalConv", func(b *testing.B) {
		for b.Loop() {
			bk.CausalConv(out, x, cw, tensor.ConvArgs{B: 1, T: 256, D: 6144, K: 4})
		}
	})
	pos := make([]int32, t)
	for i := range pos {
		pos[i] = int32(i)
	}
	b.Run("RoPE", func(b *testing.B) {
		for b.Loop() {
			bk.RoPE(x, pos, 8, 256, 64, 1e7)
		}
	})
}
