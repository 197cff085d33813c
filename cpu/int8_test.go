package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/startlux/startlux/tensor"
)

// int8KernelsHere returns the kernels this CPU runs, logging the others
// (they cannot be tested here).
func int8KernelsHere(t *testing.T) []*int8Kernel {
	t.Helper()
	var out []*int8Kernel
	ks := int8Kernels()
	for i := range ks {
		if ks[i].ok {
			out = append(out, &ks[i])
		} else {
			t.Logf("int8 kernel %s: this CPU cannot run it; not tested here", ks[i].name)
		}
	}
	return out
}

// refAcc is the plain int32 product: acc[r·o + j] = Σ_i x[r·n+i]·w[j·n+i].
func refAcc(x, w []int8, rows, o, n int) []int32 {
	acc := make([]int32, rows*o)
	for r := range rows {
		for j := range o {
			var s int32
			for i := range n {
				s += int32(x[r*n+i]) * int32(w[j*n+i])
			}
			acc[r*o+j] = s
		}
	}
	return acc
}

// kernelAcc runs kernel k through the driver on quantised rows x and the
// int8 weight w, as MatMul does, and returns the corrected int32 products.
func kernelAcc(k *int8Kernel, x []int8, w *tensor.Weight, rows int) []int32 {
	var s int8Scratch
	p := s.problem(k, rows, w)
	n := w.Cols()
	var xor byte
	if k.offset {
		xor = 0x80
	}
	for r := range rows {
		for i := range n {
			p.a[r*p.lda+i] = byte(x[r*n+i]) ^ xor
		}
	}
	return p.block(&int8Task{}, 0, rows, 0, w.Rows())
}

// int8Values draws n int8 values: uniform in [lo, hi].
func int8Values(rng *rand.Rand, n int, lo, hi int) []int8 {
	v := make([]int8, n)
	for i := range v {
		v[i] = int8(lo + rng.IntN(hi-lo+1))
	}
	return v
}

// TestInt8Kernels holds every kernel this CPU runs to the plain int32
// loop, bit for bit, on shapes with tails in every dimension and on the
// extremes that would saturate a careless int16 sum.
func TestInt8Kernels(t *testing.T) {
	rng := newRNG(t)
	type shape struct{ rows, o, n int }
	var shapes []shape
	for range 30 {
		shapes = append(shapes, shape{1 + rng.IntN(37), 1 + rng.IntN(40), 1 + rng.IntN(300)})
	}
	shapes = append(shapes, shape{37, 97, 64}, shape{100, 200, 96}, shape{5, 7, 4096 + 200}, shape{4, 6, 8192}, shape{3, 3, 32}, shape{1, 1, 1})
	for _, k := range int8KernelsHere(t) {
		for _, sh := range shapes {
			x := int8Values(rng, sh.rows*sh.n, -127, 127)
			wq := int8Values(rng, sh.o*sh.n, -128, 127)
			w := tensor.Int8FromValues("w", sh.o, sh.n, wq, make([]float32, sh.o))
			got := kernelAcc(k, x, w, sh.rows)
			checkAcc(t, fmt.Sprintf("%s %dx%dx%d", k.name, sh.rows, sh.o, sh.n), got, refAcc(x, wq, sh.rows, sh.o, sh.n))
		}
		// Extremes: every lane of a vector at the end of the range.
		rows, o, n := 7, 8, 4096+64+32+5
		const (
			all = iota
			alternating
			random
		)
		fill := func(v []int8, a, b int8, how int) {
			for i := range v {
				switch {
				case how == all, how == alternating && i%2 == 0, how == random && rng.IntN(2) == 0:
					v[i] = a
				default:
					v[i] = b
				}
			}
		}
		for _, xs := range [][2]int8{{127, 127}, {-127, -127}, {127, -127}} {
			for _, ws := range [][2]int8{{-128, -128}, {127, 127}, {-128, 127}, {127, -128}} {
				for how := range 3 {
					x := make([]int8, rows*n)
					wq := make([]int8, o*n)
					fill(x, xs[0], xs[1], how)
					fill(wq, ws[0], ws[1], how)
					w := tensor.Int8FromValues("w", o, n, wq, make([]float32, o))
					got := kernelAcc(k, x, w, rows)
					checkAcc(t, fmt.Sprintf("%s extremes x %v w %v pattern %d", k.name, xs, ws, how), got, refAcc(x, wq, rows, o, n))
				}
			}
		}
	}
}

