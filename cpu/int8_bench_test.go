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
	ps := int8BenchWeights(b)
	for _, rows := range []int{512, 64} {
		for _, p := range ps {
			b.Run(fmt.Sprintf("%s/%d/%s", kern, rows, p.name), func(b *testing.B) { runInt8Bench(b, bk, rows, []int8BenchProj{p}) })
		}
		b.Run(fmt.Sprintf("%s/%d/prefill", kern, rows), func(b *testing.B) { runInt8Bench(b, bk, rows, ps) })
	}
}

// BenchmarkMatMulInt8Core is BenchmarkMatMulInt8 on one thread for three
// projections, at one row block (96 rows: calls of 10–30 ms, short enough
// that the fastest of them are undisturbed on a shared machine) and at
// 512: "speedup-min" is the per-core ratio of the int8 path to the float
// one.
//
//	go test ./cpu -run X -bench MatMulInt8Core -benchtime 40x
func BenchmarkMatMulInt8Core(b *testing.B) {
	bk, err := New(Options{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	kern, _ := bk.Int8Kernel()
	ps := int8BenchWeights(b)
	for _, rows := range []int{int8RowBlock, 512} {
		for _, p := range ps {
			if p.name == "delta_qkv" || p.name == "delta_out" || p.name == "mlp_down" {
				b.Run(fmt.Sprintf("%s/%d/%s", kern, rows, p.name), func(b *testing.B) { runInt8Bench(b, bk, rows, []int8BenchProj{p}) })
			}
		}
	}
}

// int8BenchProj is one projection of the benchmarks, in bf16 and int8.
type int8BenchProj struct {
	name     string
	layers   int
	bf16, i8 *tensor.Weight
}

// int8BenchWeights returns the 0.8B projections with random weights.
func int8BenchWeights(b *testing.B) []int8BenchProj {
	rng := rand.New(rand.NewPCG(1, 2))
	var ps []int8BenchProj
	for _, p := range int8Projections {
		w := tensor.FromFloat32(p.name, tensor.BF16, []int{p.o, p.in}, randVec(rng, p.o*p.in, 0.03))
		q, err := tensor.QuantizeInt8(w)
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, int8BenchProj{p.name, p.layers, w, q})
	}
	return ps
}

// runInt8Bench times rows-row MatMuls over the projections of set on bk,
// bf16 and int8 alternated call by call (each projection once per layer
// when set holds more than one), and reports the medians and their ratios.
func runInt8Bench(b *testing.B, bk *Backend, rows int, set []int8BenchProj) {
	rng := rand.New(rand.NewPCG(5, 6))
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
	for _, bm := range int8BenchModes(true) {
		k, mode := bm.k, bm.mode
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

// int8BenchMode is a kernel of this CPU run one way: "panel" (its own
// panel) or "tile" (its tile per call, the sums added in Go).
type int8BenchMode struct {
	mode string
	k    int8Kernel
}

// int8BenchModes returns the modes of every kernel this CPU runs (the
// portable one only with withGo).
func int8BenchModes(withGo bool) []int8BenchMode {
	var out []int8BenchMode
	for _, k := range int8Kernels() {
		if !k.ok || k.name == "go" && !withGo {
			continue
		}
		if k.panel != nil {
			out = append(out, int8BenchMode{"panel", k})
		}
		k.panel = nil
		out = append(out, int8BenchMode{"tile", k})
	}
	return out
}

// BenchmarkInt8Block times the driver's task alone, single-threaded: one
// block of int8RowBlock rows × int8ChanBlock channels of a 0.8B projection
// (delta_qkv, in 1024; mlp_down, in 3584) over its whole K, the weight
// block read from where the previous blocks left the caches (the channel
// blocks taken in turn, as a worker does). Modes as in BenchmarkInt8Panel;
// GMAC/s of the fastest and the median block.
//
//	go test ./cpu -run X -bench Int8Block -benchtime 2000x
func BenchmarkInt8Block(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, sh := range []struct {
		name string
		o, n int
	}{{"delta_qkv", 6144, 1024}, {"mlp_down", 1024, 3584}} {
		wq := int8Values(rng, sh.o*sh.n, -127, 127)
		w := tensor.Int8FromValues("w", sh.o, sh.n, wq, make([]float32, sh.o))
		for _, bm := range int8BenchModes(false) {
			k, mode := bm.k, bm.mode
			var s int8Scratch
			p := s.problem(&k, int8RowBlock, w)
			for i := range p.a {
				p.a[i] = byte(rng.IntN(255) - 127)
			}
			tk := &int8Task{}
			b.Run(fmt.Sprintf("%s/%s/%s", sh.name, k.name, mode), func(b *testing.B) {
				var ts []time.Duration
				cb := 0
				for b.Loop() {
					c0 := cb * int8ChanBlock
					t0 := time.Now()
					p.block(tk, 0, int8RowBlock, c0, min(sh.o, c0+int8ChanBlock))
					ts = append(ts, time.Since(t0))
					cb = (cb + 1) % (sh.o / int8ChanBlock)
				}
				macs := float64(int8RowBlock * int8ChanBlock * sh.n)
				b.ReportMetric(macs/slices.Min(ts).Seconds()/1e9, "GMAC/s")
				b.ReportMetric(macs/median(ts).Seconds()/1e9, "GMAC/s-median")
			})
		}
	}
}
