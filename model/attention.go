package model

import (
	"math"
	"slices"

	"github.com/startlux/startlux/tensor"
)

// attention is a gated full-attention mixer (qwen35.md §4): q_proj gives
// each head's query and output gate, q and k are RMS-normed per head and
// partially rotated, and the attention's output, gated by sigmoid(gate), goes
// through o_proj.
type attention struct {
	q, k, v, o   *tensor.Weight
	qNorm, kNorm *tensor.Weight
}

// kvState is a full-attention layer's part of a State: the keys (normed,
// rotated) and values of its n positions, [n, KVHeads, HeadDim] each,
// token-major so that resuming appends.
type kvState struct {
	k, v tensor.Tensor
}

func (s *kvState) tensors() []tensor.Tensor { return []tensor.Tensor{s.k, s.v} }

func (a *attention) weights(p string, c *Config) []weightRef {
	p += "self_attn."
	H, nhd, kw := c.Hidden, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	return []weightRef{
		{TensorSpec{p + "q_proj.weight", []int{2 * nhd, H}, RoleProjection}, &a.q},
		{TensorSpec{p + "k_proj.weight", []int{kw, H}, RoleProjection}, &a.k},
		{TensorSpec{p + "v_proj.weight", []int{kw, H}, RoleProjection}, &a.v},
		{TensorSpec{p + "o_proj.weight", []int{H, nhd}, RoleProjection}, &a.o},
		{TensorSpec{p + "q_norm.weight", []int{c.HeadDim}, RoleNorm}, &a.qNorm},
		{TensorSpec{p + "k_norm.weight", []int{c.HeadDim}, RoleNorm}, &a.kNorm},
	}
}

// widths: the queries with their gates, the queries, the gates and the
// attention's output.
func (a *attention) widths(c *Config) [4]int {
	nhd := c.Heads * c.HeadDim
	return [4]int{2 * nhd, nhd, nhd, nhd}
}

func (a *attention) mix(p *batch, i int, x, y tensor.Tensor) {
	c, be, N := &p.m.Config, p.be, p.N
	nh, nkv, hd := c.Heads, c.KVHeads, c.HeadDim
	qg, q, gate, att := p.slot[0], p.slot[1], p.slot[2], p.slot[3]
	// q_proj rows are per head [query | gate] (qwen35.md §2.1, §7.8).
	be.MatMul(qg, x, a.q, N)
	be.Copy(q, 0, hd, qg, 0, 2*hd, N*nh, hd)
	be.Copy(gate, 0, hd, qg, hd, 2*hd, N*nh, hd)
	be.RMSNorm(q, q, a.qNorm, N*nh, hd, c.Eps, p.m.normShift)
	be.RoPE(q, p.pos, nh, hd, c.RopeDim, float32(c.RopeTheta))
	k, v := a.keysValues(p, i, x)
	args := tensor.AttnArgs{B: p.B, T: p.T, Heads: nh, KVHeads: nkv, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd))),
		Len: p.lens} // the padding's queries may be skipped
	if p.prefix {
		for _, r := range p.rows {
			var kv tensor.KV
			if s := r.Prefix.kv(i); s != nil {
				kv = tensor.KV{K: s.k, V: s.v, Len: r.Prefix.n}
			}
			args.Prefix = append(args.Prefix, kv)
		}
	}
	be.Attention(att, q, k, v, args)
	be.SigmoidMul(att, gate, N*nh*hd)
	be.MatMul(y, att, a.o, N)
}

func (a *attention) update(p *batch, i int, x tensor.Tensor) { a.keysValues(p, i, x) }

// keysValues projects layer i's keys (normed, rotated) and values for every
// token of x, and stores them in the kept state when the pass keeps one.
func (a *attention) keysValues(p *batch, i int, x tensor.Tensor) (k, v tensor.Tensor) {
	c, be, N := &p.m.Config, p.be, p.N
	kw := c.KVHeads * c.HeadDim
	if p.k == nil {
		p.k, p.v = p.sc.alloc(N*kw), p.sc.alloc(N*kw)
	}
	k, v = p.k, p.v
	be.MatMul(k, x, a.k, N)
	be.RMSNorm(k, k, a.kNorm, N*c.KVHeads, c.HeadDim, c.Eps, p.m.normShift)
	be.MatMul(v, x, a.v, N)
	be.RoPE(k, p.pos, c.KVHeads, c.HeadDim, c.RopeDim, float32(c.RopeTheta))
	if p.keep != nil {
		p.keep.layers[i] = appendKV(be, p.rows[0].Prefix, i, k, v, kw, N)
	}
	return k, v
}

// mixGathered projects K and V for every token, the queries only where
// gathered, and makes each gathered query a one-token row of the attention
// whose prefix is its row's prefix followed by the row's own keys before it
// (copied once per row).
func (a *attention) mixGathered(p *batch, i int, x tensor.Tensor) tensor.Tensor {
	c, be, sc, G := &p.m.Config, p.be, p.sc, p.G
	nh, nkv, hd := c.Heads, c.KVHeads, c.HeadDim
	kw, qw := nkv*hd, nh*hd
	theta := float32(c.RopeTheta)
	k, v := a.keysValues(p, i, x)
	xg, qg := sc.alloc(G*c.Hidden), sc.alloc(G*2*qw)
	q, gate, att := sc.alloc(G*qw), sc.alloc(G*qw), sc.alloc(G*qw)
	p.gather(xg, x, c.Hidden)
	be.MatMul(qg, xg, a.q, G)
	be.Copy(q, 0, hd, qg, 0, 2*hd, G*nh, hd)
	be.Copy(gate, 0, hd, qg, hd, 2*hd, G*nh, hd)
	be.RMSNorm(q, q, a.qNorm, G*nh, hd, c.Eps, p.m.normShift)
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
			if s := r.Prefix.kv(i); s != nil {
				be.Copy(kc, 0, pl*kw, s.k, 0, pl*kw, 1, pl*kw)
				be.Copy(vc, 0, pl*kw, s.v, 0, pl*kw, 1, pl*kw)
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
	y := sc.alloc(G * c.Hidden)
	be.MatMul(y, att, a.o, G)
	return y
}

// appendKV returns layer i's part of a new state: the prefix's keys and
// values followed by those of the n new tokens in k and v (kw floats per
// token each).
func appendKV(be tensor.Backend, prefix *State, i int, k, v tensor.Tensor, kw, n int) *kvState {
	pn := prefix.Len() * kw
	n *= kw
	s := &kvState{k: be.Alloc(pn + n), v: be.Alloc(pn + n)}
	if old := prefix.kv(i); old != nil {
		be.Copy(s.k, 0, pn, old.k, 0, pn, 1, pn)
		be.Copy(s.v, 0, pn, old.v, 0, pn, 1, pn)
	}
	be.Copy(s.k, pn, n, k, 0, n, 1, n)
	be.Copy(s.v, pn, n, v, 0, n, 1, n)
	return s
}