func checkAcc(t *testing.T, what string, got, want []int32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d sums, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: sum %d is %d, want %d", what, i, got[i], want[i])
		}
	}
}

// int8Backends returns a backend for every kernel this CPU runs, with the
// system BLAS and without, several threads and one.
func int8Backends(t *testing.T) []testBackend {
	t.Helper()
	var out []testBackend
	for _, k := range int8KernelsHere(t) {
		for _, opts := range []Options{{Threads: 3}, {Threads: 3, NoBLAS: true}, {Threads: 1, NoBLAS: true}} {
			opts.Int8Kernel = k.env
			b, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			if kn, _ := b.Int8Kernel(); kn != k.name {
				t.Fatalf("Options.Int8Kernel %q gives kernel %q", k.env, kn)
			}
			out = append(out, testBackend{fmt.Sprintf("%s/%s/%d", b.Name(), k.name, opts.Threads), b})
		}
	}
	return out
}

// TestInt8MatMul checks MatMul over int8 weights on every kernel: exactly
// against tensor.Int8MatMul, and against MatMul over the dequantised float
// weight within the bound of the activations' quantisation (half a step of
// each row times Σ|w| of each channel).
func TestInt8MatMul(t *testing.T) {
	rng := newRNG(t)
	shapes := [][3]int{{1, 1, 1}, {1, 7, 64}, {3, 300, 5}, {37, 129, 100}, {130, 257, 64}, {5, 2, 96}, {200, 97, 33}, {9, 40, 4200}}
	bs := int8Backends(t)
	for _, sh := range shapes {
		rows, o, n := sh[0], sh[1], sh[2]
		wf := randVec(rng, o*n, 0.05)
		for c := range n {
			wf[(o/2)*n+c] = 0 // a channel of zeros
		}
		wf[rng.IntN(o*n)] = 3 // an outlier
		w, err := tensor.QuantizeInt8(tensor.FromFloat32("w", tensor.BF16, []int{o, n}, wf))
		if err != nil {
			t.Fatal(err)
		}
		deq := tensor.FromFloat32("deq", tensor.F32, []int{o, n}, w.Float32s())
		x := randVec(rng, rows*n, 1)
		if rows > 2 {
			clear(x[n : 2*n])       // a row of zeros
			x[2*n+rng.IntN(n)] = 40 // an outlier
		}
		want := make([]float32, rows*o)
		tensor.Int8MatMul(want, x, w, rows)
		for _, tb := range bs {
			t.Run(fmt.Sprintf("%s/%dx%dx%d", tb.name, rows, o, n), func(t *testing.T) {
				b := tb.b
				xt := upload(b, x)
				out := upload(b, randVec(rng, rows*o+3, 1)) // stale contents, extra tail
				tail := download(t, b, out)[rows*o:]
				b.MatMul(out, xt, w, rows)
				got := download(t, b, out)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("out[%d] = %g, reference %g", i, got[i], want[i])
					}
				}
				for i, v := range got[rows*o:] {
					if v != tail[i] {
						t.Fatalf("MatMul wrote past rows·O at %d", rows*o+i)
					}
				}
				fo := b.Alloc(rows * o)
				b.MatMul(fo, xt, deq, rows)
				fl := download(t, b, fo)
				wd := w.Float32s()
				for r := range rows {
					amax, _ := tensor.AbsMax(x[r*n : (r+1)*n])
					for j := range o {
						var absW float64
						for _, v := range wd[j*n : (j+1)*n] {
							absW += math.Abs(float64(v))
						}
						f := float64(fl[r*o+j])
						bound := 0.5*float64(amax)/127*absW*(1+1e-4) + 1e-5*math.Abs(f) + 1e-6
						if e := math.Abs(float64(got[r*o+j]) - f); e > bound {
							t.Fatalf("out[%d,%d] = %g, float path %g: error %g beyond %g", r, j, got[r*o+j], f, e, bound)
						}
					}
				}
			})
		}
	}
	// A row holding an infinity gives NaNs, and only there.
	w, _ := tensor.QuantizeInt8(tensor.FromFloat32("w", tensor.F32, []int{5, 40}, randVec(rng, 200, 1)))
	x := randVec(rng, 3*40, 1)
	x[40+3] = float32(math.Inf(-1))
	for _, tb := range bs {
		out := tb.b.Alloc(15)
		tb.b.MatMul(out, upload(tb.b, x), w, 3)
		got := download(t, tb.b, out)
		for i, v := range got {
			if math.IsNaN(float64(v)) != (i/5 == 1) {
				t.Fatalf("%s: out[%d] = %g with an infinity in row 1", tb.name, i, v)
			}
		}
	}
}

