package cpu

import "github.com/startlux/startlux/tensor"

// CausalConv computes the depthwise causal conv of each row over its K−1
// state inputs and its own positions, then SiLU; and writes each NewState
// entry (see tensor.ConvArgs).
func (b *Backend) CausalConv(out, x tensor.Tensor, w *tensor.Weight, a tensor.ConvArgs) {
	d, kw := a.D, a.K
	wv := vec(w)[:d*kw]
	// Taps transposed to [K, D] so the inner loop runs along channels.
	wt := make([]float32, kw*d)
	for c := range d {
		for j := range kw {
			wt[j*d+c] = wv[c*kw+j]
		}
	}
	xd, od := data(x), data(out)
	// input returns the D inputs of row r at position s (s < 0: the state,
	// nil for zeros).
	input := func(r, s int) []float32 {
		if s >= 0 {
			return xd[(r*a.T+s)*d : (r*a.T+s+1)*d]
		}
		if a.State == nil || a.State[r] == nil {
			return nil
		}
		i := kw - 1 + s
		return data(a.State[r])[i*d : (i+1)*d]
	}
	// New states first, into fresh memory: an entry may be the tensor that
	// State reads.
	var newStates [][]float32
	if a.NewState != nil {
		newStates = make([][]float32, a.B)
		for r := range a.B {
			if a.NewState[r] == nil {
				continue
			}
			ns := make([]float32, (kw-1)*d)
			for j := range kw - 1 {
				if in := input(r, a.Len[r]-(kw-1)+j); in != nil {
					copy(ns[j*d:(j+1)*d], in)
				}
			}
			newStates[r] = ns
		}
	}
	b.parallelRange(a.B*a.T, max(1, elemGrain/max(d*kw, 1)), func(lo, hi int) {
		for tok := lo; tok < hi; tok++ {
			r, t := tok/a.T, tok%a.T
			o := od[tok*d : (tok+1)*d]
			clear(o)
			for j := range kw {
				in := input(r, t-(kw-1)+j)
				if in == nil {
					continue
				}
				wj := wt[j*d : (j+1)*d]
				for c := range o {
					o[c] += wj[c] * in[c]
				}
			}
			for c, v := range o {
				o[c] = silu(v)
			}
		}
	})
	for r, ns := range newStates {
		if ns != nil {
			copy(data(a.NewState[r]), ns)
		}
	}
}
