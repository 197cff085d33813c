package cpu

import (
	"math"

	"github.com/startlux/startlux/tensor"
)

// attnBlock is the number of queries handled together: a block of queries
// only scores the keys up to its last position, so causal attention does
// about half the work of the full square.
const attnBlock = 64

// Attention computes causal grouped-query attention for each row and query
// head: scores against the row's prefix keys and its own keys up to the
// query's position, scaled, a float32 softmax, and the weighted sum of
// values. Each (row, head, block of queries) is one task; the scores and the
// weighted sums go through sgemm.
func (b *Backend) Attention(out, q, k, v tensor.Tensor, a tensor.AttnArgs) {
	hd := a.HeadDim
	group := a.Heads / a.KVHeads
	qs, ks := a.Heads*hd, a.KVHeads*hd // token strides
	qd, kd, vd, od := data(q), data(k), data(v), data(out)
	blocks := (a.T + attnBlock - 1) / attnBlock
	b.parallel(a.B*a.Heads*blocks, func(task int) {
		// Last blocks (the most keys) first, for balance.
		blk := blocks - 1 - task%blocks
		row, h := task/blocks/a.Heads, task/blocks%a.Heads
		kvh := h / group
		var pk, pv []float32
		p := 0
		if a.Prefix != nil && a.Prefix[row].Len > 0 {
			p = a.Prefix[row].Len
			pk, pv = data(a.Prefix[row].K), data(a.Prefix[row].V)
		}
		i0 := blk * attnBlock
		i1 := min(a.T, i0+attnBlock)
		nq := i1 - i0
		nk := p + i1 // keys of the block's last query
		s := b.getScratch(nq * nk)
		sc := s.d
		q0 := (row*a.T+i0)*qs + h*hd
		k0 := row*a.T*ks + kvh*hd
		// Scores: sc[i, 0:p] against the prefix, sc[i, p:p+i1] against the row.
		if p > 0 {
			b.sgemm(false, true, nq, p, hd, a.Scale, qd[q0:], qs, pk[kvh*hd:], ks, 0, sc, nk)
		}
		b.sgemm(false, true, nq, i1, hd, a.Scale, qd[q0:], qs, kd[k0:], ks, 0, sc[p:], nk)
		for i := range nq {
			softmaxPrefix(sc[i*nk:(i+1)*nk], p+i0+i+1)
		}
		if p > 0 {
			b.sgemm(false, false, nq, hd, p, 1, sc, nk, pv[kvh*hd:], ks, 0, od[q0:], qs)
			b.sgemm(false, false, nq, hd, i1, 1, sc[p:], nk, vd[k0:], ks, 1, od[q0:], qs)
		} else {
			b.sgemm(false, false, nq, hd, i1, 1, sc, nk, vd[k0:], ks, 0, od[q0:], qs)
		}
		b.putScratch(s)
	})
}

// softmaxPrefix replaces s[:n] with its softmax and zeroes s[n:].
func softmaxPrefix(s []float32, n int) {
	x := s[:n]
	m := float32(math.Inf(-1))
	i := 0
	if haveKernel && n >= 8 {
		i = n &^ 7
		m = maxAVX2(&x[0], i)
	}
	for _, v := range x[i:] {
		m = max(m, v)
	}
	var sum float32
	i = 0
	if haveKernel && n >= 8 {
		i = n &^ 7
		var lanes [8]float32
		expSubSumAVX2(&x[0], &x[0], i, m, &lanes)
		sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))
	}
	for j := i; j < n; j++ {
		e := expFlush(x[j] - m)
		x[j] = e
		sum += e
	}
	scaleVec(x, x, 1/sum)
	clear(s[n:])
}