// TestQuantizeRow holds the backend's activation quantiser (vector loops
// where there are any, and the portable loop) to tensor.QuantizeInt8Vec
// bit for bit, in both stored forms.
func TestQuantizeRow(t *testing.T) {
	rng := newRNG(t)
	for _, vector := range []bool{true, false} {
		if vector && !kernelOK {
			continue
		}
		haveKernel = vector && kernelOK
		for _, n := range []int{1, 7, 31, 32, 33, 64, 100, 1000, 1024} {
			for _, kind := range []string{"random", "zeros", "tiny", "NaN", "ties"} {
				x := randVec(rng, n, 2)
				switch kind {
				case "zeros":
					clear(x)
				case "tiny":
					for i := range x {
						x[i] *= 0x1p-102
					}
				case "NaN":
					x[rng.IntN(n)] = float32(math.NaN())
				case "ties":
					// amax 127: inv is 1 and the halves round to even.
					for i := range x {
						x[i] = float32(rng.IntN(254)-127) + 0.5
					}
					x[0] = 127
				}
				want := make([]int8, n)
				ws, _ := tensor.QuantizeInt8Vec(want, x)
				for _, offset := range []bool{false, true} {
					dst := make([]byte, n+70)
					for i := range dst {
						dst[i] = 0x55
					}
					rs := quantizeRow(dst, x, offset)
					if math.Float32bits(rs) != math.Float32bits(ws) {
						t.Fatalf("vector %v n %d %s: scale %g, want %g", vector, n, kind, rs, ws)
					}
					for i := range dst {
						var w byte
						if i < n {
							w = byte(want[i])
							if offset {
								w ^= 0x80
							}
						}
						if dst[i] != w {
							t.Fatalf("vector %v n %d %s offset %v: byte %d is %#x, want %#x", vector, n, kind, offset, i, dst[i], w)
						}
					}
				}
			}
		}
	}
	haveKernel = kernelOK
}

// TestInt8Out holds the backend's epilogue to tensor.Int8Output bit for
// bit, with sums beyond 2²⁴ (where the conversion rounds).
func TestInt8Out(t *testing.T) {
	rng := newRNG(t)
	for _, vector := range []bool{true, false} {
		if vector && !kernelOK {
			continue
		}
		haveKernel = vector && kernelOK
		for _, n := range []int{1, 8, 13, 96} {
			acc := make([]int32, n)
			cs := make([]float32, n)
			for i := range acc {
				acc[i] = int32(rng.Uint32())
				cs[i] = float32(rng.ExpFloat64() * 1e-3)
			}
			rs := float32(0.0123)
			out := make([]float32, n)
			int8Out(out, acc, rs, cs)
			for i := range out {
				if want := tensor.Int8Output(acc[i], rs, cs[i]); math.Float32bits(out[i]) != math.Float32bits(want) {
					t.Fatalf("vector %v: out[%d] = %g, want %g", vector, i, out[i], want)
				}
			}
		}
	}
	haveKernel = kernelOK
}

