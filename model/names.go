package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/startlux/startlux/tensor"
)

// lmHead is the logical name of the untied LM head; the resolver maps it to
// the layout's key.
const lmHead = "lm_head.weight"

// convTaps marks the middle dimension of the conv weight's wanted shape
// [D, 1, K]; the resolver accepts HF [D, 1, K], MLX [D, K, 1] and [D, K].
const convTaps = -1

// Layout is a checkpoint's tensor naming scheme (qwen35.md §2.1–2.2).
type Layout string

// The layouts Load recognises, from the tensors themselves.
const (
	// LayoutHF is Hugging Face's text model: model.*, lm_head.weight.
	LayoutHF Layout = "hf"
	// LayoutVL is the multimodal wrapper: model.language_model.*,
	// lm_head.weight (the vision tower is ignored).
	LayoutVL Layout = "hf-vl"
	// LayoutMLX is mlx-community's conversion: language_model.model.*,
	// language_model.lm_head.weight, zero-centred norms stored shifted by
	// one and the conv weight as [D, K, 1].
	LayoutMLX Layout = "mlx"
)

// Key returns the key under which a checkpoint of layout l stores the
// tensor of the given logical name (a TensorSpec's Name).
func (l Layout) Key(name string) string {
	for _, s := range layouts {
		if s.name == l {
			return s.key(name)
		}
	}
	return name
}

// layoutKeys is a layout's keys: the prefix of the text model's tensors and
// the key of the untied head.
type layoutKeys struct {
	name   Layout
	prefix string
	head   string
}

// key returns the stored key of a logical tensor name.
func (l layoutKeys) key(name string) string {
	if name == lmHead {
		return l.head
	}
	return l.prefix + name
}

// The layouts a checkpoint may use. Detection tries them in this order by
// the embedding's key.
var layouts = []layoutKeys{
	{name: LayoutVL, prefix: "model.language_model.", head: "lm_head.weight"},
	{name: LayoutMLX, prefix: "language_model.model.", head: "language_model.lm_head.weight"},
	{name: LayoutHF, prefix: "model.", head: "lm_head.weight"},
}

// resolver maps the graph's logical tensor names (relative to the layout
// prefix: "layers.3.mlp.up_proj.weight") to checked weight views.
type resolver struct {
	all     map[string]stored
	lay     layoutKeys
	quant   *quantSpec
	missing string // the file a missing tensor is reported against
	// normShift is 1 when zero-centred norms are stored as offsets (HF), 0
	// when they were already shifted (MLX conversion, marked by the conv
	// weight stored as [D, K, 1]).
	normShift float32

	progress    func(done, total int64)
	done, total int64

	// lora holds the LoRA pairs to merge, by stored tensor name (see attach).
	lora       map[string]*pendingLoRA
	loraFactor float32
	merged     int
}

