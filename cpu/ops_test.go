package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/startlux/startlux/tensor"
)

func TestEmbed(t *testing.T) {
	rng := newRNG(t)
	ws := []*tensor.Weight{
		tensor.FromFloat32("e", tensor.BF16, []int{50, 33}, randVec(rng, 50*33, 1)),
		tensor.FromFloat32("e", tensor.F16, []int{50, 33}, randVec(rng, 50*33, 1)),
		tensor.FromFloat32("e", tensor.F32, []int{50, 33}, randVec(rng, 50*33, 1)),
		quantWeight(rng, 50, 64, 4, 32, tensor.BF16),
		quantWeight(rng, 50, 96, 6, 32, tensor.BF16),
	}
	ids := []int32{0, 49, 3, 3, 17, 22, 1, 0, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21}
	for _, tb := range backends(t) {
		for _, w := range ws {
			for _, n := range []int{1, len(ids)} {
				h := w.Cols()
				out := tb.b.Alloc(n * h)
				tb.b.Embed(out, w, ids[:n])
				got := download(t, tb.b, out)
				row := make([]float32, h)
				for i, id := range ids[:n] {
					w.Row(int(id), row)
					for c := range row {
						if got[i*h+c] != row[c] {
							t.Fatalf("%s %s: token %d col %d: got %g, want %g", tb.name, w.DType, i, c, got[i*h+c], row[c])
						}
					}
				}
			}
		}
	}
}

func TestElementwise(t *testing.T) {
	rng := newRNG(t)
	for _, tb := range backends(t) {
		for _, n := range []int{1, 7, 1000, 70001} {
			t.Run(fmt.Sprintf("%s/%d", tb.name, n), func(t *testing.T) {
				b := tb.b
				x, y := randVec(rng, n+2, 3), randVec(rng, n+2, 3)
				want := make([]float64, n+2)
				// Add.
				for i := range want {
					want[i] = float64(x[i])
					if i < n {
						want[i] += float64(y[i])
					}
				}
				d := upload(b, x)
				b.Add(d, upload(b, y), n)
				checkClose(t, "Add", download(t, b, d), want, 1e-6)
				// SwiGLU.
				out := upload(b, make([]float32, n+2))
				b.SwiGLU(out, upload(b, x), upload(b, y), n)
				for i := range want {
					want[i] = 0
					if i < n {
						want[i] = silu64(float64(x[i])) * float64(y[i])
					}
				}
				checkClose(t, "SwiGLU", download(t, b, out), want, 1e-6)
				for _, alias := range []string{"gate", "up"} {
					gt, ut := upload(b, x), upload(b, y)
					o := gt
					if alias == "up" {
						o = ut
					}
					b.SwiGLU(o, gt, ut, n)
					got := download(t, b, o)
					for i := n; i < n+2; i++ {
						got[i] = 0 // beyond n: the aliased input, not checked
					}
					checkClose(t, "SwiGLU into "+alias, got, want, 1e-6)
				}
				// SigmoidMul.
				d = upload(b, x)
				b.SigmoidMul(d, upload(b, y), n)
				for i := range want {
					want[i] = float64(x[i])
					if i < n {
						want[i] *= sigmoid64(float64(y[i]))
					}
				}
				checkClose(t, "SigmoidMul", download(t, b, d), want, 1e-6)
			})
		}
	}
}

func TestNorms(t *testing.T) {
	rng := newRNG(t)
	const eps = 1e-6
	for _, tb := range backends(t) {
		for _, sh := range [][2]int{{1, 1}, {1, 7}, {3, 128}, {130, 33}} {
			rows, n := sh[0], sh[1]
			for _, wd := range []tensor.DType{tensor.BF16, tensor.F32} {
				t.Run(fmt.Sprintf("%s/%dx%d/%s", tb.name, rows, n, wd), func(t *testing.T) {
					b := tb.b
					x := randVec(rng, rows*n, 2)
					z := randVec(rng, rows*n, 2)
					w := tensor.FromFloat32("w", wd, []int{n}, randVec(rng, n, 0.2))
					wv := f64s(w.Float32s())
					rms := func(r int) float64 {
						var s float64
						for _, v := range x[r*n : (r+1)*n] {
							s += float64(v) * float64(v)
						}
						return 1 / math.Sqrt(s/float64(n)+eps)
					}
					for _, shift := range []float32{0, 1} {
						want := make([]float64, rows*n)
						for r := range rows {
							s := rms(r)
							for c := range n {
								want[r*n+c] = float64(x[r*n+c]) * s * (float64(shift) + wv[c])
							}
						}
						out := b.Alloc(rows * n)
						b.RMSNorm(out, upload(b, x), w, rows, n, eps, shift)
						checkClose(t, "RMSNorm", download(t, b, out), want, 1e-5)
						inPlace := upload(b, x)
						b.RMSNorm(inPlace, inPlace, w, rows, n, eps, shift)
						checkClose(t, "RMSNorm in place", download(t, b, inPlace), want, 1e-5)
					}
					want := make([]float64, rows*n)
					for r := range rows {
						s := rms(r)
						for c := range n {
							want[r*n+c] = wv[c] * float64(x[r*n+c]) * s * silu64(float64(z[r*n+c]))
						}
					}
					out := b.Alloc(rows * n)
					b.GatedRMSNorm(out, upload(b, x), upload(b, z), w, rows, n, eps)
					checkClose(t, "GatedRMSNorm", download(t, b, out), want, 1e-5)
					inPlace := upload(b, x)
					b.GatedRMSNorm(inPlace, inPlace, upload(b, z), w, rows, n, eps)
					checkClose(t, "GatedRMSNorm in place", download(t, b, inPlace), want, 1e-5)
				})
			}
		}
	}
}