func TestInt8KernelChoice(t *testing.T) {
	best, err := chooseInt8("")
	if err != nil || !best.ok {
		t.Fatalf("default kernel %v, %v", best, err)
	}
	if best.name != int8KernelsHere(t)[0].name {
		t.Fatalf("default kernel %s, want the first this CPU runs", best.name)
	}
	if g, err := chooseInt8("go"); err != nil || g.name != "go" {
		t.Fatalf(`chooseInt8("go") = %v, %v`, g, err)
	}
	tests := []struct{ choice, want string }{
		{"neon", `unknown int8 kernel "neon": want one of avx512vnni, avx2, sdot, go`},
		{"AVX2", "unknown int8 kernel"},
		{"avx2,go", "unknown int8 kernel"},
		{"avx", "unknown int8 kernel"},
	}
	for _, k := range int8Kernels() {
		if !k.ok {
			tests = append(tests, struct{ choice, want string }{k.env, "this CPU cannot run it"})
		}
	}
	other := map[bool]string{true: "sdot", false: "avx2"}[strings.Contains(int8Kernels()[0].env, "avx")]
	if len(int8Kernels()) == 1 {
		other = "sdot"
	}
	tests = append(tests, struct{ choice, want string }{other, "not built for this architecture"})
	for _, tc := range tests {
		_, err := chooseInt8(tc.choice)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("chooseInt8(%q) = %v, want an error containing %q", tc.choice, err, tc.want)
		}
	}
	if _, err := New(Options{Int8Kernel: "bogus"}); err == nil || !strings.Contains(err.Error(), "Options.Int8Kernel") {
		t.Errorf("New with a bogus kernel: %v", err)
	}
	t.Setenv(Int8KernelEnv, "bogus")
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), Int8KernelEnv+`: unknown int8 kernel "bogus"`) {
		t.Errorf("New with %s=bogus: %v", Int8KernelEnv, err)
	}
	t.Setenv(Int8KernelEnv, "go")
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if name, err := b.Int8Kernel(); name != "go" || err != nil {
		t.Errorf("%s=go: Int8Kernel() = %q, %v", Int8KernelEnv, name, err)
	}
}

// TestInt8Embed gathers rows of an int8 weight: they dequantise as
// tensor.Weight.Row does.
func TestInt8Embed(t *testing.T) {
	rng := newRNG(t)
	w, _ := tensor.QuantizeInt8(tensor.FromFloat32("e", tensor.BF16, []int{20, 33}, randVec(rng, 20*33, 1)))
	b, _ := New(Options{Threads: 2})
	ids := []int32{3, 19, 0, 3}
	out := b.Alloc(len(ids) * 33)
	b.Embed(out, w, ids)
	got := download(t, b, out)
	row := make([]float32, 33)
	for i, id := range ids {
		w.Row(int(id), row)
		for c := range row {
			if got[i*33+c] != row[c] {
				t.Fatalf("row %d col %d: %g, want %g", id, c, got[i*33+c], row[c])
			}
		}
	}
}

