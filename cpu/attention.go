package cpu

import (
	"math"
	"slices"

	"github.com/startlux/startlux/tensor"
)

// attnBlock is the number of queries handled together: a block of queries
// only scores the keys up to its last position, so causal attention does
// about half the work of the full square.
const attnBlock = 64

// Attention computes causal grouped-query attention for each row and query
// head: scores against the row's prefix keys and its own keys up to the
// query's position, scaled, a float32 softmax, and the weighted sum of
// values.
//
// A long prefix (more than b.foldPrefix positions) runs first
// (attendPrefix): the queries of all rows that share one prefix, and of all
// query heads that share one kv head, are multiplied against it together,
// in chunks of prefixChunk queries, leaving in out the unnormalised sum over
// the prefix with its score maximum and exponential sum. The rows' own keys
// then run per (row, kv head, block of queries), the block's queries of the
// kv head's query heads stacked into one matrix that only scores the keys up
// to the block's last position (attendOwn), and are merged with the prefix
// part by rescaling both to the larger maximum. A short prefix (a preamble)
// instead joins its row's blocks (attendFolded): each stacked query scores
// the prefix keys and its own keys into one score row and takes one
// softmax, which costs less than gathering its queries and merging. The
// scores and the weighted sums go through sgemm.
// Queries at padding positions (a.Len) are skipped and get zeros.
func (b *Backend) Attention(out, q, k, v tensor.Tensor, a tensor.AttnArgs) {
	hd := a.HeadDim
	qs := a.Heads * hd // token stride of q and out
	qd, kd, vd, od := data(q), data(k), data(v), data(out)
	var pm, pl []float32 // per (token, head): prefix score maximum and exponential sum
	if b.hasLongPrefix(a) {
		ps := b.getScratch(2 * a.B * a.T * a.Heads)
		defer b.putScratch(ps)
		pm, pl = ps.d[:a.B*a.T*a.Heads], ps.d[a.B*a.T*a.Heads:]
		b.attendPrefix(od, qd, pm, pl, a)
	}
	g := a.Heads / a.KVHeads
	blocks := (a.T + attnBlock - 1) / attnBlock
	b.parallel(a.B*a.KVHeads*blocks, func(task int) {
		// Last blocks (the most keys) first, for balance.
		blk := blocks - 1 - task%blocks
		row, kvh := task/blocks/a.KVHeads, task/blocks%a.KVHeads
		var p int // prefix positions
		if a.Prefix != nil {
			p = a.Prefix[row].Len
		}
		i0 := blk * attnBlock
		end := min(a.T, i0+attnBlock)
		i1 := min(end, a.RowLen(row))
		// Queries at padding positions get zeros.
		q0 := (row*a.T+i0)*qs + kvh*g*hd
		for i := max(i0, i1); i < end; i++ {
			clear(od[q0+(i-i0)*qs:][:g*hd])
		}
		if i1 <= i0 {
			return
		}
		if p > 0 && p <= b.foldPrefix {
			b.attendFolded(od, qd, kd, vd, a, row, kvh, i0, i1)
			return
		}
		b.attendOwn(od, qd, kd, vd, pm, pl, a, row, kvh, i0, i1)
	})
}

// attendOwn computes the attention of queries [i0, i1) of row for the query
// heads of kv head kvh against the row's own keys up to each query's
// position, the queries stacked as in attendFolded. A row with a long
// prefix is merged with the prefix part attendPrefix left in od (with its
// score maxima pm and exponential sums pl): both are rescaled to the larger
// maximum, then normalised.
func (b *Backend) attendOwn(od, qd, kd, vd, pm, pl []float32, a tensor.AttnArgs, row, kvh, i0, i1 int) {
	hd, g := a.HeadDim, a.Heads/a.KVHeads
	qs, ks := a.Heads*hd, a.KVHeads*hd
	nq := i1 - i0
	m, w := nq*g, g*hd // stacked queries; floats of one position's group
	nk := i1           // keys of the block's last query
	s := b.getScratch(m*nk + 2*m*hd + m)
	defer b.putScratch(s)
	d := s.d
	sc, qc, oc, den := d[:m*nk], d[m*nk:m*nk+m*hd], d[m*nk+m*hd:m*nk+2*m*hd], d[m*nk+2*m*hd:]
	q0 := (row*a.T+i0)*qs + kvh*w
	copyRows(qc, w, qd[q0:], qs, nq, w)
	k0 := row*a.T*ks + kvh*hd
	b.sgemm(false, true, m, i1, hd, a.Scale, qc, hd, kd[k0:], ks, 0, sc, nk)
	if a.Prefix == nil || a.Prefix[row].Len == 0 {
		for j := range m {
			softmaxPrefix(sc[j*nk:(j+1)*nk], i0+j/g+1)
		}
		b.sgemm(false, false, m, hd, i1, 1, sc, nk, vd[k0:], ks, 0, oc, hd)
		copyRows(od[q0:], qs, oc, w, nq, w)
		return
	}
	// od holds the prefix's Σ e^(s−m1)·v; rescale it and the sums to
	// m = max(m1, m2), add the own keys' part, then normalise.
	copyRows(oc, w, od[q0:], qs, nq, w)
	for j := range m {
		n := i0 + j/g + 1
		x := sc[j*nk : j*nk+n]
		qi := (row*a.T+i0+j/g)*a.Heads + kvh*g + j%g
		mx := max(pm[qi], rowMax(x))
		l2 := expSubSum(x, mx)
		c1 := expFlush(pm[qi] - mx)
		clear(sc[j*nk+n : (j+1)*nk])
		o := oc[j*hd : (j+1)*hd]
		scaleVec(o, o, c1)
		den[j] = pl[qi]*c1 + l2
	}
	b.sgemm(false, false, m, hd, i1, 1, sc, nk, vd[k0:], ks, 1, oc, hd)
	for j := range m {
		o := oc[j*hd : (j+1)*hd]
		scaleVec(o, o, 1/den[j])
	}
	copyRows(od[q0:], qs, oc, w, nq, w)
}