func TestRoPE(t *testing.T) {
	rng := newRNG(t)
	for _, tb := range backends(t) {
		for _, c := range []struct {
			heads, hd, rd int
			theta         float32
			pos           []int32
		}{
			{1, 2, 2, 10000, []int32{0}},
			{2, 256, 64, 1e7, []int32{0, 1, 2, 3, 4, 100, 4095, 31337, 200000, 262143}},
			{3, 10, 6, 500, []int32{7, 5, 0}},
			// Right-padded rows repeat positions: the table path.
			{4, 32, 8, 1e7, []int32{52, 53, 54, 55, 56, 57, 52, 53, 54, 55, 56, 57, 60, 61, 62, 52}},
		} {
			t.Run(fmt.Sprintf("%s/%d,%d,%d", tb.name, c.heads, c.hd, c.rd), func(t *testing.T) {
				b := tb.b
				x := randVec(rng, len(c.pos)*c.heads*c.hd, 1)
				// Reference straight from the spec: inv_freq and the angle in
				// float32 (PyTorch), the rotation in float64.
				half := c.rd / 2
				want := f64s(x)
				for ti, p := range c.pos {
					for h := range c.heads {
						v := want[(ti*c.heads+h)*c.hd:]
						for i := range half {
							e := float32(2*i) / float32(c.rd)
							inv := 1 / float32(math.Pow(float64(c.theta), float64(e)))
							ang := float64(float32(p) * inv)
							x1, x2 := v[i], v[i+half]
							v[i] = x1*math.Cos(ang) - x2*math.Sin(ang)
							v[i+half] = x2*math.Cos(ang) + x1*math.Sin(ang)
						}
					}
				}
				xt := upload(b, x)
				b.RoPE(xt, c.pos, c.heads, c.hd, c.rd, c.theta)
				checkClose(t, "RoPE", download(t, b, xt), want, 2e-6)
			})
		}
	}
}

func TestCopyReadWrite(t *testing.T) {
	rng := newRNG(t)
	for _, tb := range backends(t) {
		b := tb.b
		src := randVec(rng, 5*9, 1)
		st := upload(b, src)
		dst := upload(b, make([]float32, 4*11))
		b.Copy(dst, 2, 11, st, 1, 9, 3, 7)
		got := download(t, b, dst)
		for i := range 4 * 11 {
			r, c := (i-2)/11, (i-2)%11
			want := float32(0)
			if i >= 2 && r < 3 && c < 7 {
				want = src[1+r*9+c]
			}
			if got[i] != want {
				t.Fatalf("%s: Copy element %d = %g, want %g", tb.name, i, got[i], want)
			}
		}
		part := make([]float32, 3)
		if err := b.Read(t.Context(), st, 4, part); err != nil || part[0] != src[4] || part[2] != src[6] {
			t.Fatalf("%s: Read = %v, %v", tb.name, part, err)
		}
		if err := b.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st.Len() != 45 {
			t.Fatalf("Len = %d", st.Len())
		}
		b.Free(st)
	}
}

// TestSumSq checks the vectorised sum of squares against a scalar float64
// sum at lengths around the 8-wide blocks.
func TestSumSq(t *testing.T) {
	rng := newRNG(t)
	for n := range 41 {
		x := randVec(rng, n, 3)
		var want float64
		for _, v := range x {
			want += float64(v) * float64(v)
		}
		if got := sumSq(x); math.Abs(got-want) > 1e-12*max(want, 1) {
			t.Errorf("n=%d: sumSq = %.17g, want %.17g", n, got, want)
		}
	}
}
