package model

import (
	"fmt"

	"github.com/startlux/startlux/tensor"
)

// layer is one decoder layer (qwen35.md §6): pre-norm, two residuals.
//
//	h = h + mixer(input_layernorm(h))     mixer: full attention or Gated DeltaNet, per layer_types
//	h = h + mlp(post_attention_layernorm(h))
type layer struct {
	inNorm, postNorm *tensor.Weight
	mixer            mixer
	mlp              mlp
}

// mixer is a decoder layer's token mixer: *attention or *deltaNet. Each
// reads its layer's part of the rows' prefix states and, in a pass that keeps
// a State, writes the new one.
type mixer interface {
	// weights lists the mixer's tensors, named under prefix p ("layers.3.").
	weights(p string, c *Config) []weightRef
	// widths returns the per-token widths the mixer needs of the batch's
	// four shared buffers (batch.slot).
	widths(c *Config) [4]int
	// mix runs the mixer, output projection included, on x (the normed
	// residual stream of every token of the batch) into y ([N, Hidden]).
	mix(p *batch, i int, x, y tensor.Tensor)
	// mixGathered is mix for only the tokens at the rows' Gather positions:
	// it returns their G outputs, row after row ([G, Hidden]).
	mixGathered(p *batch, i int, x tensor.Tensor) tensor.Tensor
	// update runs only what makes the mixer's part of the kept state.
	update(p *batch, i int, x tensor.Tensor)
}

// layerMode says which tokens a layer computes its output for.
type layerMode uint8

const (
	// everyToken runs the whole layer on every token of the batch.
	everyToken layerMode = iota
	// gatheredTokens runs the mixer's state on every token and the rest of
	// the layer only on the rows' Gather positions: everything after the
	// mixer is row-wise. It is a Forward's last layer.
	gatheredTokens
	// stateOnly runs only what makes the mixer's part of the kept state; the
	// layer's output is never read. It is a Prefill's last layer.
	stateOnly
)

// weights lists the layer's tensors, named under prefix p, in the order they
// are bound: the norms, the MLP, then the mixer.
func (l *layer) weights(p string, c *Config) []weightRef {
	H := c.Hidden
	refs := []weightRef{
		{TensorSpec{p + "input_layernorm.weight", []int{H}, RoleNorm}, &l.inNorm},
		{TensorSpec{p + "post_attention_layernorm.weight", []int{H}, RoleNorm}, &l.postNorm},
	}
	refs = append(refs, l.mlp.weights(p+"mlp.", c)...)
	return append(refs, l.mixer.weights(p, c)...)
}

// newLayers returns c's decoder layers, each with the mixer its layer type
// names and no weights yet.
func newLayers(c *Config) []layer {
	layers := make([]layer, c.Layers)
	for i := range layers {
		if c.Linear[i] {
			layers[i].mixer = &deltaNet{}
		} else {
			layers[i].mixer = &attention{}
		}
	}
	return layers
}

// layerPrefix is the prefix of layer i's tensor names.
func layerPrefix(i int) string { return fmt.Sprintf("layers.%d.", i) }

// mlp is a decoder layer's SwiGLU feed-forward block (qwen35.md §6):
// down(silu(gate(x)) ⊙ up(x)).
type mlp struct {
	gate, up, down *tensor.Weight
}

func (f *mlp) weights(p string, c *Config) []weightRef {
	H, I := c.Hidden, c.Intermediate
	return []weightRef{
		{TensorSpec{p + "gate_proj.weight", []int{I, H}, RoleProjection}, &f.gate},
		{TensorSpec{p + "up_proj.weight", []int{I, H}, RoleProjection}, &f.up},
		{TensorSpec{p + "down_proj.weight", []int{H, I}, RoleProjection}, &f.down},
	}
}

// run computes y = mlp(x) for rows tokens, with g and u ([rows,
// Intermediate]) as scratch.
func (f *mlp) run(be tensor.Backend, y, x, g, u tensor.Tensor, rows, inter int) {
	be.MatMul(g, x, f.gate, rows)
	be.MatMul(u, x, f.up, rows)
	be.SwiGLU(g, g, u, rows*inter)
	be.MatMul(y, g, f.down, rows)
}

// layer runs decoder layer i on the batch's residual stream in the given
// mode. In gatheredTokens mode the residual stream becomes the G gathered
// tokens' (p.h, p.gathered).
func (p *batch) layer(i int, mode layerMode) {
	m, be := p.m, p.be
	c, l := &m.Config, &m.layers[i]
	H := c.Hidden
	be.RMSNorm(p.x, p.h, l.inNorm, p.N, H, c.Eps, m.normShift)
	switch mode {
	case stateOnly:
		l.mixer.update(p, i, p.x)
	case everyToken:
		l.mixer.mix(p, i, p.x, p.y)
		p.finish(l, p.h, p.x, p.y, p.slot[0], p.slot[1], p.N)
	case gatheredTokens:
		G := p.G
		y := l.mixer.mixGathered(p, i, p.x)
		hg := p.sc.alloc(G * H)
		p.gather(hg, p.h, H)
		x := p.sc.alloc(G * H)
		g, u := p.sc.alloc(G*c.Intermediate), p.sc.alloc(G*c.Intermediate)
		p.finish(l, hg, x, y, g, u, G)
		p.h, p.gathered = hg, true
	}
}

// finish is the rest of layer l after its mixer, on rows tokens: it adds
// the mixer's output y to the residual stream h, then the MLP's of the
// normed h. x, y, g and u are scratch of rows × Hidden, Hidden,
// Intermediate and Intermediate floats.
func (p *batch) finish(l *layer, h, x, y, g, u tensor.Tensor, rows int) {
	m, be := p.m, p.be
	c := &m.Config
	be.Add(h, y, rows*c.Hidden)
	be.RMSNorm(x, h, l.postNorm, rows, c.Hidden, c.Eps, m.normShift)
	l.mlp.run(be, y, x, g, u, rows, c.Intermediate)
	be.Add(h, y, rows*c.Hidden)
}
