package model

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// baseConfig is a small text config in the bare (Qwen3_5ForCausalLM) form.
func baseConfig() map[string]any {
	return map[string]any{
		"model_type": "qwen3_5_text", "hidden_size": 64.0, "num_hidden_layers": 4.0, "intermediate_size": 160.0,
		"vocab_size": 4096.0, "num_attention_heads": 4.0, "num_key_value_heads": 2.0, "head_dim": 32.0,
		"linear_num_key_heads": 2.0, "linear_num_value_heads": 4.0, "linear_key_head_dim": 16.0,
		"linear_value_head_dim": 24.0, "linear_conv_kernel_dim": 4.0, "rms_norm_eps": 1e-6,
		"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseConfigForms(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(m map[string]any) map[string]any
		check func(t *testing.T, c Config)
	}{
		{"bare", func(m map[string]any) map[string]any { return m }, func(t *testing.T, c Config) {
			if c.Hidden != 64 || c.Layers != 4 || c.NV != 4 || c.DV != 24 || c.RopeDim != 8 || c.RopeTheta != 1e7 || c.Tied {
				t.Errorf("%+v", c)
			}
			if want := []bool{true, true, true, false}; !slices.Equal(c.Linear, want) {
				t.Errorf("Linear %v, want %v (interval 4 default)", c.Linear, want)
			}
		}},
		{"nested text_config, top-level tie", func(m map[string]any) map[string]any {
			return map[string]any{"model_type": "qwen3_5", "architectures": []any{"Qwen3_5ForConditionalGeneration"},
				"tie_word_embeddings": true, "text_config": m, "vision_config": map[string]any{"depth": 1.0}}
		}, func(t *testing.T, c Config) {
			if c.Hidden != 64 || !c.Tied {
				t.Errorf("%+v", c)
			}
		}},
		{"layer_types", func(m map[string]any) map[string]any {
			m["layer_types"] = []any{"full_attention", "linear_attention", "full_attention", "linear_attention"}
			return m
		}, func(t *testing.T, c Config) {
			if want := []bool{false, true, false, true}; !slices.Equal(c.Linear, want) {
				t.Errorf("Linear %v, want %v", c.Linear, want)
			}
		}},
		{"full_attention_interval", func(m map[string]any) map[string]any {
			m["full_attention_interval"] = 2.0
			return m
		}, func(t *testing.T, c Config) {
			if want := []bool{true, false, true, false}; !slices.Equal(c.Linear, want) {
				t.Errorf("Linear %v, want %v", c.Linear, want)
			}
		}},
		{"rope_scaling", func(m map[string]any) map[string]any {
			delete(m, "rope_parameters")
			m["rope_scaling"] = map[string]any{"type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.5}
			return m
		}, func(t *testing.T, c Config) {
			if c.RopeTheta != 5e6 || c.RopeDim != 16 {
				t.Errorf("%+v", c)
			}
		}},
		{"top-level rope fields", func(m map[string]any) map[string]any {
			delete(m, "rope_parameters")
			m["rope_theta"] = 1e6
			return m
		}, func(t *testing.T, c Config) {
			if c.RopeTheta != 1e6 || c.RopeDim != 8 {
				t.Errorf("%+v (partial_rotary_factor defaults to 0.25)", c)
			}
		}},
		{"tied in text_config", func(m map[string]any) map[string]any {
			m["tie_word_embeddings"] = true
			return m
		}, func(t *testing.T, c Config) {
			if !c.Tied {
				t.Error("not tied")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := parseConfig("x/config.json", mustJSON(t, tc.edit(baseConfig())))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestParseConfigRefusals(t *testing.T) {
	cases := []struct {
		name string
		edit func(m map[string]any) map[string]any
		want []string
	}{
		{"moe model_type", func(m map[string]any) map[string]any { m["model_type"] = "qwen3_5_moe_text"; return m },
			[]string{"model_type", "mixture-of-experts"}},
		{"moe num_experts", func(m map[string]any) map[string]any { m["num_experts"] = 8.0; return m },
			[]string{"num_experts", "mixture-of-experts"}},
		{"moe wrapper", func(m map[string]any) map[string]any {
			return map[string]any{"architectures": []any{"Qwen3_5MoeForConditionalGeneration"}, "text_config": m}
		}, []string{"architectures", "mixture-of-experts"}},
		{"yarn", func(m map[string]any) map[string]any {
			m["rope_parameters"] = map[string]any{"rope_type": "yarn", "rope_theta": 1e7, "factor": 4.0}
			return m
		}, []string{"rope_parameters.rope_type", "YaRN"}},
		{"yarn as type", func(m map[string]any) map[string]any {
			delete(m, "rope_parameters")
			m["rope_theta"] = 1e7
			m["rope_scaling"] = map[string]any{"type": "yarn", "factor": 4.0}
			return m
		}, []string{"rope_scaling.type", "YaRN"}},
		{"missing theta", func(m map[string]any) map[string]any {
			m["rope_parameters"] = map[string]any{"rope_type": "default"}
			return m
		}, []string{"rope_theta", "missing"}},
		{"nv not multiple of nk", func(m map[string]any) map[string]any { m["linear_num_value_heads"] = 3.0; return m },
			[]string{"linear_num_value_heads", "not a multiple"}},
		{"missing hidden", func(m map[string]any) map[string]any { delete(m, "hidden_size"); return m },
			[]string{"hidden_size", "missing"}},
		{"layer_types length", func(m map[string]any) map[string]any { m["layer_types"] = []any{"full_attention"}; return m },
			[]string{"layer_types"}},
		{"nested path named", func(m map[string]any) map[string]any {
			m["linear_num_value_heads"] = 3.0
			return map[string]any{"text_config": m}
		}, []string{"text_config.linear_num_value_heads"}},
		{"not silu", func(m map[string]any) map[string]any { m["hidden_act"] = "gelu"; return m }, []string{"hidden_act"}},
		{"a billion layers", func(m map[string]any) map[string]any { m["num_hidden_layers"] = 1e9; return m },
			[]string{"num_hidden_layers", "1000000000", "more than the 1024"}},
		{"huge width", func(m map[string]any) map[string]any { m["hidden_size"] = 1e7; return m },
			[]string{"hidden_size", "10000000", "more than"}},
		{"huge intermediate", func(m map[string]any) map[string]any { m["intermediate_size"] = 2e9; return m },
			[]string{"intermediate_size", "more than"}},
		{"huge vocab", func(m map[string]any) map[string]any { m["vocab_size"] = 1e9; return m }, []string{"vocab_size", "more than"}},
		{"huge heads", func(m map[string]any) map[string]any { m["num_attention_heads"] = 1e6; return m },
			[]string{"num_attention_heads", "more than"}},
		{"huge head_dim", func(m map[string]any) map[string]any { m["linear_value_head_dim"] = 1e5; return m },
			[]string{"linear_value_head_dim", "more than"}},
		{"huge conv kernel", func(m map[string]any) map[string]any { m["linear_conv_kernel_dim"] = 1e6; return m },
			[]string{"linear_conv_kernel_dim", "more than"}},
		{"conv kernel of one", func(m map[string]any) map[string]any { m["linear_conv_kernel_dim"] = 1.0; return m },
			[]string{"linear_conv_kernel_dim", "at least 2"}},
		{"huge positions", func(m map[string]any) map[string]any { m["max_position_embeddings"] = 2e9; return m },
			[]string{"max_position_embeddings", "more than"}},
		{"more kv heads than heads", func(m map[string]any) map[string]any { m["num_key_value_heads"] = 8.0; return m },
			[]string{"num_key_value_heads", "does not divide"}},
		{"odd head_dim", func(m map[string]any) map[string]any { m["head_dim"] = 33.0; return m }, []string{"head_dim", "even"}},
		{"zero layers", func(m map[string]any) map[string]any { m["num_hidden_layers"] = 0.0; return m },
			[]string{"num_hidden_layers", "positive integer"}},
		{"fractional width", func(m map[string]any) map[string]any { m["hidden_size"] = 64.5; return m },
			[]string{"hidden_size", "positive integer"}},
		{"mxfp4", func(m map[string]any) map[string]any {
			m["quantization"] = map[string]any{"mode": "mxfp4", "bits": 4.0, "group_size": 32.0}
			return m
		}, []string{"quantization.mode", "mxfp4"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parseConfig("x/config.json", mustJSON(t, tc.edit(baseConfig())))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range append(tc.want, "x/config.json") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseQuantOverrides(t *testing.T) {
	m := baseConfig()
	m["quantization"] = map[string]any{"group_size": 64.0, "bits": 8.0, "mode": "affine",
		"language_model.model.layers.0.mlp.down_proj": false,
		"language_model.model.layers.1.mlp.up_proj":   map[string]any{"bits": 4.0, "group_size": 32.0}}
	_, q, err := parseConfig("x/config.json", mustJSON(t, m))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path        string
		bits, group int
		ok          bool
	}{
		{"language_model.model.layers.0.mlp.down_proj", 0, 0, false},
		{"language_model.model.layers.1.mlp.up_proj", 4, 32, true},
		{"language_model.model.layers.1.mlp.gate_proj", 8, 64, true},
	} {
		b, g, ok := q.forModule(c.path)
		if b != c.bits || g != c.group || ok != c.ok {
			t.Errorf("%s: %d %d %v, want %d %d %v", c.path, b, g, ok, c.bits, c.group, c.ok)
		}
	}
}
