package model

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
)

// This file answers "would Load run this checkpoint?" from config.json alone
// (ParseConfig for its bytes, ReadConfig for a checkpoint's file system),
// for callers that must decide before any weights exist on disk (a download
// from the Hub) or that describe checkpoints without loading them (a listing).

// Quantization is how config.json says a checkpoint's weights are stored.
type Quantization struct {
	// Bits and Group are the MLX affine quantisation's width and group
	// size; Bits is 0 when the weights are not quantised.
	Bits, Group int
}

// ConfigInfo is what a checkpoint's config.json says.
type ConfigInfo struct {
	// Config is the text configuration, exactly as Load parses it.
	Config Config
	// Quant is the MLX quantisation block, if any.
	Quant Quantization
	// DType is the stored dtype config.json names ("bfloat16", from
	// "dtype" or "torch_dtype"), "" when it names none.
	DType string
}

// ParseConfig parses a checkpoint's config.json as Load does (file names it
// in errors) and refuses what Load would refuse: other model families,
// mixture-of-experts variants, unsupported rope or quantisation schemes and
// malformed fields.
func ParseConfig(file string, data []byte) (ConfigInfo, error) {
	c, q, err := parseConfig(file, data)
	if err != nil {
		return ConfigInfo{}, err
	}
	info := ConfigInfo{Config: c, DType: configDType(data)}
	if q != nil {
		info.Quant = Quantization{Bits: q.Bits, Group: q.Group}
	}
	return info, nil
}

// ReadConfig reads the text configuration of the checkpoint at the root of
// fsys, without its weights: config.json through [ParseConfig]. name is
// shown in errors.
func ReadConfig(fsys fs.FS, name string) (Config, error) {
	src := fsSource{fsys: fsys, name: name}
	data, err := src.readFile("config.json")
	if err != nil {
		return Config{}, fmt.Errorf("read config of %s: %w", name, err)
	}
	info, err := ParseConfig(src.display("config.json"), data)
	if err != nil {
		return Config{}, fmt.Errorf("read config of %s: %w", name, err)
	}
	return info.Config, nil
}

// Storage names how the weights are stored, for people: "MLX 4-bit
// (group 32)" for a quantised checkpoint, else the dtype ("bf16", "f16",
// "f32"), "" when config.json says neither.
func (i ConfigInfo) Storage() string {
	if i.Quant.Bits > 0 {
		return fmt.Sprintf("MLX %d-bit (group %d)", i.Quant.Bits, i.Quant.Group)
	}
	switch i.DType {
	case "bfloat16":
		return "bf16"
	case "float16":
		return "f16"
	case "float32":
		return "f32"
	}
	return i.DType
}

// configDType reads the dtype config.json names, at the top level or in
// text_config.
func configDType(data []byte) string {
	var m struct {
		DType      string `json:"dtype"`
		TorchDType string `json:"torch_dtype"`
		Text       *struct {
			DType      string `json:"dtype"`
			TorchDType string `json:"torch_dtype"`
		} `json:"text_config"`
	}
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	for _, s := range []string{m.DType, m.TorchDType} {
		if s != "" {
			return s
		}
	}
	if m.Text != nil {
		for _, s := range []string{m.Text.DType, m.Text.TorchDType} {
			if s != "" {
				return s
			}
		}
	}
	return ""
}

// refuseModelType rejects a config.json that names another model family
// than dense Qwen3.5 (model_type qwen3_5 for the multimodal wrapper,
// qwen3_5_text for the text model). A config that names no model_type and no
// architectures is judged by its fields alone.
func refuseModelType(top, tc jsonObj) error {
	const why = "this engine runs dense Qwen3.5 models (model_type qwen3_5 or qwen3_5_text)"
	objs := []jsonObj{top}
	if tc.path != "" {
		objs = append(objs, tc)
	}
	for _, o := range objs {
		mt, err := o.str("model_type")
		if err != nil {
			return err
		}
		if mt != "" && mt != "qwen3_5" && mt != "qwen3_5_text" {
			return o.errf("model_type", "is %q: %s", mt, why)
		}
		if arch, ok := o.m["architectures"].([]any); ok {
			for _, a := range arch {
				if s, _ := a.(string); !strings.HasPrefix(s, "Qwen3_5") {
					return o.errf("architectures", "names %v: %s", a, why)
				}
			}
		}
	}
	return nil
}
