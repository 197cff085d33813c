package model

import (
	"slices"

	"github.com/startlux/startlux/tensor"
)

// TensorSpec describes one tensor of a Qwen3.5 checkpoint as the graph reads
// it.
type TensorSpec struct {
	// Name is the logical name, relative to the layout's prefix
	// ("layers.3.mlp.up_proj.weight"); the untied LM head is
	// "lm_head.weight". [Layout.Key] gives the stored key.
	Name string
	// Shape is the shape Hugging Face stores.
	Shape []int
	Role  Role
}

// Role is what a checkpoint tensor is to the graph.
type Role uint8

// The roles of a checkpoint's tensors.
const (
	// RoleEmbedding is the token embedding [Vocab, Hidden], also the LM head
	// of a tied checkpoint.
	RoleEmbedding Role = iota + 1
	// RoleHead is the untied LM head [Vocab, Hidden].
	RoleHead
	// RoleProjection is a large [out, in] matrix the graph multiplies by
	// (y = x·Wᵀ): attention q/k/v/o_proj, DeltaNet in_proj_qkv, in_proj_z
	// and out_proj, MLP gate/up/down_proj.
	RoleProjection
	// RoleHeadGate is one of the DeltaNet's [NV, Hidden] projections to one
	// value per value head: in_proj_a (the decay's) and in_proj_b (β's).
	RoleHeadGate
	// RoleNorm is a zero-centred RMSNorm weight: the graph scales by 1 + w.
	// Hugging Face files store w; MLX conversions store 1 + w.
	RoleNorm
	// RoleGatedNorm is the DeltaNet's output norm weight [DV], a plain scale
	// used as stored (F32 in official files).
	RoleGatedNorm
	// RoleConv is the DeltaNet's depthwise causal conv weight [Dconv, 1,
	// ConvK]; MLX conversions store it as [Dconv, ConvK, 1].
	RoleConv
	// RoleDecayLog is the DeltaNet's A_log [NV] (F32 in official files).
	RoleDecayLog
	// RoleDecayBias is the DeltaNet's dt_bias [NV].
	RoleDecayBias
)

// Tensors lists every tensor the graph reads from a checkpoint of
// configuration c, in the order Load binds them: the embedding, the final
// norm, the LM head unless c is tied, then layer by layer its norms, its MLP
// and its mixer.
func (c *Config) Tensors() []TensorSpec {
	m := &Model{Config: *c}
	m.layers = newLayers(c)
	var out []TensorSpec
	for _, ref := range m.weights() {
		out = append(out, ref.TensorSpec)
	}
	return out
}

// weightRef is one tensor of the graph and the field of the model that
// holds it.
type weightRef struct {
	TensorSpec
	w **tensor.Weight
}

// wanted returns the shape the resolver checks: a conv's middle dimension
// is convTaps, which accepts every stored form.
func (r weightRef) wanted() []int {
	if r.Role == RoleConv {
		s := slices.Clone(r.Shape)
		s[1] = convTaps
		return s
	}
	return r.Shape
}

// weights lists every weight the graph reads, in the order of
// Config.Tensors. The LM head of a tied model is the embedding and not
// listed.
func (m *Model) weights() []weightRef {
	c := &m.Config
	refs := []weightRef{
		{TensorSpec{"embed_tokens.weight", []int{c.Vocab, c.Hidden}, RoleEmbedding}, &m.embed},
		{TensorSpec{"norm.weight", []int{c.Hidden}, RoleNorm}, &m.finalNorm},
	}
	if !c.Tied {
		refs = append(refs, weightRef{TensorSpec{lmHead, []int{c.Vocab, c.Hidden}, RoleHead}, &m.head})
	}
	for i := range m.layers {
		refs = append(refs, m.layers[i].weights(layerPrefix(i), c)...)
	}
	return refs
}

// projections lists the model's large projection weights (RoleProjection:
// every layer's attention q/k/v/o_proj or DeltaNet in_proj_qkv, in_proj_z
// and out_proj, and its MLP gate/up/down_proj), layer by layer, each with the
// field that holds it, so that a weight may be replaced by another of the
// same logical shape (a requantised one, say) before the model runs.
func (m *Model) projections() []weightRef {
	var out []weightRef
	for _, ref := range m.weights() {
		if ref.Role == RoleProjection {
			out = append(out, ref)
		}
	}
	return out
}