// TestMatMulInt8Allocs bounds the allocations of an int8 MatMul call once
// its buffers are warm: the closures and jobs of its two parallel calls (the
// rows' quantisation, the products). TestMatMulAllocs bounds the float path.
func TestMatMulInt8Allocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers")
	}
	rng := newRNG(t)
	rows, o, n := 64, 200, 256
	wf := tensor.FromFloat32("w", tensor.BF16, []int{o, n}, randVec(rng, o*n, 0.1))
	wq, _ := tensor.QuantizeInt8(wf)
	for _, tb := range append(backends(t), int8Backends(t)...) {
		b := tb.b
		x := upload(b, randVec(rng, rows*n, 1))
		out := b.Alloc(rows * o)
		b.MatMul(out, x, wq, rows) // fills the scratch pools
		if allocs := testing.AllocsPerRun(20, func() { b.MatMul(out, x, wq, rows) }); allocs > 3 {
			t.Errorf("%s: MatMul over %s allocates %.1f times a call, want at most 3", tb.name, wq.DType, allocs)
		}
	}
}

// vnniModelTile computes in Go what the avx512-vnni tile computes with
// vpdpbusd: unsigned activation bytes times signed weight bytes, summed in
// wrapping int32, over its 4×6 tile.
func vnniModelTile(k int, a []byte, lda int, w []byte, ldw int, c []int32) {
	for r := range 4 {
		for j := range 6 {
			var s int32
			for i := range k {
				s += int32(a[r*lda+i]) * int32(int8(w[j*ldw+i]))
			}
			c[r*6+j] = s
		}
	}
}

// TestInt8OffsetDriver runs the driver's offset path (activations stored as
// q + 128, sums corrected by 128·Σw), which only the avx512-vnni kernel
// uses, with a Go model of that kernel, so that it is tested on every CPU:
// exactly against the plain loop, with in-features large enough that the
// unsigned sums wrap around int32, and through MatMul against
// tensor.Int8MatMul.
func TestInt8OffsetDriver(t *testing.T) {
	rng := newRNG(t)
	k := &int8Kernel{name: "vnni-model", mr: 4, nr: 6, kv: 64, offset: true, ok: true, tile: vnniModelTile}
	for _, sh := range [][3]int{{1, 1, 1}, {5, 7, 100}, {37, 97, 64}, {9, 13, 1500}, {4, 6, 70000}} {
		rows, o, n := sh[0], sh[1], sh[2]
		x := int8Values(rng, rows*n, -127, 127)
		wq := int8Values(rng, o*n, -128, 127)
		if n == 70000 {
			for i := range x {
				x[i], wq[i%(o*n)] = 127, -128 // Σ (127+128)·(−128) wraps; the true sum fits
			}
		}
		w := tensor.Int8FromValues("w", o, n, wq, make([]float32, o))
		checkAcc(t, fmt.Sprintf("offset driver %v", sh), kernelAcc(k, x, w, rows), refAcc(x, wq, rows, o, n))
	}
	b, _ := New(Options{Threads: 2})
	b.int8 = k
	rows, o, n := 50, 100, 200
	w, _ := tensor.QuantizeInt8(tensor.FromFloat32("w", tensor.BF16, []int{o, n}, randVec(rng, o*n, 0.1)))
	x := randVec(rng, rows*n, 1)
	want := make([]float32, rows*o)
	tensor.Int8MatMul(want, x, w, rows)
	out := b.Alloc(rows * o)
	b.MatMul(out, upload(b, x), w, rows)
	for i, v := range download(t, b, out) {
		if math.Float32bits(v) != math.Float32bits(want[i]) {
			t.Fatalf("MatMul with the offset kernel: out[%d] = %g, reference %g", i, v, want[i])
		}
	}
}

