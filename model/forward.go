package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/startlux/startlux/tensor"
)

// Row is one right-padded row of a batch.
type Row struct {
	Prefix *State  // may be nil; rows may share one, and it is never written
	IDs    []int32 // tokens after the prefix (at least one)
	Gather []int   // indexes into IDs whose final (normed) hidden state is wanted
}

// Prefill runs ids after prefix (nil = empty) and returns the state after them. prefix is not modified.
func (m *Model) Prefill(ctx context.Context, prefix *State, ids []int32) (*State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rows := []Row{{Prefix: prefix, IDs: ids}}
	if err := m.check(rows, nil); err != nil {
		return nil, fmt.Errorf("prefill: %w", err)
	}
	_, st, err := m.pass(ctx, rows, nil, true)
	if err != nil {
		return nil, fmt.Errorf("prefill: %w", err)
	}
	return st, nil
}

// Forward runs all rows as one batch (right-padded to the longest) and returns, per row, the final normed hidden
// states at its Gather positions (len(Gather)*Hidden floats) when head is nil, or their logits against head
// (len(Gather)*head.Rows() floats, only those rows of the LM head multiplied) when head is not nil.
func (m *Model) Forward(ctx context.Context, rows []Row, head *tensor.Weight) ([][]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(rows, head); err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	out, _, err := m.pass(ctx, rows, head, false)
	if err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	return out, nil
}

// check validates a batch before anything is queued.
func (m *Model) check(rows []Row, head *tensor.Weight) error {
	if m.files == nil {
		return errors.New("model is closed")
	}
	if len(rows) == 0 {
		return errors.New("no rows")
	}
	if head != nil && (len(head.Shape) != 2 || head.Cols() != m.Config.Hidden) {
		return fmt.Errorf("head %s has shape %v, want [n %d]", head.Name, head.Shape, m.Config.Hidden)
	}
	for b, r := range rows {
		if len(r.IDs) == 0 {
			return fmt.Errorf("row %d has no tokens", b)
		}
		for t, id := range r.IDs {
			if id < 0 || int(id) >= m.Config.Vocab {
				return fmt.Errorf("row %d token %d: id %d outside the vocabulary of %d", b, t, id, m.Config.Vocab)
			}
		}
		for _, g := range r.Gather {
			if g < 0 || g >= len(r.IDs) {
				return fmt.Errorf("row %d: gather index %d outside its %d tokens", b, g, len(r.IDs))
			}
		}
		if p := r.Prefix; p != nil {
			if p.m != m {
				return fmt.Errorf("row %d: prefix state belongs to another model", b)
			}
			if p.freed {
				return fmt.Errorf("row %d: prefix state was freed", b)
			}
		}
	}
	return nil
}

// scratch allocates a pass's temporary tensors and frees them together.
type scratch struct {
	be   tensor.Backend
	live []tensor.Tensor
}

func (s *scratch) alloc(n int) tensor.Tensor {
	t := s.be.Alloc(n)
	s.live = append(s.live, t)
	return t
}

func (s *scratch) free() {
	for _, t := range s.live {
		s.be.Free(t)
	}
	s.live = nil
}

// batch is one forward pass in flight: its rows, their layout, and the
// scratch tensors its layers share.
type batch struct {
	m       *Model
	be      tensor.Backend
	rows    []Row
	B, T, N int
	lens    []int   // each row's real tokens (before its padding)
	pos     []int32 // absolute position of every token
	prefix  bool    // some row has a prefix state
	keep    *State  // the state being built (Prefill), or nil
	sc      *scratch

	// Four large per-token buffers shared by the roles that never live at
	// the same time (the attention mixer's, the DeltaNet mixer's, the MLP's),
	// and the small ones of each mixer.
	slot       [4]tensor.Tensor
	k, v, a, b tensor.Tensor
	recs       []tensor.Tensor // per-row recurrent scratch (reused across layers unless keeping)
}

