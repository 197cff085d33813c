package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/startlux/startlux/tensor"
)

// int8Projections are the projections of Qwen3.5-0.8B (qwen35.md §1.3:
// H 1024, I 3584, 8 query heads of 256, 2 kv heads, DeltaNet value width
// 2048, conv width 6144) that int8 converts, with the number of layers
// that have each: 6 full-attention layers, 18 DeltaNet layers, 24 MLPs.
var int8Projections = []struct {
	name          string
	o, in, layers int
}{
	{"attn_q", 4096, 1024, 6},
	{"attn_k", 512, 1024, 6},
	{"attn_v", 512, 1024, 6},
	{"attn_o", 1024, 2048, 6},
	{"delta_qkv", 6144, 1024, 18},
	{"delta_z", 2048, 1024, 18},
	{"delta_out", 1024, 2048, 18},
	{"mlp_gate", 3584, 1024, 24},
	{"mlp_up", 3584, 1024, 24},
	{"mlp_down", 1024, 3584, 24},
}

// BenchmarkMatMulInt8 times MatMul over each 0.8B projection as bf16 (the
// float path: widen to float32, sgemm) and as int8, alternating the two call
// by call so that both see the same machine, for a 512-token prefill and a
// 64-row batch. It reports each path's median time per call and the bf16
// time over the int8 time as the ratio of the medians ("speedup") and of
// the fastest calls ("speedup-min", the figure least disturbed by other
// load on a shared machine). The int8 kernel is the best this CPU runs, or
// STARTLUX_INT8_KERNEL's:
//
//	go test ./cpu -run X -bench MatMulInt8 -benchtime 20x
//	STARTLUX_INT8_KERNEL=avx2 go test ./cpu -run X -bench MatMulInt8 -benchtime 20x
//
// The "prefill" entry runs every projection of the 24 layers once per
// iteration (each shape's weight reused for its layers) and reports the
// same figures for the whole set, per iteration.
func BenchmarkMatMulInt8(b *testing.B) {
	bk, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	kern, _ := bk.Int8Kernel()
	rng := rand.New(rand.NewPCG(1, 2))
	type proj struct {
		name     string
		layers   int
		bf16, i8 *tensor.Weight
	}
	var ps []proj
	for _, p := range int8Projections {
		w := tensor.FromFloat32(p.name, tensor.BF16, []int{p.o, p.in}, randVec(rng, p.o*p.in, 0.03))
		q, err := tensor.QuantizeInt8(w)
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, proj{p.name, p.layers, w, q})
	}
	run := func(b *testing.B, rows int, set []proj) {
		maxIn, maxO := 0, 0
		for _, p := range set {
			maxIn, maxO = max(maxIn, p.bf16.Cols()), max(maxO, p.bf16.Rows())
		}
		x := upload(bk, randVec(rng, rows*maxIn, 1))
		out := bk.Alloc(rows * maxO)
		for _, p := range set { // warm the buffers
			bk.MatMul(out, x, p.bf16, rows)
			bk.MatMul(out, x, p.i8, rows)
		}
		var tf, tq []time.Duration
		for b.Loop() {
			var df, dq time.Duration
			for _, p := range set {
				reps := 1
				if len(set) > 1 {
					reps = p.layers
				}
				for range reps {
					t0 := time.Now()
					bk.MatMul(out, x, p.bf16, rows)
					t1 := time.Now()
					bk.MatMul(out, x, p.i8, rows)
					df += t1.Sub(t0)
					dq += time.Since(t1)
				}
			}
			tf, tq = append(tf, df), append(tq, dq)
		}
		mf, mq := median(tf), median(tq)
		b.ReportMetric(mf.Seconds()*1e3, "bf16-ms")
		b.ReportMetric(mq.Seconds()*1e3, "int8-ms")
		b.ReportMetric(mf.Seconds()/mq.Seconds(), "speedup")
		b.ReportMetric(slices.Min(tf).Seconds()/slices.Min(tq).Seconds(), "speedup-min")
	}
	for _, rows := range []int{512, 64} {
		for _, p := range ps {
			b.Run(fmt.Sprintf("%s/%d/%s", kern, rows, p.name), func(b *testing.B) { run(b, rows, []proj{p}) })
		}
		b.Run(fmt.Sprintf("%s/%d/prefill", kern, rows), func(b *testing.B) { run(b, rows, ps) })
	}
}

// median returns the median of d (which it sorts).
func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkInt8Panel times the int8 register tiles alone, single-threaded,
// on data in L1: three 1024-column K blocks of one row tile against 8
// channel tiles, accumulated in place as the driver does. "panel" is the
// kernel's own panel where it has one, "tile" the tile with the sums added
// in Go. Each call (a few µs) is timed; it reports GMAC/s (multiply-adds
// per second) of the fastest call, the figure a shared machine disturbs
// least, and of the median one.
//
//	go test ./cpu -run X -bench Int8Panel -benchtime 20000x
func BenchmarkInt8Panel(b *testing.B) {
	const kc, nt = 1024, 8
	rng := rand.New(rand.NewPCG(3, 4))
	for _, k0 := range int8Kernels() {
		if !k0.ok {
			continue
		}
		modes := []string{"tile"}
		if k0.panel != nil {
			modes = append(modes, "panel")
		}
		for _, mode := range modes {
			k := k0
			if mode == "tile" {
				k.panel = nil
			}
			lda, ldw, ldc := kc+64, kc, nt*k.nr
			a := make([]byte, k.mr*lda)
			w := make([]byte, nt*k.nr*ldw)
			for i := range a {
				a[i] = byte(rng.IntN(255) - 127)
			}
			for i := range w {
				w[i] = byte(rng.IntN(256))
			}
			c := make([]int32, k.mr*ldc)
			tk := &int8Task{}
			b.Run(k.name+"/"+mode, func(b *testing.B) {
				var ts []time.Duration
				for b.Loop() {
					t0 := time.Now()
					for i := range 3 {
						k.runPanel(tk, kc, a, lda, w, ldw, nt, c, ldc, i > 0)
					}
					ts = append(ts, time.Since(t0))
				}
				macs := 3 * float64(k.mr*nt*k.nr*kc)
				b.ReportMetric(macs/slices.Min(ts).Seconds()/1e9, "GMAC/s")
				b.ReportMetric(macs/median(ts).Seconds()/1e9, "GMAC/s-median")
			})
		}
	}
}
