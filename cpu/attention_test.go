package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/startlux/startlux/tensor"
)

func TestAttention(t *testing.T) {
	rng := newRNG(t)
	for _, tb := range backends(t) {
		for _, c := range []struct {
			b, t, heads, kvh, hd int
			prefix               []int // per row; nil: no prefix
			lens                 []int // per row: real positions (AttnArgs.Len); nil: all
		}{
			{1, 1, 1, 1, 1, nil, nil},
			{1, 1, 2, 1, 8, []int{5}, nil},
			{2, 5, 4, 2, 16, nil, nil},
			{3, 65, 8, 2, 32, []int{0, 7, 7}, nil}, // rows 1 and 2 share one prefix
			{2, 63, 6, 3, 20, []int{64, 1}, nil},
			{1, 130, 2, 2, 64, nil, nil},
			// Prefix queries in several chunks: rows 0-2 share one prefix
			// (3·40·2 queries per kv head), row 4 has its own.
			{5, 40, 4, 2, 32, []int{300, 300, 300, 0, 9}, nil},
			{1, 130, 4, 2, 16, []int{3}, nil},
			// Padded rows: the queries past each row's length get zeros,
			// in the prefix part's matrix and in the own-keys blocks.
			{4, 70, 4, 2, 16, []int{90, 90, 0, 90}, []int{70, 1, 65, 30}},
			{3, 130, 2, 1, 8, nil, []int{64, 130, 129}},
			{5, 40, 4, 2, 32, []int{300, 300, 300, 0, 9}, []int{40, 33, 0, 7, 39}},
		} {
			// Prefixes up to fold join their rows' blocks; longer ones
			// run first, for all rows that share them.
			for _, fold := range []int{0, 8, foldPrefix} {
				t.Run(fmt.Sprintf("%s/B%d,T%d,H%d/%d,hd%d,prefix%v,len%v,fold%d", tb.name, c.b, c.t, c.heads, c.kvh, c.hd, c.prefix, c.lens, fold), func(t *testing.T) {
					b := tb.b
					b.foldPrefix = fold
					defer func() { b.foldPrefix = foldPrefix }()
					n := c.b * c.t
					q := randVec(rng, n*c.heads*c.hd, 1)
					k := randVec(rng, n*c.kvh*c.hd, 1)
					v := randVec(rng, n*c.kvh*c.hd, 1)
					scale := float32(1 / math.Sqrt(float64(c.hd)))
					args := tensor.AttnArgs{B: c.b, T: c.t, Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd, Scale: scale, Len: c.lens}
					var pk, pv [][]float32
					if c.prefix != nil {
						args.Prefix = make([]tensor.KV, c.b)
						pk, pv = make([][]float32, c.b), make([][]float32, c.b)
						for r, l := range c.prefix {
							if r > 0 && l == c.prefix[r-1] { // shared entry
								args.Prefix[r], pk[r], pv[r] = args.Prefix[r-1], pk[r-1], pv[r-1]
								continue
							}
							pk[r] = randVec(rng, l*c.kvh*c.hd, 1)
							pv[r] = randVec(rng, l*c.kvh*c.hd, 1)
							args.Prefix[r] = tensor.KV{K: upload(b, pk[r]), V: upload(b, pv[r]), Len: l}
						}
					}
					want := make([]float64, n*c.heads*c.hd)
					for r := range c.b {
						p := 0
						if c.prefix != nil {
							p = c.prefix[r]
						}
						for h := range c.heads {
							kvh := h / (c.heads / c.kvh)
							key := func(j int) ([]float32, []float32) {
								if j < p {
									o := (j*c.kvh + kvh) * c.hd
									return pk[r][o : o+c.hd], pv[r][o : o+c.hd]
								}
								o := ((r*c.t+j-p)*c.kvh + kvh) * c.hd
								return k[o : o+c.hd], v[o : o+c.hd]
							}
							for i := range c.t {
								if c.lens != nil && i >= c.lens[r] {
									continue // padding: want zeros
								}
								qi := q[((r*c.t+i)*c.heads+h)*c.hd:][:c.hd]
								nk := p + i + 1
								s := make([]float64, nk)
								mx := math.Inf(-1)
								for j := range nk {
									kj, _ := key(j)
									for d := range c.hd {
										s[j] += float64(qi[d]) * float64(kj[d])
									}
									s[j] *= float64(scale)
									mx = max(mx, s[j])
								}
								var sum float64
								for j := range s {
									s[j] = math.Exp(s[j] - mx)
									sum += s[j]
								}
								o := want[((r*c.t+i)*c.heads+h)*c.hd:][:c.hd]
								for j := range nk {
									_, vj := key(j)
									for d := range c.hd {
										o[d] += s[j] / sum * float64(vj[d])
									}
								}
							}
						}
					}
					var before [][]float32
					for r := range pk {
						before = append(before, download(t, b, args.Prefix[r].K))
					}
					out := upload(b, poison(n*c.heads*c.hd))
					b.Attention(out, upload(b, q), upload(b, k), upload(b, v), args)
					checkClose(t, "Attention", download(t, b, out), want, 1e-5)
					for r := range pk {
						got := download(t, b, args.Prefix[r].K)
						for i := range got {
							if got[i] != before[r][i] {
								t.Fatal("Attention wrote to a prefix")
							}
						}
					}
				})
			}
		}
	}
}

// poison returns n NaNs, for outputs that must be written everywhere.
func poison(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return x
}

// TestSoftmaxPrefix checks the vectorised softmax against a float64
// reference at lengths around the 8-wide vector blocks, with the tail past n
// zeroed.
func TestSoftmaxPrefix(t *testing.T) {
	rng := newRNG(t)
	defer func(k, z bool) { haveKernel, haveAVX512 = k, z }(haveKernel, haveAVX512)
	type path struct {
		name        string
		kernel, z16 bool
	}
	paths := []path{{"portable", false, false}}
	if kernelOK {
		paths = append(paths, path{"avx2", true, false})
	}
	if haveAVX512 {
		paths = append(paths, path{"avx512", true, true})
	}
	for _, p := range paths {
		haveKernel, haveAVX512 = p.kernel, p.z16
		for _, c := range []struct{ n, width int }{{1, 1}, {1, 9}, {7, 7}, {8, 8}, {9, 16}, {17, 17}, {31, 33}, {63, 64}, {1568, 1600}} {
			t.Run(fmt.Sprintf("%s/n%d/width%d", p.name, c.n, c.width), func(t *testing.T) {
				s := randVec(rng, c.width, 8)
				s[rng.IntN(c.n)] = 30 // a dominant score
				want := make([]float64, c.width)
				m := math.Inf(-1)
				for _, v := range s[:c.n] {
					m = math.Max(m, float64(v))
				}
				var sum float64
				for i, v := range s[:c.n] {
					want[i] = math.Exp(float64(v) - m)
					sum += want[i]
				}
				for i := range want[:c.n] {
					want[i] /= sum
				}
				softmaxPrefix(s, c.n)
				checkClose(t, "softmax", s, want, 1e-6)
				for i, v := range s[c.n:] {
					if v != 0 {
						t.Fatalf("s[%d] = %g past n, want 0", c.n+i, v)
					}
				}
			})
		}
	}
}