// newBatch lays out rows (right-padded to the longest) and allocates the
// shared buffers.
func (m *Model) newBatch(rows []Row, sc *scratch) *batch {
	c := &m.Config
	p := &batch{m: m, be: m.be, rows: rows, B: len(rows), sc: sc}
	p.lens = make([]int, p.B)
	for b, r := range rows {
		p.lens[b] = len(r.IDs)
		p.T = max(p.T, len(r.IDs))
	}
	p.N = p.B * p.T
	p.pos = make([]int32, p.N)
	for b, r := range rows {
		pl := r.Prefix.Len()
		p.prefix = p.prefix || pl > 0
		for t := range p.T {
			p.pos[b*p.T+t] = int32(pl + t)
		}
	}
	I, nhd := c.Intermediate, c.Heads*c.HeadDim
	dval := c.NV * c.DV
	dconv := 2*c.NK*c.DK + dval
	sizes := [4]int{I, I}
	grow := func(vals ...int) {
		for j, v := range vals {
			sizes[j] = max(sizes[j], v)
		}
	}
	for _, l := range m.layers {
		if l.linear {
			grow(dconv, dconv, dval, dval)
		} else {
			grow(2*nhd, nhd, nhd, nhd)
		}
	}
	for j := range p.slot {
		p.slot[j] = sc.alloc(p.N * sizes[j])
	}
	return p
}

// gather copies the rows' Gather positions of src (width floats per token)
// into dst, row after row.
func (p *batch) gather(dst, src tensor.Tensor, width int) {
	gi := 0
	for b, r := range p.rows {
		for _, t := range r.Gather {
			p.be.Copy(dst, gi*width, width, src, (b*p.T+t)*width, width, 1, width)
			gi++
		}
	}
}

// attention runs full-attention layer i (qwen35.md §4) on x, the normed
// residual stream, and returns its activations before the output projection
// and their width per token.
func (p *batch) attention(i int, l *layer, x tensor.Tensor) (tensor.Tensor, int) {
	c, be, N := &p.m.Config, p.be, p.N
	nh, nkv, hd := c.Heads, c.KVHeads, c.HeadDim
	qg, q, gate, att := p.slot[0], p.slot[1], p.slot[2], p.slot[3]
	// q_proj rows are per head [query | gate] (qwen35.md §2.1, §7.8).
	be.MatMul(qg, x, l.q, N)
	be.Copy(q, 0, hd, qg, 0, 2*hd, N*nh, hd)
	be.Copy(gate, 0, hd, qg, hd, 2*hd, N*nh, hd)
	be.RMSNorm(q, q, l.qNorm, N*nh, hd, c.Eps, p.m.normShift)
	be.RoPE(q, p.pos, nh, hd, c.RopeDim, float32(c.RopeTheta))
	k, v := p.keysValues(i, l, x)
	args := tensor.AttnArgs{B: p.B, T: p.T, Heads: nh, KVHeads: nkv, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd))),
		Len: p.lens} // the padding's queries may be skipped
	if p.prefix {
		for _, r := range p.rows {
			var kv tensor.KV
			if s := r.Prefix; s.Len() > 0 {
				kv = tensor.KV{K: s.layers[i].k, V: s.layers[i].v, Len: s.n}
			}
			args.Prefix = append(args.Prefix, kv)
		}
	}
	be.Attention(att, q, k, v, args)
	be.SigmoidMul(att, gate, N*nh*hd)
	return att, nh * hd
}

// keysValues projects full-attention layer i's keys (normed, rotated) and
// values for every token of x, and stores them in the kept state when the
// pass keeps one.
func (p *batch) keysValues(i int, l *layer, x tensor.Tensor) (k, v tensor.Tensor) {
	c, be, N := &p.m.Config, p.be, p.N
	kw := c.KVHeads * c.HeadDim
	if p.k == nil {
		p.k, p.v = p.sc.alloc(N*kw), p.sc.alloc(N*kw)
	}
	k, v = p.k, p.v
	be.MatMul(k, x, l.k, N)
	be.RMSNorm(k, k, l.kNorm, N*c.KVHeads, c.HeadDim, c.Eps, p.m.normShift)
	be.MatMul(v, x, l.v, N)
	be.RoPE(k, p.pos, c.KVHeads, c.HeadDim, c.RopeDim, float32(c.RopeTheta))
	if p.keep != nil {
		p.m.keepKV(&p.keep.layers[i], p.rows[0], i, k, v, N*kw)
	}
	return k, v
}