// TestInt8Panel holds every kernel's panel (its own, or its tile with the
// sums added in Go) to the plain loop: nt tiles side by side, stored or
// added in place (wrapping int32), with row strides beyond the panel whose
// extra columns it must leave alone.
func TestInt8Panel(t *testing.T) {
	rng := newRNG(t)
	for _, k0 := range int8KernelsHere(t) {
		for _, own := range []bool{true, false} {
			k := *k0
			if !own {
				if k.panel == nil {
					continue
				}
				k.panel = nil
			}
			for range 40 {
				nt := 1 + rng.IntN(12)
				kc := k.kv * (1 + rng.IntN(2048/k.kv))
				lda, ldw, ldc := kc+rng.IntN(100), kc+rng.IntN(100), nt*k.nr+rng.IntN(6)
				x := int8Values(rng, k.mr*lda, -127, 127)
				wq := int8Values(rng, nt*k.nr*ldw, -128, 127)
				a := make([]byte, len(x))
				for i, v := range x {
					a[i] = byte(v)
					if k.offset {
						a[i] ^= 0x80
					}
				}
				w := make([]byte, len(wq))
				for i, v := range wq {
					w[i] = byte(v)
				}
				add := rng.IntN(2) == 0
				c := make([]int32, k.mr*ldc)
				for i := range c {
					c[i] = int32(rng.Uint32())
				}
				old := slices.Clone(c)
				k.runPanel(&int8Task{}, kc, a, lda, w, ldw, nt, c, ldc, add)
				what := fmt.Sprintf("%s (own panel %v) nt %d k %d ldc %d add %v", k.name, own, nt, kc, ldc, add)
				for r := range k.mr {
					for j := range ldc {
						want := old[r*ldc+j]
						if j < nt*k.nr {
							var s int32
							for i := range kc {
								xi := int32(a[r*lda+i])
								if !k.offset {
									xi = int32(int8(a[r*lda+i]))
								}
								s += xi * int32(wq[j*ldw+i])
							}
							if add {
								want += s
							} else {
								want = s
							}
						}
						if c[r*ldc+j] != want {
							t.Fatalf("%s: c[%d, %d] = %d, want %d", what, r, j, c[r*ldc+j], want)
						}
					}
				}
			}
		}
	}
}

// TestInt8Blocks runs the driver block by block as MatMul does (blocks of
// int8RowBlock rows and int8ChanBlock channels) on shapes where blocks end
// inside a tile: rows and channels past a block size with partial tiles, a
// padded weight (in-features not a multiple of kv) and a tail tile, K past
// one K block.
func TestInt8Blocks(t *testing.T) {
	rng := newRNG(t)
	shapes := [][3]int{
		{int8RowBlock + 5, 2*int8ChanBlock + 7, 100},
		{2*int8RowBlock + 1, int8ChanBlock + 2, int8KBlock + 64},
		{int8RowBlock - 1, 2*int8ChanBlock - 1, 2*int8KBlock + 7},
		{4, int8ChanBlock + 1, 3*int8KBlock + 32},
	}
	for _, k := range int8KernelsHere(t) {
		for _, sh := range shapes {
			rows, o, n := sh[0], sh[1], sh[2]
			x := int8Values(rng, rows*n, -127, 127)
			wq := int8Values(rng, o*n, -128, 127)
			w := tensor.Int8FromValues("w", o, n, wq, make([]float32, o))
			var s int8Scratch
			p := s.problem(k, rows, w)
			for r := range rows {
				for i := range n {
					p.a[r*p.lda+i] = byte(x[r*n+i])
					if k.offset {
						p.a[r*p.lda+i] ^= 0x80
					}
				}
			}
			got := make([]int32, rows*o)
			tk := &int8Task{}
			for m0 := 0; m0 < rows; m0 += int8RowBlock {
				for c0 := 0; c0 < o; c0 += int8ChanBlock {
					m1, c1 := min(rows, m0+int8RowBlock), min(o, c0+int8ChanBlock)
					acc := p.block(tk, m0, m1, c0, c1)
					for r := m0; r < m1; r++ {
						copy(got[r*o+c0:r*o+c1], acc[(r-m0)*(c1-c0):(r-m0+1)*(c1-c0)])
					}
				}
			}
			checkAcc(t, fmt.Sprintf("%s blocks %dx%dx%d", k.name, rows, o, n), got, refAcc(x, wq, rows, o, n))
		}
	}
}
