package model

import (
	"context"
	"errors"
	"fmt"

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
	_, st, err := m.pass(ctx, rows, nil, stateOnly)
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
	out, _, err := m.pass(ctx, rows, head, gatheredTokens)
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

// batch is one forward pass in flight: its rows, their layout, the
// residual stream and the scratch tensors its layers share.
type batch struct {
	m       *Model
	be      tensor.Backend
	rows    []Row
	B, T, N int
	G       int     // gathered positions, over all rows
	lens    []int   // each row's real tokens (before its padding)
	pos     []int32 // absolute position of every token
	prefix  bool    // some row has a prefix state
	keep    *State  // the state being built (Prefill), or nil
	sc      *scratch

	// h is the residual stream: every token's, or after a gatheredTokens
	// layer (gathered set) only the G gathered tokens'. x and y are the
	// normed stream and a layer part's output, both per token.
	h, x, y  tensor.Tensor
	gathered bool

	// Four large per-token buffers shared by the roles that never live at
	// the same time (the attention mixer's, the DeltaNet mixer's, the MLP's),
	// and the small ones of each mixer: the attention's keys and values, the
	// DeltaNet's a and b projections and per-row recurrent scratch (reused
	// across layers unless keeping).
	slot       [4]tensor.Tensor
	k, v, a, b tensor.Tensor
	recs       []tensor.Tensor
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
		p.G += len(r.Gather)
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
	sizes := [4]int{c.Intermediate, c.Intermediate} // the MLP's gate and up
	for _, l := range m.layers {
		for j, w := range l.mixer.widths(c) {
			sizes[j] = max(sizes[j], w)
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

// mode returns the mode layer i runs in when the pass's last layer runs in
// last: every other layer, and every layer a test's hook watches, runs on
// every token.
func (p *batch) mode(i int, last layerMode) layerMode {
	if i < len(p.m.layers)-1 || p.m.layerHook != nil {
		return everyToken
	}
	return last
}

// pass runs the graph over rows, its last layer in mode last. A Prefill's
// pass (last is stateOnly; a single unpadded row) returns the state after
// the row; a Forward's (gatheredTokens) the final normed hidden states at the
// rows' Gather positions, or their logits when head is not nil. The caller
// holds m.mu and has checked rows.
func (m *Model) pass(ctx context.Context, rows []Row, head *tensor.Weight, last layerMode) (outs [][]float32, st *State, err error) {
	c, be := &m.Config, m.be
	H := c.Hidden
	keep := last == stateOnly
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
		// kept, not st: a failing return has set st to nil by the time the
		// deferred call runs.
		kept := &State{m: m, n: rows[0].Prefix.Len() + len(rows[0].IDs), layers: make([]layerState, c.Layers)}
		st = kept
		p.keep = kept
		defer func() {
			if err != nil {
				kept.freeLocked()
				st = nil
			}
		}()
	}
	ids := make([]int32, N)
	for b, r := range rows {
		copy(ids[b*p.T:], r.IDs)
	}
	p.h, p.x, p.y = sc.alloc(N*H), sc.alloc(N*H), sc.alloc(N*H)
	be.Embed(p.h, m.embed, ids)
	for i := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		p.layer(i, p.mode(i, last))
		if m.layerHook != nil {
			m.layerHook(i, p.h, N)
		}
	}
	if keep {
		if err := be.Sync(ctx); err != nil {
			return nil, nil, err
		}
		return nil, st, nil
	}

	hg := p.h
	if !p.gathered {
		hg = sc.alloc(G * H)
		p.gather(hg, p.h, H)
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