// copyRows copies rows rows of width floats from src (rows srcStride apart)
// to dst (rows dstStride apart).
func copyRows(dst []float32, dstStride int, src []float32, srcStride, rows, width int) {
	for r := range rows {
		copy(dst[r*dstStride:r*dstStride+width], src[r*srcStride:r*srcStride+width])
	}
}

// prefixChunk is the number of queries multiplied against a prefix at a
// time.
const prefixChunk = 128

// foldPrefix is the longest prefix whose keys join each block of its row's
// queries instead of running first for all rows that share it.
const foldPrefix = 256

// attendFolded computes the attention of queries [i0, i1) of row for the
// query heads of kv head kvh, whose prefix is short. The queries of those
// heads, which sit side by side in q, form one matrix, position by
// position; each of its rows scores the prefix keys and the row's own keys
// up to its position into one row of the score matrix, [prefix | own], with
// one softmax and two products with the values.
func (b *Backend) attendFolded(od, qd, kd, vd []float32, a tensor.AttnArgs, row, kvh, i0, i1 int) {
	hd, g := a.HeadDim, a.Heads/a.KVHeads
	qs, ks := a.Heads*hd, a.KVHeads*hd
	kv := a.Prefix[row]
	p, nq := kv.Len, i1-i0
	m, w := nq*g, g*hd // stacked queries; floats of one position's group
	nk := p + i1
	s := b.getScratch(m*nk + 2*m*hd)
	defer b.putScratch(s)
	sc, qc, oc := s.d[:m*nk], s.d[m*nk:m*nk+m*hd], s.d[m*nk+m*hd:]
	q0 := (row*a.T+i0)*qs + kvh*w
	copyRows(qc, w, qd[q0:], qs, nq, w)
	k0 := row*a.T*ks + kvh*hd
	pk, pv := data(kv.K)[kvh*hd:], data(kv.V)[kvh*hd:]
	b.sgemm(false, true, m, p, hd, a.Scale, qc, hd, pk, ks, 0, sc, nk)
	b.sgemm(false, true, m, i1, hd, a.Scale, qc, hd, kd[k0:], ks, 0, sc[p:], nk)
	for j := range m {
		softmaxPrefix(sc[j*nk:(j+1)*nk], p+i0+j/g+1)
	}
	b.sgemm(false, false, m, hd, p, 1, sc, nk, pv, ks, 0, oc, hd)
	b.sgemm(false, false, m, hd, i1, 1, sc[p:], nk, vd[k0:], ks, 1, oc, hd)
	copyRows(od[q0:], qs, oc, w, nq, w)
}

// hasLongPrefix reports whether some row of a has more than b.foldPrefix
// prefix positions.
func (b *Backend) hasLongPrefix(a tensor.AttnArgs) bool {
	for _, p := range a.Prefix {
		if p.Len > b.foldPrefix {
			return true
		}
	}
	return false
}

