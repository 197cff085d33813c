package cpu

import (
	"fmt"
	"testing"

	"github.com/startlux/startlux/tensor"
)

// TestMatMulAllocs holds MatMul's dispatch to its allocation budget, on the
// pure-Go GEMM, which itself allocates nothing (its packing buffers and the
// backend's tile scratch are pooled). A fan-out over the workers allocates
// the task's closure and, with helpers, the pool's job: the tile path fans
// out once (at most 2 allocations); a small weight that is not used in place
// is first widened whole in a fan-out of its own through parallelRange,
// which wraps the task in one more closure (at most 5). Nothing is allocated
// per tile, per column block or per block of rows, whatever the shape, dtype
// or number of workers.
//
// The system BLAS is left out: its binding (purego's reflect-based
// RegisterFunc) allocates on every cblas_sgemm call.
func TestMatMulAllocs(t *testing.T) {
	rng := newRNG(t)
	for _, threads := range []int{1, 3} {
		b, err := New(Options{Threads: threads, NoBLAS: true})
		if err != nil {
			t.Fatal(err)
		}
		m, n, k := 37, 50, 130
		a, bm, c := randVec(rng, m*k, 1), randVec(rng, n*k, 1), make([]float32, m*n)
		goSgemm(false, true, m, n, k, 1, a, k, bm, k, 0, c, n)
		if got := testing.AllocsPerRun(20, func() { goSgemm(false, true, m, n, k, 1, a, k, bm, k, 0, c, n) }); got != 0 {
			t.Errorf("%d threads: the pure-Go GEMM allocates %v times a call", threads, got)
		}
		for _, tc := range []struct {
			name          string
			rows, out, in int
			widened       bool // the small-weight path widens a weight that is not used in place
		}{
			{"inline", 4, 4, 64, false},
			{"one tile", 64, 300, 256, false},
			{"many tiles", 64, 2000, 256, false},
			{"column blocks", 8, 100, 5000, false},
			{"split rows", 8, 2, 140000, false},
			{"small weight", 300, 256, 256, true},
		} {
			weights := []*tensor.Weight{
				tensor.FromFloat32("w", tensor.F32, []int{tc.out, tc.in}, randVec(rng, tc.out*tc.in, 0.5)),
				tensor.FromFloat32("w", tensor.BF16, []int{tc.out, tc.in}, randVec(rng, tc.out*tc.in, 0.5)),
			}
			if tc.in%32 == 0 {
				weights = append(weights, quantWeight(rng, tc.out, tc.in, 4, 32, tensor.BF16))
			}
			for _, w := range weights {
				name := fmt.Sprintf("%d threads/%s/%dx%dx%d/%s", threads, tc.name, tc.rows, tc.out, tc.in, w.DType)
				x, out := upload(b, randVec(rng, tc.rows*tc.in, 1)), b.Alloc(tc.rows*tc.out)
				b.MatMul(out, x, w, tc.rows) // fills the scratch pools
				budget := 2
				if tc.widened && f32View(w) == nil {
					budget = 5
				}
				if got := testing.AllocsPerRun(20, func() { b.MatMul(out, x, w, tc.rows) }); got > float64(budget) {
					t.Errorf("%s: %v allocations a call, want at most %d", name, got, budget)
				}
			}
		}
	}
}

// TestMatMulWideQuantised holds MatMul over quantised weights whose rows
// have more groups than dequantRow widens at a time (256) to the reference
// dequantisation, with and without column blocks.
func TestMatMulWideQuantised(t *testing.T) {
	rng := newRNG(t)
	for _, tc := range []struct {
		rows, out, in, bits, group int
		tileCols                   int
	}{
		{3, 5, 300 * 32, 4, 32, defaultTileCols},
		{2, 3, 600 * 32, 3, 32, 1000},
		{5, 2, 520 * 64, 8, 64, 40 * 64},
	} {
		w := quantWeight(rng, tc.out, tc.in, tc.bits, tc.group, tensor.BF16)
		x := randVec(rng, tc.rows*tc.in, 1)
		wr := rows64(w)
		want := make([]float64, tc.rows*tc.out)
		for r := range tc.rows {
			for j := range tc.out {
				for p := range tc.in {
					want[r*tc.out+j] += float64(x[r*tc.in+p]) * wr[j][p]
				}
			}
		}
		for _, tb := range backends(t) {
			tb.b.tileCols = tc.tileCols
			out := tb.b.Alloc(tc.rows * tc.out)
			tb.b.MatMul(out, upload(tb.b, x), w, tc.rows)
			checkClose(t, fmt.Sprintf("%s %d-bit %dx%dx%d, column blocks of %d", tb.name, tc.bits, tc.rows, tc.out, tc.in, tc.tileCols),
				download(t, tb.b, out), want, 1e-5)
		}
	}
}
