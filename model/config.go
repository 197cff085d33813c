package model

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Config is the parsed text-model configuration of a Qwen3.5 dense checkpoint
// (qwen35.md §1), read from config.json's text_config when it has one, else
// from its top level.
type Config struct {
	Hidden, Layers, Intermediate, Vocab int
	Heads, KVHeads, HeadDim, RopeDim    int
	RopeTheta                           float64
	Eps                                 float32
	Linear                              []bool // per layer: true = Gated DeltaNet, false = full attention
	NK, NV, DK, DV, ConvK               int
	Tied                                bool
	MaxPositions                        int
}

// quantSpec is the MLX "quantization" block of config.json (qwen35.md §2.3).
type quantSpec struct {
	Bits, Group int
	Mode        string
	// Modules holds per-module overrides keyed by module path; a nil entry
	// means the module is not quantised.
	Modules map[string]*quantSpec
}

// forModule returns the quantisation that applies to the module at path.
func (q *quantSpec) forModule(path string) (bits, group int, ok bool) {
	if q == nil {
		return 0, 0, false
	}
	if o, found := q.Modules[path]; found {
		if o == nil {
			return 0, 0, false
		}
		return o.Bits, o.Group, true
	}
	return q.Bits, q.Group, true
}

// jsonObj is a JSON object with typed accessors that report the field path
// in errors.
type jsonObj struct {
	file, path string
	m          map[string]any
}

func (o jsonObj) field(k string) string {
	if o.path == "" {
		return k
	}
	return o.path + "." + k
}

func (o jsonObj) has(k string) bool {
	v, ok := o.m[k]
	return ok && v != nil
}

func (o jsonObj) errf(k, format string, a ...any) error {
	return fmt.Errorf("%s: field %s: %s", o.file, o.field(k), fmt.Sprintf(format, a...))
}

func (o jsonObj) obj(k string) (jsonObj, bool, error) {
	v, ok := o.m[k]
	if !ok || v == nil {
		return jsonObj{}, false, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return jsonObj{}, false, o.errf(k, "is %T, want an object", v)
	}
	return jsonObj{file: o.file, path: o.field(k), m: m}, true, nil
}

func (o jsonObj) str(k string) (string, error) {
	v, ok := o.m[k]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", o.errf(k, "is %v, want a string", v)
	}
	return s, nil
}

func (o jsonObj) num(k string) (float64, bool, error) {
	v, ok := o.m[k]
	if !ok || v == nil {
		return 0, false, nil
	}
	f, ok := v.(float64)
	if !ok {
		return 0, false, o.errf(k, "is %v, want a number", v)
	}
	return f, true, nil
}

// int reads a positive integer field; def < 0 means the field is required.
func (o jsonObj) int(k string, def int) (int, error) {
	f, ok, err := o.num(k)
	if err != nil {
		return 0, err
	}
	if !ok {
		if def < 0 {
			return 0, o.errf(k, "missing")
		}
		return def, nil
	}
	if f != math.Trunc(f) || f <= 0 || f > 1<<31 {
		return 0, o.errf(k, "is %v, want a positive integer", f)
	}
	return int(f), nil
}

func (o jsonObj) boolean(k string) (bool, error) {
	v, ok := o.m[k]
	if !ok || v == nil {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, o.errf(k, "is %v, want a boolean", v)
	}
	return b, nil
}

