package cpu

import (
	"fmt"
	"testing"
	"time"

	"github.com/startlux/startlux/internal/testenv"
	"github.com/startlux/startlux/tensor"
)

func TestSgemm(t *testing.T) {
	rng := newRNG(t)
	bs := backends(t)
	if haveKernel {
		// The portable loops too, as on CPUs without the vector kernel.
		gb, _ := New(Options{Threads: 2, NoBLAS: true})
		bs = append(bs, testBackend{"cpu-go/portable", gb})
	}
	for _, tb := range bs {
		if tb.name == "cpu-go/portable" {
			haveKernel = false
		}
		for _, sz := range [][3]int{{1, 1, 1}, {1, 7, 5}, {5, 1, 3}, {3, 5, 1}, {17, 9, 33}, {64, 65, 130}, {130, 63, 300}} {
			m, n, k := sz[0], sz[1], sz[2]
			for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				ta, tbb := tr[0], tr[1]
				name := fmt.Sprintf("%s/%dx%dx%d/ta=%v,tb=%v", tb.name, m, n, k, ta, tbb)
				t.Run(name, func(t *testing.T) {
					// Leading dimensions wider than the matrices.
					lda, ldb, ldc := k+3, n+2, n+5
					if ta {
						lda = m + 3
					}
					if tbb {
						ldb = k + 2
					}
					ar, br := m, k
					if ta {
						ar = k
					}
					if tbb {
						br = n
					}
					a := randVec(rng, ar*lda, 1)
					b := randVec(rng, br*ldb, 1)
					c := randVec(rng, m*ldc, 1)
					alpha, beta := float32(0.75), float32(-0.5)
					want := f64s(c)
					for i := range m {
						for j := range n {
							var s float64
							for p := range k {
								var av, bv float32
								if ta {
									av = a[p*lda+i]
								} else {
									av = a[i*lda+p]
								}
								if tbb {
									bv = b[j*ldb+p]
								} else {
									bv = b[p*ldb+j]
								}
								s += float64(av) * float64(bv)
							}
							want[i*ldc+j] = float64(alpha)*s + float64(beta)*float64(c[i*ldc+j])
						}
					}
					tb.b.sgemm(ta, tbb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
					checkClose(t, "c", c, want, 1e-5)
				})
			}
		}
	}
	haveKernel = kernelOK
}

// kernelOK is haveKernel as detected at start-up.
var kernelOK = haveKernel

func TestConvertRows(t *testing.T) {
	rng := newRNG(t)
	var ws []*tensor.Weight
	for _, d := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		v := randVec(rng, 7*37, 1)
		v[0], v[1], v[2] = 1e-7, -3e-5, 70000 // f16 subnormal, small, overflow
		ws = append(ws, tensor.FromFloat32(d.String(), d, []int{7, 37}, v))
	}
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, g := range []int{32, 64, 128} {
			ws = append(ws, quantWeight(rng, 5, 256, bits, g, tensor.BF16))
		}
	}
	ws = append(ws, quantWeight(rng, 5, 128, 4, 64, tensor.F16), quantWeight(rng, 3, 64, 8, 32, tensor.F32))
	for _, w := range ws {
		if err := w.Validate(); err != nil {
			t.Fatal(err)
		}
		n := w.Cols()
		got := make([]float32, (w.Rows()-1)*n)
		convertRows(w, 1, w.Rows(), got)
		want := make([]float32, n)
		for r := 1; r < w.Rows(); r++ {
			w.Row(r, want)
			for c := range want {
				g := got[(r-1)*n+c]
				if g != want[c] && !(g != g && want[c] != want[c]) {
					t.Fatalf("%s %v bits=%v: row %d col %d: got %g, want %g", w.Name, w.DType, w.Quant, r, c, g, want[c])
				}
			}
		}
	}
}