// attentionGathered runs full-attention layer i like attention, but only
// for the queries at the rows' Gather positions (the G of them, row after
// row): K and V are projected for every token, the queries only where
// gathered, and each gathered query becomes a one-token row of the
// attention whose prefix is its row's prefix followed by the row's own keys
// before it (copied once per row). It returns the G activations before the
// output projection and their width.
func (p *batch) attentionGathered(i int, l *layer, x tensor.Tensor, G int) (tensor.Tensor, int) {
	c, be, sc := &p.m.Config, p.be, p.sc
	nh, nkv, hd := c.Heads, c.KVHeads, c.HeadDim
	kw, qw := nkv*hd, nh*hd
	theta := float32(c.RopeTheta)
	k, v := p.keysValues(i, l, x)
	xg, qg := sc.alloc(G*c.Hidden), sc.alloc(G*2*qw)
	q, gate, att := sc.alloc(G*qw), sc.alloc(G*qw), sc.alloc(G*qw)
	p.gather(xg, x, c.Hidden)
	be.MatMul(qg, xg, l.q, G)
	be.Copy(q, 0, hd, qg, 0, 2*hd, G*nh, hd)
	be.Copy(gate, 0, hd, qg, hd, 2*hd, G*nh, hd)
	be.RMSNorm(q, q, l.qNorm, G*nh, hd, c.Eps, p.m.normShift)
	gpos := make([]int32, 0, G)
	for b, r := range p.rows {
		for _, t := range r.Gather {
			gpos = append(gpos, p.pos[b*p.T+t])
		}
	}
	be.RoPE(q, gpos, nh, hd, c.RopeDim, theta)
	kg, vg := sc.alloc(G*kw), sc.alloc(G*kw)
	p.gather(kg, k, kw)
	p.gather(vg, v, kw)
	args := tensor.AttnArgs{B: G, T: 1, Heads: nh, KVHeads: nkv, HeadDim: hd,
		Scale: float32(1 / math.Sqrt(float64(hd))), Prefix: make([]tensor.KV, 0, G)}
	for b, r := range p.rows {
		if len(r.Gather) == 0 {
			continue
		}
		pl, last := r.Prefix.Len(), slices.Max(r.Gather)
		n := (pl + last) * kw
		var kc, vc tensor.Tensor
		if n > 0 {
			kc, vc = sc.alloc(n), sc.alloc(n)
			if pl > 0 {
				ls := &r.Prefix.layers[i]
				be.Copy(kc, 0, pl*kw, ls.k, 0, pl*kw, 1, pl*kw)
				be.Copy(vc, 0, pl*kw, ls.v, 0, pl*kw, 1, pl*kw)
			}
			if last > 0 {
				be.Copy(kc, pl*kw, last*kw, k, b*p.T*kw, last*kw, 1, last*kw)
				be.Copy(vc, pl*kw, last*kw, v, b*p.T*kw, last*kw, 1, last*kw)
			}
		}
		for _, t := range r.Gather {
			kv := tensor.KV{Len: pl + t}
			if kv.Len > 0 {
				kv.K, kv.V = kc, vc
			}
			args.Prefix = append(args.Prefix, kv)
		}
	}
	be.Attention(att, q, kg, vg, args)
	be.SigmoidMul(att, gate, G*qw)
	return att, qw
}

// deltaNet runs Gated DeltaNet layer i (qwen35.md §5) on x and returns its
// activations before the output projection and their width per token.
func (p *batch) deltaNet(i int, l *layer, x tensor.Tensor) (tensor.Tensor, int) {
	c, be, N := &p.m.Config, p.be, p.N
	o, z := p.deltaState(i, l, x), p.slot[2]
	be.MatMul(z, x, l.z, N)
	be.GatedRMSNorm(o, o, z, l.norm, N*c.NV, c.DV, c.Eps)
	return o, c.NV * c.DV
}