// attendPrefix computes, for every query of a row with a prefix, the
// prefix part of its attention: with s the scaled scores against the prefix
// keys, it writes m1 = max s to pm, l1 = Σ e^(s−m1) to pl (both at index
// token·Heads + head) and Σ e^(s−m1)·v to the query's place in od. The
// queries of the rows sharing one prefix entry and of the query heads of one
// kv head form one matrix, [rows, real positions, heads of the group] in
// that order, taken prefixChunk queries at a time.
func (b *Backend) attendPrefix(od, qd, pm, pl []float32, a tensor.AttnArgs) {
	hd, group := a.HeadDim, a.Heads/a.KVHeads
	ks := a.KVHeads * hd
	type key struct {
		k   tensor.Tensor
		len int
	}
	var groups [][]int // rows of each distinct prefix
	index := map[key]int{}
	for row, p := range a.Prefix {
		if p.Len <= b.foldPrefix {
			continue
		}
		kk := key{p.K, p.Len}
		g, ok := index[kk]
		if !ok {
			g = len(groups)
			index[kk] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], row)
	}
	type task struct{ g, kvh, c0, c1 int }
	var tasks []task
	// places[g][j] is where query j of group g's matrix sits in q and od
	// (in heads, less the kv head's first head): the real positions of the
	// group's rows, each with the query heads of one kv head.
	places := make([][]int, len(groups))
	for g, rows := range groups {
		for _, row := range rows {
			for t := range a.RowLen(row) {
				for r := range group {
					places[g] = append(places[g], (row*a.T+t)*a.Heads+r)
				}
			}
		}
		m := len(places[g])
		if m == 0 {
			continue
		}
		chunks := (m + prefixChunk - 1) / prefixChunk
		step := (m + chunks - 1) / chunks
		for kvh := range a.KVHeads {
			for c0 := 0; c0 < m; c0 += step {
				tasks = append(tasks, task{g, kvh, c0, min(m, c0+step)})
			}
		}
	}
	// Longest prefixes first, for balance.
	slices.SortStableFunc(tasks, func(x, y task) int {
		return a.Prefix[groups[y.g][0]].Len - a.Prefix[groups[x.g][0]].Len
	})
	b.parallel(len(tasks), func(ti int) {
		t := tasks[ti]
		rows := groups[t.g]
		kv := a.Prefix[rows[0]]
		p, mc := kv.Len, t.c1-t.c0
		pk, pv := data(kv.K)[t.kvh*hd:], data(kv.V)[t.kvh*hd:]
		s := b.getScratch(mc * (2*hd + p))
		qc, oc, sc := s.d[:mc*hd], s.d[mc*hd:2*mc*hd], s.d[2*mc*hd:]
		place := func(j int) int { return places[t.g][j] + t.kvh*group }
		for j := t.c0; j < t.c1; j++ {
			copy(qc[(j-t.c0)*hd:(j-t.c0+1)*hd], qd[place(j)*hd:])
		}
		b.sgemm(false, true, mc, p, hd, a.Scale, qc, hd, pk, ks, 0, sc, p)
		for i := range mc {
			x := sc[i*p : (i+1)*p]
			qi := place(t.c0 + i)
			pm[qi] = rowMax(x)
			pl[qi] = expSubSum(x, pm[qi])
		}
		b.sgemm(false, false, mc, hd, p, 1, sc, p, pv, ks, 0, oc, hd)
		for i := range mc {
			copy(od[place(t.c0+i)*hd:][:hd], oc[i*hd:(i+1)*hd])
		}
		b.putScratch(s)
	})
}

// rowMax returns the largest of x (at least one element). A NaN may be
// skipped (it reaches the softmax through its exp all the same).
func rowMax(x []float32) float32 {
	m := float32(math.Inf(-1))
	i := 0
	if haveAVX512 && len(x) >= 16 {
		i = len(x) &^ 15
		m = maxAVX512(&x[0], i)
	}
	if haveKernel && len(x)-i >= 8 {
		n := (len(x) - i) &^ 7
		if v := maxAVX2(&x[i], n); v > m {
			m = v
		}
		i += n
	}
	for _, v := range x[i:] {
		if v > m {
			m = v
		}
	}
	return m
}

// expSubSum replaces x[i] with expFlush(x[i] − m) and returns their sum.
func expSubSum(x []float32, m float32) float32 {
	var sum float32
	i := 0
	if haveAVX512 && len(x) >= 16 {
		i = len(x) &^ 15
		var l [16]float32
		expSubSumAVX512(&x[0], &x[0], i, m, &l)
		sum = (((l[0] + l[8]) + (l[1] + l[9])) + ((l[2] + l[10]) + (l[3] + l[11]))) +
			(((l[4] + l[12]) + (l[5] + l[13])) + ((l[6] + l[14]) + (l[7] + l[15])))
	}
	if haveKernel && len(x)-i >= 8 {
		n := (len(x) - i) &^ 7
		var l [8]float32
		expSubSumAVX2(&x[i], &x[i], n, m, &l)
		sum += ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]))
		i += n
	}
	// The scalar loop (all of x where there are no vector loops) sums in
	// float64: a float32 running sum over a long row drifts by about
	// 1e-6 relative.
	var tail float64
	for j := i; j < len(x); j++ {
		e := expFlush(x[j] - m)
		x[j] = e
		tail += float64(e)
	}
	return sum + float32(tail)
}

// softmaxPrefix replaces s[:n] with its softmax and zeroes s[n:].
func softmaxPrefix(s []float32, n int) {
	x := s[:n]
	sum := expSubSum(x, rowMax(x))
	scaleVec(x, x, 1/sum)
	clear(s[n:])
}
