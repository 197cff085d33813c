package model

import (
	"context"
	"errors"
	"fmt"
	"math"

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

// pass runs the graph over rows. With keep (a single unpadded row) it also
// returns the state after the row; with head it returns logits instead of
// hidden states. The caller holds m.mu and has checked rows.
func (m *Model) pass(ctx context.Context, rows []Row, head *tensor.Weight, keep bool) (outs [][]float32, st *State, err error) {
	c := &m.Config
	be := m.be
	B, T := len(rows), 0
	for _, r := range rows {
		T = max(T, len(r.IDs))
	}
	N := B * T
	H := c.Hidden
	ids := make([]int32, N)
	pos := make([]int32, N)
	hasPrefix := false
	for b, r := range rows {
		copy(ids[b*T:], r.IDs)
		p := r.Prefix.Len()
		hasPrefix = hasPrefix || p > 0
		for t := range T {
			pos[b*T+t] = int32(p + t)
		}
	}

	sc := &scratch{be: be}
	defer sc.free()
	if keep {
		st = &State{m: m, n: rows[0].Prefix.Len() + len(rows[0].IDs), layers: make([]layerState, c.Layers)}
		defer func() {
			if err != nil {
				st.freeLocked()
				st = nil
			}
		}()
	}

	h := sc.alloc(N * H)
	x := sc.alloc(N * H)
	y := sc.alloc(N * H)
	be.Embed(h, m.embed, ids)

	nh, nkv, hd := c.Heads, c.KVHeads, c.HeadDim
	dkey, dval := c.NK*c.DK, c.NV*c.DV
	dconv := 2*dkey + dval
	I := c.Intermediate
	// Four large per-token buffers are shared by the roles that never live
	// at the same time: the attention mixer's, the DeltaNet mixer's and the
	// MLP's (only those kinds the model has count towards their sizes).
	var sizes [4]int
	grow := func(vals ...int) {
		for j, v := range vals {
			sizes[j] = max(sizes[j], v)
		}
	}
	grow(I, I)
	for _, l := range m.layers {
		if l.linear {
			grow(dconv, dconv, dval, dval)
		} else {
			grow(2*nh*hd, nh*hd, nh*hd, nh*hd)
		}
	}
	slotA, slotB, slotC, slotD := sc.alloc(N*sizes[0]), sc.alloc(N*sizes[1]), sc.alloc(N*sizes[2]), sc.alloc(N*sizes[3])
	qg, q, gate, att := slotA, slotB, slotC, slotD
	mixed, conv, z, o := slotA, slotB, slotC, slotD
	g, u := slotA, slotB
	var k, v, aa, bb tensor.Tensor
	var recs []tensor.Tensor // per-row recurrent scratch (reused across layers unless keep)

	// Forward only needs the gathered rows after the last mixer (tests that
	// watch every layer's output keep the full path).
	G := 0
	for _, r := range rows {
		G += len(r.Gather)
	}
	if !keep && G == 0 {
		outs = make([][]float32, B)
		for b := range outs {
			outs[b] = []float32{}
		}
		return outs, nil, nil
	}
	gatherTail := !keep && m.layerHook == nil
	gather := func(dst, src tensor.Tensor, width int) {
		gi := 0
		for b, r := range rows {
			for _, t := range r.Gather {
				be.Copy(dst, gi*width, width, src, (b*T+t)*width, width, 1, width)
				gi++
			}
		}
	}
	var hg, pre tensor.Tensor
	var proj *tensor.Weight
	var wPre int

	var kvPrefix []tensor.KV
	var convPrefix []tensor.Tensor
	for i := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		l := &m.layers[i]
		be.RMSNorm(x, h, l.inNorm, N, H, c.Eps, m.normShift)
		if !l.linear {
			if k == nil {
				k, v = sc.alloc(N*nkv*hd), sc.alloc(N*nkv*hd)
			}
			// q_proj rows are per head [query | gate] (qwen35.md §2.1, §7.8).
			be.MatMul(qg, x, l.q, N)
			be.Copy(q, 0, hd, qg, 0, 2*hd, N*nh, hd)
			be.Copy(gate, 0, hd, qg, hd, 2*hd, N*nh, hd)
			be.RMSNorm(q, q, l.qNorm, N*nh, hd, c.Eps, m.normShift)
			be.MatMul(k, x, l.k, N)
			be.RMSNorm(k, k, l.kNorm, N*nkv, hd, c.Eps, m.normShift)
			be.MatMul(v, x, l.v, N)
			be.RoPE(q, pos, nh, hd, c.RopeDim, float32(c.RopeTheta))
			be.RoPE(k, pos, nkv, hd, c.RopeDim, float32(c.RopeTheta))
			args := tensor.AttnArgs{B: B, T: T, Heads: nh, KVHeads: nkv, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd)))}
			if hasPrefix {
				kvPrefix = kvPrefix[:0]
				for _, r := range rows {
					var kv tensor.KV
					if p := r.Prefix; p.Len() > 0 {
						ls := &p.layers[i]
						kv = tensor.KV{K: ls.k, V: ls.v, Len: p.n}
					}
					kvPrefix = append(kvPrefix, kv)
				}
				args.Prefix = kvPrefix
			}
			be.Attention(att, q, k, v, args)
			be.SigmoidMul(att, gate, N*nh*hd)
			pre, proj, wPre = att, l.o, nh*hd
			if keep {
				m.keepKV(&st.layers[i], rows[0], i, k, v, T*nkv*hd)
			}
		} else {
			if aa == nil {
				aa, bb = sc.alloc(N*c.NV), sc.alloc(N*c.NV)
			}
			be.MatMul(mixed, x, l.qkv, N)
			be.MatMul(z, x, l.z, N)
			be.MatMul(bb, x, l.b, N)
			be.MatMul(aa, x, l.a, N)
			cargs := tensor.ConvArgs{B: B, T: T, D: dconv, K: c.ConvK, Len: make([]int, B)}
			for b, r := range rows {
				cargs.Len[b] = len(r.IDs)
			}
			if hasPrefix {
				convPrefix = convPrefix[:0]
				for _, r := range rows {
					var t tensor.Tensor
					if p := r.Prefix; p.Len() > 0 {
						t = p.layers[i].conv
					}
					convPrefix = append(convPrefix, t)
				}
				cargs.State = convPrefix
			}
			if keep {
				st.layers[i].conv = be.Alloc((c.ConvK - 1) * dconv)
				cargs.NewState = []tensor.Tensor{st.layers[i].conv}
			}
			be.CausalConv(conv, mixed, l.conv, cargs)

			// Each row runs on its own copy of its prefix's recurrent state;
			// the stored state is only read.
			if keep {
				recs = []tensor.Tensor{be.Alloc(c.NV * c.DK * c.DV)}
				st.layers[i].rec = recs[0]
			} else if recs == nil {
				for range rows {
					recs = append(recs, sc.alloc(c.NV*c.DK*c.DV))
				}
			}
			for b, r := range rows {
				m.initRec(recs[b], r.Prefix, i)
			}
			be.GatedDelta(o, conv, aa, bb, l.aLog, l.dtBias, tensor.DeltaArgs{
				B: B, T: T, NK: c.NK, NV: c.NV, DK: c.DK, DV: c.DV, Chunk: deltaChunk, State: recs})
			be.GatedRMSNorm(o, o, z, l.norm, N*c.NV, c.DV, c.Eps)
			pre, proj, wPre = o, l.out, dval
		}
		if gatherTail && i == len(m.layers)-1 {
			// Everything after the last mixer is row-wise: run it on the
			// gathered rows only.
			hg = sc.alloc(G * H)
			pg := sc.alloc(G * wPre)
			gather(hg, h, H)
			gather(pg, pre, wPre)
			m.tail(sc, l, hg, pg, proj, G)
			break
		}
		be.MatMul(y, pre, proj, N)
		be.Add(h, y, N*H)
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
		gather(hg, h, H)
	}
	outs = make([][]float32, B)
	be.RMSNorm(hg, hg, m.finalNorm, G, H, c.Eps, m.normShift)
	res, width := hg, H
	if head != nil {
		width = head.Rows()
		res = sc.alloc(G * width)
		be.MatMul(res, hg, head, G)
	}
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