func TestMatMul(t *testing.T) {
	rng := newRNG(t)
	type wcase struct {
		name string
		w    *tensor.Weight
	}
	shapes := [][3]int{{1, 1, 1}, {1, 7, 64}, {3, 300, 5}, {64, 129, 100}, {130, 257, 64}, {5, 2, 96}, {300, 40, 64}, {601, 9, 33}} // the last two: the small-weight path
	for _, sh := range shapes {
		rows, o, in := sh[0], sh[1], sh[2]
		var cases []wcase
		for _, d := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
			cases = append(cases, wcase{d.String(), tensor.FromFloat32("w", d, []int{o, in}, randVec(rng, o*in, 0.5))})
		}
		if in%32 == 0 {
			cases = append(cases, wcase{"q4g32", quantWeight(rng, o, in, 4, 32, tensor.BF16)},
				wcase{"q8g32", quantWeight(rng, o, in, 8, 32, tensor.F16)})
		}
		for _, wc := range cases {
			x := randVec(rng, rows*in, 1)
			wr := rows64(wc.w)
			want := make([]float64, rows*o)
			for r := range rows {
				for j := range o {
					var s float64
					for p := range in {
						s += float64(x[r*in+p]) * wr[j][p]
					}
					want[r*o+j] = s
				}
			}
			for _, tb := range backends(t) {
				t.Run(fmt.Sprintf("%s/%s/%dx%dx%d", tb.name, wc.name, rows, o, in), func(t *testing.T) {
					xt := upload(tb.b, x)
					out := upload(tb.b, randVec(rng, rows*o+3, 1)) // stale contents, extra tail
					tail := download(t, tb.b, out)[rows*o:]
					tb.b.MatMul(out, xt, wc.w, rows)
					got := download(t, tb.b, out)
					checkClose(t, "out", got, want, 1e-5)
					for i, v := range got[rows*o:] {
						if v != tail[i] {
							t.Fatalf("MatMul wrote past rows·O at %d", rows*o+i)
						}
					}
				})
			}
		}
	}
}

// TestBLASAndGoAgree runs the same MatMul on the system BLAS and the pure-Go
// GEMM.
func TestBLASAndGoAgree(t *testing.T) {
	bb, _ := New(Options{})
	if bb.blas == nil {
		testenv.Missing(t, "no system BLAS (Debian: apt-get install libopenblas0; ./build.sh test does)")
	}
	gb, _ := New(Options{NoBLAS: true})
	rng := newRNG(t)
	rows, o, in := 70, 300, 200
	w := tensor.FromFloat32("w", tensor.BF16, []int{o, in}, randVec(rng, o*in, 0.3))
	x := randVec(rng, rows*in, 1)
	var res [2][]float32
	for i, b := range []*Backend{bb, gb} {
		out := b.Alloc(rows * o)
		b.MatMul(out, upload(b, x), w, rows)
		res[i] = download(t, b, out)
	}
	checkClose(t, "blas vs go", res[0], f64s(res[1]), 1e-5)
}

func TestMeasureSgemm(t *testing.T) {
	for _, tb := range backends(t) {
		g, err := tb.b.MeasureSgemm(t.Context(), 64, 96, 128, time.Millisecond)
		if err != nil || !(g > 0) {
			t.Fatalf("%s: MeasureSgemm = %v, %v", tb.name, g, err)
		}
		t.Logf("%s: %.2f GFLOP/s", tb.name, g)
	}
}

// TestMatMulTiling shrinks the tiles so that row tiles, column blocks
// (rounded to quantisation groups) and split rows of x are all exercised,
// and checks an F32 weight whose bytes are not 4-aligned.
func TestMatMulTiling(t *testing.T) {
	rng := newRNG(t)
	for _, sh := range [][3]int{{1, 50, 96}, {7, 50, 200}, {33, 3, 100}, {64, 100, 64}} {
		rows, o, in := sh[0], sh[1], sh[2]
		ws := map[string]*tensor.Weight{
			"BF16": tensor.FromFloat32("w", tensor.BF16, []int{o, in}, randVec(rng, o*in, 0.5)),
			"F16":  tensor.FromFloat32("w", tensor.F16, []int{o, in}, randVec(rng, o*in, 0.5)),
		}
		f := tensor.FromFloat32("w", tensor.F32, []int{o, in}, randVec(rng, o*in, 0.5))
		shifted := make([]byte, len(f.Data)+1)
		copy(shifted[1:], f.Data)
		f.Data = shifted[1:]
		ws["F32-unaligned"] = f
		if in%32 == 0 {
			ws["q4g32"] = quantWeight(rng, o, in, 4, 32, tensor.BF16)
			ws["q3g32"] = quantWeight(rng, o, in, 3, 32, tensor.BF16)
		}
		for name, w := range ws {
			x := randVec(rng, rows*in, 1)
			wr := rows64(w)
			want := make([]float64, rows*o)
			for r := range rows {
				for j := range o {
					for p := range in {
						want[r*o+j] += float64(x[r*in+p]) * wr[j][p]
					}
				}
			}
			for _, tb := range backends(t) {
				tb.b.tileRows, tb.b.tileCols = 16, 40
				out := tb.b.Alloc(rows * o)
				tb.b.MatMul(out, upload(tb.b, x), w, rows)
				checkClose(t, fmt.Sprintf("%s %s %v", tb.name, name, sh), download(t, tb.b, out), want, 1e-5)
			}
		}
	}
}
