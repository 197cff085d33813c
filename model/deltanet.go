package model

import "github.com/startlux/startlux/tensor"

// deltaNet is a Gated DeltaNet mixer (qwen35.md §5): in_proj_qkv through a
// depthwise causal conv into the gated delta rule, whose output is normed
// per value head, gated by silu(in_proj_z) and projected by out_proj.
type deltaNet struct {
	qkv, z, b, a *tensor.Weight
	conv         *tensor.Weight
	dtBias, aLog *tensor.Weight
	norm, out    *tensor.Weight
}

// recurrentState is a DeltaNet layer's part of a State: conv, the last
// ConvK−1 inputs of the conv ([ConvK−1, Dconv], oldest first), and rec, the
// delta rule's state ([NV, DK, DV] float32).
type recurrentState struct {
	conv, rec tensor.Tensor
}

func (s *recurrentState) tensors() []tensor.Tensor { return []tensor.Tensor{s.conv, s.rec} }

// deltaChunk is the chunk length of the chunked gated delta rule, as
// transformers uses it (qwen35.md §5.5).
const deltaChunk = 64

func (d *deltaNet) weights(p string, c *Config) []weightRef {
	p += "linear_attn."
	H, dval := c.Hidden, c.NV*c.DV
	dconv := 2*c.NK*c.DK + dval
	return []weightRef{
		{TensorSpec{p + "in_proj_qkv.weight", []int{dconv, H}, RoleProjection}, &d.qkv},
		{TensorSpec{p + "in_proj_z.weight", []int{dval, H}, RoleProjection}, &d.z},
		{TensorSpec{p + "in_proj_b.weight", []int{c.NV, H}, RoleHeadGate}, &d.b},
		{TensorSpec{p + "in_proj_a.weight", []int{c.NV, H}, RoleHeadGate}, &d.a},
		{TensorSpec{p + "conv1d.weight", []int{dconv, 1, c.ConvK}, RoleConv}, &d.conv},
		{TensorSpec{p + "dt_bias", []int{c.NV}, RoleDecayBias}, &d.dtBias},
		{TensorSpec{p + "A_log", []int{c.NV}, RoleDecayLog}, &d.aLog},
		{TensorSpec{p + "norm.weight", []int{c.DV}, RoleGatedNorm}, &d.norm},
		{TensorSpec{p + "out_proj.weight", []int{H, dval}, RoleProjection}, &d.out},
	}
}

// widths: the projected q, k and v, their conv, z and the delta rule's
// output.
func (d *deltaNet) widths(c *Config) [4]int {
	dval := c.NV * c.DV
	dconv := 2*c.NK*c.DK + dval
	return [4]int{dconv, dconv, dval, dval}
}

func (d *deltaNet) mix(p *batch, i int, x, y tensor.Tensor) {
	be := p.be
	be.MatMul(y, d.gated(p, i, x), d.out, p.N)
}

func (d *deltaNet) mixGathered(p *batch, i int, x tensor.Tensor) tensor.Tensor {
	c, be, G := &p.m.Config, p.be, p.G
	dval := c.NV * c.DV
	o := d.gated(p, i, x)
	og, y := p.sc.alloc(G*dval), p.sc.alloc(G*c.Hidden)
	p.gather(og, o, dval)
	be.MatMul(y, og, d.out, G)
	return y
}

func (d *deltaNet) update(p *batch, i int, x tensor.Tensor) { d.rule(p, i, x) }

// gated runs the mixer on every token of x up to its output projection: the
// delta rule's output, normed and gated by z.
func (d *deltaNet) gated(p *batch, i int, x tensor.Tensor) tensor.Tensor {
	c, be, N := &p.m.Config, p.be, p.N
	o, z := d.rule(p, i, x), p.slot[2]
	be.MatMul(z, x, d.z, N)
	be.GatedRMSNorm(o, o, z, d.norm, N*c.NV, c.DV, c.Eps)
	return o
}

// rule runs the mixer of layer i on x up to the delta rule: it updates the
// rows' conv and recurrent states (the kept state's, when keeping) and
// returns the rule's output before the gated norm.
func (d *deltaNet) rule(p *batch, i int, x tensor.Tensor) tensor.Tensor {
	c, be, N := &p.m.Config, p.be, p.N
	dconv := 2*c.NK*c.DK + c.NV*c.DV
	mixed, conv, o := p.slot[0], p.slot[1], p.slot[3]
	if p.a == nil {
		p.a, p.b = p.sc.alloc(N*c.NV), p.sc.alloc(N*c.NV)
	}
	be.MatMul(mixed, x, d.qkv, N)
	be.MatMul(p.b, x, d.b, N)
	be.MatMul(p.a, x, d.a, N)
	cargs := tensor.ConvArgs{B: p.B, T: p.T, D: dconv, K: c.ConvK, Len: p.lens}
	if p.prefix {
		for _, r := range p.rows {
			var t tensor.Tensor
			if s := r.Prefix.recurrent(i); s != nil {
				t = s.conv
			}
			cargs.State = append(cargs.State, t)
		}
	}
	var kept *recurrentState
	if p.keep != nil {
		kept = &recurrentState{conv: be.Alloc((c.ConvK - 1) * dconv)}
		p.keep.layers[i] = kept
		cargs.NewState = []tensor.Tensor{kept.conv}
	}
	be.CausalConv(conv, mixed, d.conv, cargs)

	// Each row runs on its own copy of its prefix's recurrent state; the
	// stored state is only read. When keeping, the copy becomes the new state.
	if kept != nil {
		kept.rec = be.Alloc(c.NV * c.DK * c.DV)
		p.recs = []tensor.Tensor{kept.rec}
	} else if p.recs == nil {
		for range p.rows {
			p.recs = append(p.recs, p.sc.alloc(c.NV*c.DK*c.DV))
		}
	}
	for b, r := range p.rows {
		p.m.initRec(p.recs[b], r.Prefix.recurrent(i))
	}
	be.GatedDelta(o, conv, p.a, p.b, d.aLog, d.dtBias, tensor.DeltaArgs{
		B: p.B, T: p.T, NK: c.NK, NV: c.NV, DK: c.DK, DV: c.DV, Chunk: deltaChunk, State: p.recs})
	return o
}

// initRec fills a recurrent-state scratch tensor with the prefix's state
// (nil: none), or zeros.
func (m *Model) initRec(dst tensor.Tensor, prefix *recurrentState) {
	n := dst.Len()
	if prefix != nil {
		m.be.Copy(dst, 0, n, prefix.rec, 0, n, 1, n)
		return
	}
	if len(m.zeros) < n {
		m.zeros = make([]float32, n)
	}
	m.be.Write(dst, 0, m.zeros[:n])
}
