package cpu

import (
	"fmt"
	"testing"

	"github.com/startlux/startlux/tensor"
)

func TestCausalConv(t *testing.T) {
	rng := newRNG(t)
	for _, tb := range backends(t) {
		for _, c := range []struct {
			b, t, d, k int
			state      bool
			lens       []int // nil: no NewState
		}{
			{1, 1, 1, 4, false, nil},
			{1, 1, 5, 4, true, []int{1}},    // Len < K−1: reaches into State
			{2, 2, 7, 4, true, []int{0, 2}}, // Len 0: State itself
			{2, 9, 33, 4, false, []int{9, 3}},
			{3, 65, 70, 4, true, []int{65, 64, 3}},
			{1, 130, 6, 2, true, []int{129}},
			{2, 6, 5, 1, true, []int{6, 2}}, // K = 1: empty state
		} {
			t.Run(fmt.Sprintf("%s/B%d,T%d,D%d,K%d,state=%v,len=%v", tb.name, c.b, c.t, c.d, c.k, c.state, c.lens), func(t *testing.T) {
				b := tb.b
				n := c.b * c.t
				x := randVec(rng, n*c.d, 1)
				w := tensor.FromFloat32("conv", tensor.BF16, []int{c.d, 1, c.k}, randVec(rng, c.d*c.k, 0.5))
				wv := w.Float32s()
				args := tensor.ConvArgs{B: c.b, T: c.t, D: c.d, K: c.k}
				states := make([][]float32, c.b)
				if c.state {
					args.State = make([]tensor.Tensor, c.b)
					for r := range c.b {
						if r == 1 {
							continue // nil entry: zeros
						}
						states[r] = randVec(rng, (c.k-1)*c.d, 1)
						args.State[r] = upload(b, states[r])
					}
				}
				// X(r, s): input of row r at position s, s < 0 from the state.
				X := func(r, s, ch int) float64 {
					if s >= 0 {
						return float64(x[(r*c.t+s)*c.d+ch])
					}
					if states[r] == nil {
						return 0
					}
					return float64(states[r][(c.k-1+s)*c.d+ch])
				}
				want := make([]float64, n*c.d)
				for r := range c.b {
					for s := range c.t {
						for ch := range c.d {
							var acc float64
							for j := range c.k {
								acc += float64(wv[ch*c.k+j]) * X(r, s-(c.k-1)+j, ch)
							}
							want[(r*c.t+s)*c.d+ch] = silu64(acc)
						}
					}
				}
				if c.lens != nil {
					args.Len = c.lens
					args.NewState = make([]tensor.Tensor, c.b)
					for r := range c.b {
						switch {
						case r == 2:
							// leave nil: skipped
						case c.state && r == 0:
							args.NewState[r] = args.State[r] // resume in place
						default:
							args.NewState[r] = upload(b, randVec(rng, (c.k-1)*c.d, 1))
						}
					}
				}
				out := b.Alloc(n * c.d)
				b.CausalConv(out, upload(b, x), w, args)
				checkClose(t, "CausalConv", download(t, b, out), want, 1e-5)
				for r := range args.NewState {
					if args.NewState[r] == nil {
						continue
					}
					got := download(t, b, args.NewState[r])
					for j := range c.k - 1 {
						for ch := range c.d {
							wantv := X(r, c.lens[r]-(c.k-1)+j, ch)
							if float64(got[j*c.d+ch]) != wantv {
								t.Fatalf("NewState[%d][%d,%d] = %g, want %g", r, j, ch, got[j*c.d+ch], wantv)
							}
						}
					}
				}
			})
		}
	}
}