func newResolver(all map[string]stored, quant *quantSpec, missing string) (*resolver, error) {
	r := &resolver{all: all, quant: quant, missing: missing, normShift: 1}
	found := false
	for _, l := range layouts {
		if _, ok := all[l.prefix+"embed_tokens.weight"]; ok {
			r.lay, found = l, true
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("%s: no embedding tensor (looked for %s)", missing, strings.Join(embedKeys(), ", "))
	}
	// The conv weight's shape tells whether the MLX conversion (transpose
	// plus +1 on the zero-centred norms) was applied.
	for k, s := range all {
		if strings.HasPrefix(k, r.lay.prefix) && strings.HasSuffix(k, ".linear_attn.conv1d.weight") {
			sh := s.info.Shape
			if len(sh) == 3 && sh[2] == 1 && sh[1] != 1 {
				r.normShift = 0
			}
			break
		}
	}
	if r.lay.name == LayoutMLX && !r.anyConv() {
		r.normShift = 0
	}
	for k, s := range all {
		if !ignored(k) {
			r.total += int64(len(s.info.Data))
		}
	}
	return r, nil
}

func embedKeys() []string {
	var out []string
	for _, l := range layouts {
		out = append(out, l.prefix+"embed_tokens.weight")
	}
	return out
}

func (r *resolver) anyConv() bool {
	for k := range r.all {
		if strings.HasSuffix(k, ".linear_attn.conv1d.weight") {
			return true
		}
	}
	return false
}

// ignored reports whether a tensor belongs to parts of a checkpoint the text
// model never uses (vision tower, multi-token prediction).
func ignored(k string) bool {
	return strings.HasPrefix(k, "model.visual.") || strings.HasPrefix(k, "vision_tower.") ||
		strings.HasPrefix(k, "mtp.") || strings.Contains(k, ".mtp.")
}

func (r *resolver) key(name string) string { return r.lay.key(name) }

func (r *resolver) hasHead() bool {
	_, ok := r.all[r.lay.head]
	return ok
}

func (r *resolver) tick(s stored) { r.advance(int64(len(s.info.Data))) }

// advance counts n more bytes of the load done.
func (r *resolver) advance(n int64) {
	r.done += n
	if r.progress != nil {
		r.progress(r.done, r.total)
	}
}

// weight returns the tensor called name (logical), checked against shape.
func (r *resolver) weight(name string, shape []int) (*tensor.Weight, error) {
	key := r.key(name)
	if base, ok := strings.CutSuffix(key, ".weight"); ok {
		if sc, ok := r.all[base+".scales"]; ok {
			return r.quantised(key, base, sc, shape)
		}
	}
	s, ok := r.all[key]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %s is missing", r.missing, key)
	}
	info := s.info
	if !info.DType.IsFloat() {
		return nil, fmt.Errorf("%s: tensor %s is %s, want F32, BF16 or F16", s.file, key, info.DType)
	}
	w := info.Weight()
	if len(shape) == 3 && shape[1] == convTaps {
		d, k := shape[0], shape[2]
		if !(slices.Equal(info.Shape, []int{d, 1, k}) || slices.Equal(info.Shape, []int{d, k, 1}) || slices.Equal(info.Shape, []int{d, k})) {
			return nil, fmt.Errorf("%s: tensor %s has shape %v, want %v (or [%d %d 1])", s.file, key, info.Shape, []int{d, 1, k}, d, k)
		}
		w.Shape = []int{d, k} // the three stored forms share one memory layout
	} else if !slices.Equal(info.Shape, shape) {
		return nil, fmt.Errorf("%s: tensor %s has shape %v, want %v", s.file, key, info.Shape, shape)
	}
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.file, err)
	}
	if p := r.lora[key]; p != nil {
		merged, err := r.merge(p, w)
		if err != nil {
			return nil, err
		}
		w = merged
	}
	r.tick(s)
	return w, nil
}

// quantised builds an MLX affine-quantised weight from key (packed U32),
// base.scales and base.biases (qwen35.md §2.3).
func (r *resolver) quantised(key, base string, sc stored, shape []int) (*tensor.Weight, error) {
	if len(shape) != 2 {
		return nil, fmt.Errorf("%s: tensor %s.scales: %s must not be quantised", sc.file, base, key)
	}
	out, in := shape[0], shape[1]
	s, ok := r.all[key]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %s is missing (its .scales exist)", r.missing, key)
	}
	bi, ok := r.all[base+".biases"]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %s.biases is missing: quantisation without biases (mxfp4, nvfp4, mxfp8) is not supported", r.missing, base)
	}
	ps, ss := s.info.Shape, sc.info.Shape
	if s.info.DType != tensor.U32 || len(ps) != 2 || ps[0] != out || ps[1] == 0 || (ps[1]*32)%in != 0 {
		return nil, fmt.Errorf("%s: tensor %s is %s %v, want packed U32 [%d, %d·bits/32] for logical [%d %d]", s.file, key, s.info.DType, ps, out, in, out, in)
	}
	if len(ss) != 2 || ss[0] != out || ss[1] == 0 || in%ss[1] != 0 {
		return nil, fmt.Errorf("%s: tensor %s.scales has shape %v, want [%d, %d/group]", sc.file, base, ss, out, in)
	}
	bits, group := ps[1]*32/in, in/ss[1]
	if wb, wg, ok := r.quant.forModule(base); ok && (wb != bits || wg != group) {
		return nil, fmt.Errorf("%s: tensor %s is stored with %d bits, group %d, but config.json says %d bits, group %d", s.file, key, bits, group, wb, wg)
	}
	w := &tensor.Weight{Name: key, DType: tensor.U32, Shape: []int{out, in}, Data: s.info.Data,
		Quant: &tensor.Quant{Bits: bits, Group: group, Scales: sc.info.Weight(), Biases: bi.info.Weight()}}
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.file, err)
	}
	r.tick(s)
	r.tick(sc)
	r.tick(bi)
	return w, nil
}