// deltaState runs Gated DeltaNet layer i on x up to the delta rule: it
// updates the rows' conv and recurrent states (the kept state's, when
// keeping) and returns the rule's output before the gated norm.
func (p *batch) deltaState(i int, l *layer, x tensor.Tensor) tensor.Tensor {
	c, be, N := &p.m.Config, p.be, p.N
	dconv := 2*c.NK*c.DK + c.NV*c.DV
	mixed, conv, o := p.slot[0], p.slot[1], p.slot[3]
	if p.a == nil {
		p.a, p.b = p.sc.alloc(N*c.NV), p.sc.alloc(N*c.NV)
	}
	be.MatMul(mixed, x, l.qkv, N)
	be.MatMul(p.b, x, l.b, N)
	be.MatMul(p.a, x, l.a, N)
	cargs := tensor.ConvArgs{B: p.B, T: p.T, D: dconv, K: c.ConvK, Len: p.lens}
	if p.prefix {
		for _, r := range p.rows {
			var t tensor.Tensor
			if s := r.Prefix; s.Len() > 0 {
				t = s.layers[i].conv
			}
			cargs.State = append(cargs.State, t)
		}
	}
	if p.keep != nil {
		p.keep.layers[i].conv = be.Alloc((c.ConvK - 1) * dconv)
		cargs.NewState = []tensor.Tensor{p.keep.layers[i].conv}
	}
	be.CausalConv(conv, mixed, l.conv, cargs)

	// Each row runs on its own copy of its prefix's recurrent state; the
	// stored state is only read. When keeping, the copy becomes the new state.
	if p.keep != nil {
		p.recs = []tensor.Tensor{be.Alloc(c.NV * c.DK * c.DV)}
		p.keep.layers[i].rec = p.recs[0]
	} else if p.recs == nil {
		for range p.rows {
			p.recs = append(p.recs, p.sc.alloc(c.NV*c.DK*c.DV))
		}
	}
	for b, r := range p.rows {
		p.m.initRec(p.recs[b], r.Prefix, i)
	}
	be.GatedDelta(o, conv, p.a, p.b, l.aLog, l.dtBias, tensor.DeltaArgs{
		B: p.B, T: p.T, NK: c.NK, NV: c.NV, DK: c.DK, DV: c.DV, Chunk: deltaChunk, State: p.recs})
	return o
}

// pass runs the graph over rows. With keep (a single unpadded row) it
// returns the state after the row; otherwise the final normed hidden states
// at the rows' Gather positions, or their logits when head is not nil. The
// caller holds m.mu and has checked rows.
func (m *Model) pass(ctx context.Context, rows []Row, head *tensor.Weight, keep bool) (outs [][]float32, st *State, err error) {
	c, be := &m.Config, m.be
	H, I := c.Hidden, c.Intermediate
	G := 0
	for _, r := range rows {
		G += len(r.Gather)
	}
	if !keep && G == 0 {
		outs = make([][]float32, len(rows))
		for b := range outs {
			outs[b] = []float32{}
		}
		return outs, nil, nil
	}
	sc := &scratch{be: be}
	defer sc.free()
	p := m.newBatch(rows, sc)
	N := p.N
	if keep {
		st = &State{m: m, n: rows[0].Prefix.Len() + len(rows[0].IDs), layers: make([]layerState, c.Layers)}
		p.keep = st
		defer func() {
			if err != nil {
				st.freeLocked()
				st = nil
			}
		}()
	}
	ids := make([]int32, N)
	for b, r := range rows {
		copy(ids[b*p.T:], r.IDs)
	}
	h, x, y := sc.alloc(N*H), sc.alloc(N*H), sc.alloc(N*H)
	be.Embed(h, m.embed, ids)

	// Forward needs only the gathered rows after the last mixer; tests that
	// watch every layer's output keep the full path.
	gatherTail := !keep && m.layerHook == nil
	var hg tensor.Tensor
	for i := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		l := &m.layers[i]
		be.RMSNorm(x, h, l.inNorm, N, H, c.Eps, m.normShift)
		var pre tensor.Tensor
		var width int
		proj := l.o
		if keep && i == len(m.layers)-1 && m.layerHook == nil {
			// Keeping a state needs only what the last layer's mixer
			// stores: its keys and values, or its conv and recurrent
			// state; its output is never read.
			if l.linear {
				p.deltaState(i, l, x)
			} else {
				p.keysValues(i, l, x)
			}
			break
		}
		last := gatherTail && i == len(m.layers)-1
		if last && !l.linear {
			// A last attention layer only needs its queries at the
			// gathered positions.
			hg = sc.alloc(G * H)
			p.gather(hg, h, H)
			pg, _ := p.attentionGathered(i, l, x, G)
			m.tail(sc, l, hg, pg, proj, G)
			break
		}
		if l.linear {
			pre, width = p.deltaNet(i, l, x)
			proj = l.out
		} else {
			pre, width = p.attention(i, l, x)
		}
		if last {
			// Everything after the last mixer is row-wise.
			hg = sc.alloc(G * H)
			pg := sc.alloc(G * width)
			p.gather(hg, h, H)
			p.gather(pg, pre, width)
			m.tail(sc, l, hg, pg, proj, G)
			break
		}
		be.MatMul(y, pre, proj, N)
		be.Add(h, y, N*H)
		g, u := p.slot[0], p.slot[1]
		be.RMSNorm(x, h, l.postNorm, N, H, c.Eps, m.normShift)
		be.MatMul(g, x, l.gate, N)
		be.MatMul(u, x, l.up, N)
		be.SwiGLU(g, g, u, N*I)
		be.MatMul(y, g, l.down, N)
		be.Add(h, y, N*H)
		if m.layerHook != nil {
			m.layerHook(i, h, N)
		}
	}
	if keep {
		if err := be.Sync(ctx); err != nil {
			return nil, nil, err
		}
		return nil, st, nil
	}

	if hg == nil {
		hg = sc.alloc(G * H)
		p.gather(hg, h, H)
	}
	be.RMSNorm(hg, hg, m.finalNorm, G, H, c.Eps, m.normShift)
	res, width := hg, H
	if head != nil {
		width = head.Rows()
		res = sc.alloc(G * width)
		be.MatMul(res, hg, head, G)
	}
	outs = make([][]float32, len(rows))
	gi := 0
	for b, r := range rows {
		outs[b] = make([]float32, len(r.Gather)*width)
		if err := be.Read(ctx, res, gi*width, outs[b]); err != nil {
			return nil, nil, err
		}
		gi += len(r.Gather)
	}
	return outs, nil, nil
}

