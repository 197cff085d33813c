package cpu

import (
	"math"

	"github.com/startlux/startlux/tensor"
)

// Attention computes causal grouped-query attention for each row and query
// head: scores against the row's prefix keys and its own keys up to the
// query's position, scaled, a float32 softmax, and the weighted sum of
// values. Each (row, head) pair is one task; the score matrix and both
// products go through sgemm.
func (b *Backend) Attention(out, q, k, v tensor.Tensor, a tensor.AttnArgs) {
	hd := a.HeadDim
	group := a.Heads / a.KVHeads
	qs, ks := a.Heads*hd, a.KVHeads*hd // token strides
	qd, kd, vd, od := data(q), data(k), data(v), data(out)
	b.parallel(a.B*a.Heads, func(task int) {
		row, h := task/a.Heads, task%a.Heads
		kvh := h / group
		var pk, pv []float32
		p := 0
		if a.Prefix != nil && a.Prefix[row].Len > 0 {
			p = a.Prefix[row].Len
			pk, pv = data(a.Prefix[row].K), data(a.Prefix[row].V)
		}
		t := a.T
		nk := p + t // keys of the last query
		s := b.getScratch(t * nk)
		sc := s.d
		q0 := row*t*qs + h*hd
		k0 := row*t*ks + kvh*hd
		// Scores: sc[i, 0:p] against the prefix, sc[i, p:p+t] against the row.
		if p > 0 {
			b.sgemm(false, true, t, p, hd, a.Scale, qd[q0:], qs, pk[kvh*hd:], ks, 0, sc, nk)
		}
		b.sgemm(false, true, t, t, hd, a.Scale, qd[q0:], qs, kd[k0:], ks, 0, sc[p:], nk)
		for i := range t {
			softmaxPrefix(sc[i*nk:(i+1)*nk], p+i+1)
		}
		o0 := row*t*qs + h*hd
		if p > 0 {
			b.sgemm(false, false, t, hd, p, 1, sc, nk, pv[kvh*hd:], ks, 0, od[o0:], qs)
			b.sgemm(false, false, t, hd, t, 1, sc[p:], nk, vd[k0:], ks, 1, od[o0:], qs)
		} else {
			b.sgemm(false, false, t, hd, t, 1, sc, nk, vd[k0:], ks, 0, od[o0:], qs)
		}
		b.putScratch(s)
	})
}

// softmaxPrefix replaces s[:n] with its softmax and zeroes s[n:].
func softmaxPrefix(s []float32, n int) {
	m := float32(math.Inf(-1))
	for _, v := range s[:n] {
		m = max(m, v)
	}
	var sum float32
	for i, v := range s[:n] {
		e := float32(math.Exp(float64(v - m)))
		s[i] = e
		sum += e
	}
	inv := 1 / sum
	for i := range s[:n] {
		s[i] *= inv
	}
	clear(s[n:])
}