// parseConfig parses config.json (file names it in errors).
func parseConfig(file string, data []byte) (Config, *quantSpec, error) {
	var c Config
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return c, nil, fmt.Errorf("%s: %w", file, err)
	}
	top := jsonObj{file: file, m: m}
	tc, nested, err := top.obj("text_config")
	if err != nil {
		return c, nil, err
	}
	if !nested {
		tc = top
	}
	if err := refuseMoE(top, tc); err != nil {
		return c, nil, err
	}
	if err := refuseModelType(top, tc); err != nil {
		return c, nil, err
	}
	if act, err := tc.str("hidden_act"); err != nil {
		return c, nil, err
	} else if act != "" && act != "silu" {
		return c, nil, tc.errf("hidden_act", "is %q, only \"silu\" is supported", act)
	}

	ints := []struct {
		dst      *int
		key      string
		def, max int
	}{
		{&c.Hidden, "hidden_size", -1, maxHidden},
		{&c.Layers, "num_hidden_layers", -1, maxLayers},
		{&c.Intermediate, "intermediate_size", -1, maxIntermediate},
		{&c.Vocab, "vocab_size", -1, maxVocab},
		{&c.Heads, "num_attention_heads", -1, maxHeads},
		{&c.KVHeads, "num_key_value_heads", -1, maxHeads},
		{&c.HeadDim, "head_dim", -1, maxHeadDim},
		{&c.NK, "linear_num_key_heads", 16, maxHeads},
		{&c.NV, "linear_num_value_heads", 32, maxHeads},
		{&c.DK, "linear_key_head_dim", 128, maxHeadDim},
		{&c.DV, "linear_value_head_dim", 128, maxHeadDim},
		{&c.ConvK, "linear_conv_kernel_dim", 4, maxConvKernel},
		{&c.MaxPositions, "max_position_embeddings", 32768, maxPositions},
	}
	for _, f := range ints {
		if *f.dst, err = tc.int(f.key, f.def); err != nil {
			return c, nil, err
		}
		if *f.dst > f.max {
			return c, nil, tc.errf(f.key, "is %d, more than the %d this engine takes", *f.dst, f.max)
		}
	}
	if err := checkShape(tc, &c); err != nil {
		return c, nil, err
	}
	eps, ok, err := tc.num("rms_norm_eps")
	if err != nil {
		return c, nil, err
	}
	if !ok {
		eps = 1e-6
	}
	if eps <= 0 || eps > 1 {
		return c, nil, tc.errf("rms_norm_eps", "is %v, want a small positive number", eps)
	}
	c.Eps = float32(eps)

	if c.Linear, err = layerKinds(tc, c.Layers); err != nil {
		return c, nil, err
	}
	if err := parseRope(top, tc, &c); err != nil {
		return c, nil, err
	}
	for _, o := range []jsonObj{tc, top} {
		t, err := o.boolean("tie_word_embeddings")
		if err != nil {
			return c, nil, err
		}
		c.Tied = c.Tied || t
	}
	q, err := parseQuant(top)
	if err != nil {
		return c, nil, err
	}
	return c, q, nil
}

// refuseMoE rejects mixture-of-experts configurations (qwen35.md §1.4).
func refuseMoE(top, tc jsonObj) error {
	const why = "mixture-of-experts checkpoints are not supported (this engine runs dense Qwen3.5 models)"
	for _, o := range []jsonObj{top, tc} {
		mt, err := o.str("model_type")
		if err != nil {
			return err
		}
		if strings.Contains(mt, "moe") {
			return o.errf("model_type", "is %q: %s", mt, why)
		}
		if arch, ok := o.m["architectures"].([]any); ok {
			for _, a := range arch {
				if s, _ := a.(string); strings.Contains(s, "Moe") {
					return o.errf("architectures", "names %q: %s", s, why)
				}
			}
		}
	}
	for _, k := range []string{"num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"} {
		if f, ok, _ := tc.num(k); ok && f > 0 {
			return tc.errf(k, "is %v: %s", f, why)
		}
	}
	return nil
}

// layerKinds reads layer_types, or derives it from full_attention_interval.
func layerKinds(tc jsonObj, layers int) ([]bool, error) {
	lin := make([]bool, layers)
	if v, ok := tc.m["layer_types"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok || len(list) != layers {
			return nil, tc.errf("layer_types", "want a list of %d layer kinds (num_hidden_layers), got %v", layers, v)
		}
		for i, x := range list {
			switch x {
			case "linear_attention":
				lin[i] = true
			case "full_attention":
			default:
				return nil, tc.errf("layer_types", "entry %d is %v, want \"linear_attention\" or \"full_attention\"", i, x)
			}
		}
		return lin, nil
	}
	every, err := tc.int("full_attention_interval", 4)
	if err != nil {
		return nil, err
	}
	for i := range lin {
		lin[i] = (i+1)%every != 0
	}
	return lin, nil
}