// tail finishes layer l on G gathered rows: hg holds their residual stream
// before the layer's mixer output, pg their mixer activations before its
// output projection proj.
func (m *Model) tail(sc *scratch, l *layer, hg, pg tensor.Tensor, proj *tensor.Weight, G int) {
	c, be := &m.Config, m.be
	H, I := c.Hidden, c.Intermediate
	y, x := sc.alloc(G*H), sc.alloc(G*H)
	g, u := sc.alloc(G*I), sc.alloc(G*I)
	be.MatMul(y, pg, proj, G)
	be.Add(hg, y, G*H)
	be.RMSNorm(x, hg, l.postNorm, G, H, c.Eps, m.normShift)
	be.MatMul(g, x, l.gate, G)
	be.MatMul(u, x, l.up, G)
	be.SwiGLU(g, g, u, G*I)
	be.MatMul(y, g, l.down, G)
	be.Add(hg, y, G*H)
}

// deltaChunk is the chunk length of the chunked gated delta rule, as
// transformers uses it (qwen35.md §5.5).
const deltaChunk = 64

// keepKV stores a full-attention layer's K/V for the new state: the prefix's
// followed by the n new elements of k and v.
func (m *Model) keepKV(ls *layerState, r Row, i int, k, v tensor.Tensor, n int) {
	c := &m.Config
	pn := r.Prefix.Len() * c.KVHeads * c.HeadDim
	ls.k = m.be.Alloc(pn + n)
	ls.v = m.be.Alloc(pn + n)
	if pn > 0 {
		p := &r.Prefix.layers[i]
		m.be.Copy(ls.k, 0, pn, p.k, 0, pn, 1, pn)
		m.be.Copy(ls.v, 0, pn, p.v, 0, pn, 1, pn)
	}
	m.be.Copy(ls.k, pn, n, k, 0, n, 1, n)
	m.be.Copy(ls.v, pn, n, v, 0, n, 1, n)
}

// initRec fills a recurrent-state scratch tensor with the prefix's state for
// layer i, or zeros.
func (m *Model) initRec(dst tensor.Tensor, prefix *State, i int) {
	n := dst.Len()
	if prefix.Len() > 0 {
		m.be.Copy(dst, 0, n, prefix.layers[i].rec, 0, n, 1, n)
		return
	}
	if len(m.zeros) < n {
		m.zeros = make([]float32, n)
	}
	m.be.Write(dst, 0, m.zeros[:n])
}

// freeLocked frees a state while the caller holds the model's lock.
func (s *State) freeLocked() {
	for _, l := range s.layers {
		for _, t := range []tensor.Tensor{l.k, l.v, l.conv, l.rec} {
			if t != nil {
				s.m.be.Free(t)
			}
		}
	}
	s.layers = nil
	s.freed = true
}
