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
	zeros := make([]float32, d)
	b.parallelRange(a.B*a.T, max(1, elemGrain/max(d*kw, 1)), func(lo, hi int) {
		ins := make([][]float32, kw)
		for tok := lo; tok < hi; tok++ {
			r, t := tok/a.T, tok%a.T
			for j := range kw {
				if ins[j] = input(r, t-(kw-1)+j); ins[j] == nil {
					ins[j] = zeros
				}
			}
			o := od[tok*d : (tok+1)*d]
			if kw == 4 {
				conv4(o, wt, ins[0], ins[1], ins[2], ins[3])
				continue
			}
			clear(o)
			for j, in := range ins {
				wj := wt[j*d : (j+1)*d]
				in = in[:len(o)]
				for c := range o {
					o[c] += wj[c] * in[c]
				}
			}
			siluVec(o, o)
		}
	})
	for r, ns := range newStates {
		if ns != nil {
			copy(data(a.NewState[r]), ns)
		}
	}
}

// conv4 computes o[c] = silu(Σ_j w[j·D + c]·x_j[c]) for the common K = 4,
// summing the taps in order as the general loop does.
func conv4(o, w, x0, x1, x2, x3 []float32) {
	n := len(o)
	w0, w1, w2, w3 := w[:n], w[n:2*n], w[2*n:3*n], w[3*n:4*n]
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	c0 := 0
	if haveKernel && n >= 8 {
		c0 = n &^ 7
		conv4AVX2(&o[0], &w0[0], &w1[0], &w2[0], &w3[0], &x0[0], &x1[0], &x2[0], &x3[0], c0)
	}
	for c := c0; c < n; c++ {
		v := w0[c]*x0[c] + w1[c]*x1[c]
		v += w2[c] * x2[c]
		v += w3[c] * x3[c]
		o[c] = v
	}
	siluVec(o, o)
}
