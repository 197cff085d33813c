package cpu

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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
// 512-token row, and of one demo-model layer (dk = dv = 32) over 16 rows of
// 120 tokens.
func BenchmarkGatedDelta(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := []struct {
		name                 string
		rows, t, nk, nv, dkv int
	}{
		{"0.8B", 1, 512, 16, 16, 128},
		{"demo", 16, 120, 2, 4, 32},
	}
	for _, be := range benchBackends(b) {
		for _, sh := range shapes {
			b.Run(be.name+"/"+sh.name, func(b *testing.B) {
				c := newDeltaCase(rng, sh.rows, sh.t, sh.nk, sh.nv, sh.dkv, sh.dkv, false)
				bk := be.b
				qkv, al, bt := upload(bk, c.qkv), upload(bk, c.alpha), upload(bk, c.beta)
				st := make([]tensor.Tensor, sh.rows)
				for i := range st {
					st[i] = upload(bk, c.state[i])
				}
				out := bk.Alloc(c.b * c.t * c.nv * c.dv)
				for b.Loop() {
					bk.GatedDelta(out, qkv, al, bt, c.aLog, c.dtBias, tensor.DeltaArgs{B: c.b, T: c.t, NK: c.nk, NV: c.nv, DK: c.dk, DV: c.dv, Chunk: 64, State: st})
				}
			})
		}
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

// BenchmarkAttentionPrefix runs the attention of a warm decision on the
// demo model's shapes: 8 question rows of 53 tokens, right-padded, all
// attending to one kept evidence prefix of 1568 positions. It reports the
// GFLOP/s of the QKᵀ and PV products against the prefix and the rows' own
// keys.
func BenchmarkAttentionPrefix(b *testing.B) {
	benchAttentionRows(b, 8, 53, 1568, 0)
}

// BenchmarkAttentionBatch runs the attention of a decide_batch of
// single-question requests on the demo model's shapes: 64 rows of 100 to
// 121 tokens, right-padded, each after the kept 52-token preamble. It
// reports the GFLOP/s of the QKᵀ and PV products.
func BenchmarkAttentionBatch(b *testing.B) {
	benchAttentionRows(b, 64, 121, 52, 22)
}

// benchAttentionRows times the attention of rows rows of up to t tokens
// (row r has t − r%spread of them) after one shared prefix of p positions,
// with the demo model's heads (4 query heads of 32 over 2 kv heads).
func benchAttentionRows(b *testing.B, rows, t, p, spread int) {
	rng := rand.New(rand.NewPCG(1, 2))
	h, kvh, hd := 4, 2, 32
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			bk := be.b
			q := upload(bk, randVec(rng, rows*t*h*hd, 1))
			k := upload(bk, randVec(rng, rows*t*kvh*hd, 1))
			v := upload(bk, randVec(rng, rows*t*kvh*hd, 1))
			kv := tensor.KV{K: upload(bk, randVec(rng, p*kvh*hd, 1)), V: upload(bk, randVec(rng, p*kvh*hd, 1)), Len: p}
			args := tensor.AttnArgs{B: rows, T: t, Heads: h, KVHeads: kvh, HeadDim: hd, Scale: 1 / float32(math.Sqrt(float64(hd)))}
			flops := 0.0
			for r := range rows {
				n := t
				if spread > 0 {
					n -= r % spread
				}
				args.Prefix = append(args.Prefix, kv)
				args.Len = append(args.Len, n)
				flops += 4 * float64(n*h*hd) * (float64(p) + float64(n+1)/2)
			}
			out := bk.Alloc(rows * t * h * hd)
			for b.Loop() {
				bk.Attention(out, q, k, v, args)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
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

// BenchmarkPrefill08B runs the operations of a Qwen3.5-0.8B prefill of 512
// tokens (qwen35.md §1.3: 18 DeltaNet and 6 full-attention layers, random
// bf16 weights, no embedding or head) in the order the model issues them,
// and reports tokens/s, the model's GFLOP/s (2 × non-embedding parameters ×
// tokens) and its fraction of MeasureSgemm's rate.
func BenchmarkPrefill08B(b *testing.B) {
	const (
		T, H, I        = 512, 1024, 3584
		nh, nkv, hd    = 8, 2, 256
		nk, nv, dk, dv = 16, 16, 128, 128
		kc             = 4
		dconv          = 2*nk*dk + nv*dv
	)
	bk, _ := New(Options{})
	rng := rand.New(rand.NewPCG(3, 4))
	// A pool of random bf16 bytes that every weight is a window of (at a
	// random offset), so that building 1 GB of weights stays quick.
	pool := tensor.FromFloat32("pool", tensor.BF16, []int{1 << 22}, randVec(rng, 1<<22, 0.03)).Data
	var params int
	mk := func(o, in int) *tensor.Weight {
		params += o * in
		data := make([]byte, 2*o*in)
		for off := 0; off < len(data); {
			src := pool[2*rng.IntN(len(pool)/4):]
			off += copy(data[off:], src)
		}
		return &tensor.Weight{Name: "w", DType: tensor.BF16, Shape: []int{o, in}, Data: data}
	}
	norm := func(n int) *tensor.Weight {
		return tensor.FromFloat32("n", tensor.BF16, []int{n}, randVec(rng, n, 0.1))
	}
	type layer struct {
		full                      bool
		in, post                  *tensor.Weight
		qkv, z, bw, aw, out, conv *tensor.Weight
		aLog, dtBias, gnorm       *tensor.Weight
		q, k, v, o, qn, kn        *tensor.Weight
		gate, up, down            *tensor.Weight
	}
	layers := make([]layer, 24)
	for i := range layers {
		l := &layers[i]
		l.full = i%4 == 3
		l.in, l.post = norm(H), norm(H)
		if l.full {
			l.q, l.k, l.v, l.o = mk(2*nh*hd, H), mk(nkv*hd, H), mk(nkv*hd, H), mk(H, nh*hd)
			l.qn, l.kn = norm(hd), norm(hd)
		} else {
			l.qkv, l.z, l.bw, l.aw, l.out = mk(dconv, H), mk(nv*dv, H), mk(nv, H), mk(nv, H), mk(H, nv*dv)
			l.conv = tensor.FromFloat32("conv", tensor.BF16, []int{dconv, 1, kc}, randVec(rng, dconv*kc, 0.3))
			params += dconv * kc
			l.aLog = tensor.FromFloat32("A_log", tensor.F32, []int{nv}, randVec(rng, nv, 1))
			l.dtBias = norm(nv)
			l.gnorm = tensor.FromFloat32("norm", tensor.F32, []int{dv}, randVec(rng, dv, 0.1))
		}
		l.gate, l.up, l.down = mk(I, H), mk(I, H), mk(H, I)
	}
	h := upload(bk, randVec(rng, T*H, 1))
	x := bk.Alloc(T * H)
	big := bk.Alloc(T * dconv)
	conv := bk.Alloc(T * dconv)
	z := bk.Alloc(T * nv * dv)
	av, bv := bk.Alloc(T*nv), bk.Alloc(T*nv)
	o := bk.Alloc(T * nv * dv)
	g, u := bk.Alloc(T*I), bk.Alloc(T*I)
	q, gt := bk.Alloc(T*nh*hd), bk.Alloc(T*nh*hd)
	kt, vt := bk.Alloc(T*nkv*hd), bk.Alloc(T*nkv*hd)
	states := make([][]tensor.Tensor, 24)
	for i := range states {
		states[i] = []tensor.Tensor{bk.Alloc(nv * dk * dv)}
	}
	pos := make([]int32, T)
	for i := range pos {
		pos[i] = int32(i)
	}
	spent := map[string]time.Duration{}
	timing := false
	tm := func(op string, f func()) {
		if !timing {
			f()
			return
		}
		st := time.Now()
		f()
		spent[op] += time.Since(st)
	}
	mm := func(out, in tensor.Tensor, w *tensor.Weight) {
		tm(fmt.Sprintf("MatMul %dx%d", w.Rows(), w.Cols()), func() { bk.MatMul(out, in, w, T) })
	}
	forward := func() {
		for i, l := range layers {
			tm("RMSNorm", func() { bk.RMSNorm(x, h, l.in, T, H, 1e-6, 1) })
			if l.full {
				mm(big, x, l.q)
				tm("Copy", func() { bk.Copy(q, 0, hd, big, 0, 2*hd, T*nh, hd) })
				tm("Copy", func() { bk.Copy(gt, 0, hd, big, hd, 2*hd, T*nh, hd) })
				tm("RMSNorm", func() { bk.RMSNorm(q, q, l.qn, T*nh, hd, 1e-6, 1) })
				mm(kt, x, l.k)
				mm(vt, x, l.v)
				tm("RMSNorm", func() { bk.RMSNorm(kt, kt, l.kn, T*nkv, hd, 1e-6, 1) })
				tm("RoPE", func() { bk.RoPE(q, pos, nh, hd, 64, 1e7) })
				tm("RoPE", func() { bk.RoPE(kt, pos, nkv, hd, 64, 1e7) })
				tm("Attention", func() {
					bk.Attention(o, q, kt, vt, tensor.AttnArgs{B: 1, T: T, Heads: nh, KVHeads: nkv, HeadDim: hd, Scale: 1.0 / 16})
				})
				tm("SigmoidMul", func() { bk.SigmoidMul(o, gt, T*nh*hd) })
				mm(x, o, l.o)
			} else {
				mm(big, x, l.qkv)
				mm(z, x, l.z)
				mm(bv, x, l.bw)
				mm(av, x, l.aw)
				tm("CausalConv", func() { bk.CausalConv(conv, big, l.conv, tensor.ConvArgs{B: 1, T: T, D: dconv, K: kc}) })
				tm("Write", func() { bk.Write(states[i][0], 0, make([]float32, nv*dk*dv)) })
				tm("GatedDelta", func() {
					bk.GatedDelta(o, conv, av, bv, l.aLog, l.dtBias, tensor.DeltaArgs{B: 1, T: T, NK: nk, NV: nv, DK: dk, DV: dv, Chunk: 64, State: states[i]})
				})
				tm("GatedRMSNorm", func() { bk.GatedRMSNorm(o, o, z, l.gnorm, T*nv, dv, 1e-6) })
				mm(x, o, l.out)
			}
			tm("Add", func() { bk.Add(h, x, T*H) })
			tm("RMSNorm", func() { bk.RMSNorm(x, h, l.post, T, H, 1e-6, 1) })
			mm(g, x, l.gate)
			mm(u, x, l.up)
			tm("SwiGLU", func() { bk.SwiGLU(g, g, u, T*I) })
			mm(x, g, l.down)
			tm("Add", func() { bk.Add(h, x, T*H) })
		}
	}
	forward()
	sg, err := bk.MeasureSgemm(b.Context(), T, 3584, 1024, 500*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		forward()
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	gf := 2 * float64(params) * T / sec / 1e9
	b.ReportMetric(T/sec, "tok/s")
	b.ReportMetric(gf, "GFLOP/s")
	b.ReportMetric(sg, "sgemm-GFLOP/s")
	b.ReportMetric(gf/sg, "sgemm-ratio")
	// One more pass, timing each kind of operation.
	timing = true
	st := time.Now()
	forward()
	total := time.Since(st)
	var ops []string
	for op := range spent {
		ops = append(ops, op)
	}
	slices.SortFunc(ops, func(x, y string) int { return cmp.Compare(spent[y], spent[x]) })
	var sb strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&sb, " %s %.0fms (%.0f%%)", op, spent[op].Seconds()*1e3, 100*spent[op].Seconds()/total.Seconds())
	}
	b.Logf("one pass %.0fms:%s", total.Seconds()*1e3, sb.String())
}