// parseRope reads the rope fields from rope_parameters, rope_scaling or the
// top level of the text config (qwen35.md §1.2).
func parseRope(top, tc jsonObj, c *Config) error {
	var rps []jsonObj
	nRopeObjs := 0
	for _, k := range []string{"rope_parameters", "rope_scaling"} {
		rp, ok, err := tc.obj(k)
		if err != nil {
			return err
		}
		if ok {
			rps = append(rps, rp)
			nRopeObjs++
		}
	}
	rps = append(rps, tc)
	if tc.path != "" {
		rps = append(rps, top)
	}
	theta, factor := 0.0, 0.25
	haveTheta, haveFactor := false, false
	for i, o := range rps {
		keys := []string{"rope_type"}
		if i < nRopeObjs {
			keys = append(keys, "type") // older exports spell it "type"
		}
		for _, k := range keys {
			t, err := o.str(k)
			if err != nil {
				return err
			}
			switch t {
			case "", "default", "mrope":
			case "yarn":
				return o.errf(k, "is \"yarn\": YaRN rope scaling is not supported")
			default:
				return o.errf(k, "is %q: only default rope is supported", t)
			}
		}
		if f, ok, err := o.num("rope_theta"); err != nil {
			return err
		} else if ok && !haveTheta {
			theta, haveTheta = f, true
		}
		if f, ok, err := o.num("partial_rotary_factor"); err != nil {
			return err
		} else if ok && !haveFactor {
			factor, haveFactor = f, true
		}
	}
	if !haveTheta {
		return tc.errf("rope_parameters.rope_theta", "missing (no rope_theta in rope_parameters, rope_scaling or the config)")
	}
	if theta <= 1 {
		return tc.errf("rope_parameters.rope_theta", "is %v, want > 1", theta)
	}
	c.RopeTheta = theta
	c.RopeDim = int(float64(c.HeadDim) * factor)
	if factor <= 0 || factor > 1 || c.RopeDim%2 != 0 || c.RopeDim == 0 {
		return tc.errf("partial_rotary_factor", "is %v: head_dim %d × it must be an even number of dims", factor, c.HeadDim)
	}
	return nil
}

// parseQuant reads the MLX quantisation block, if any.
func parseQuant(top jsonObj) (*quantSpec, error) {
	qo, ok, err := top.obj("quantization")
	if err != nil || !ok {
		if err == nil {
			qo, ok, err = top.obj("quantization_config")
		}
		if err != nil || !ok {
			return nil, err
		}
	}
	q := &quantSpec{Modules: map[string]*quantSpec{}}
	if q.Mode, err = qo.str("mode"); err != nil {
		return nil, err
	}
	if q.Mode != "" && q.Mode != "affine" {
		return nil, qo.errf("mode", "is %q: only MLX affine quantisation is supported", q.Mode)
	}
	if q.Bits, err = qo.int("bits", -1); err != nil {
		return nil, err
	}
	if q.Group, err = qo.int("group_size", 64); err != nil {
		return nil, err
	}
	for k, v := range qo.m {
		switch v := v.(type) {
		case bool:
			if !v {
				q.Modules[k] = nil
			}
		case map[string]any:
			o := jsonObj{file: qo.file, path: qo.field(k), m: v}
			sub := &quantSpec{}
			if sub.Bits, err = o.int("bits", q.Bits); err != nil {
				return nil, err
			}
			if sub.Group, err = o.int("group_size", q.Group); err != nil {
				return nil, err
			}
			if m, _ := o.str("mode"); m != "" && m != "affine" {
				return nil, o.errf("mode", "is %q: only MLX affine quantisation is supported", m)
			}
			q.Modules[k] = sub
		}
	}
	return q, nil
}
