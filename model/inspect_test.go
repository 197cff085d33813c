package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseConfigCheckpoints holds ParseConfig to what Load does with the
// test checkpoints: the ones Load runs parse, with the storage their
// tensors actually have; the MoE one is refused for the reason Load gives.
func TestParseConfigCheckpoints(t *testing.T) {
	cases := []struct {
		dir, storage, err string
	}{
		{"tiny-qwen35", "bf16", ""},
		{"tiny-qwen35-vl", "bf16", ""},
		{"tiny-qwen35-mlx-4bit", "MLX 4-bit (group 32)", ""},
		{"tiny-qwen35-mlx-8bit", "MLX 8-bit (group 64)", ""},
		{"demo-decision", "bf16", ""},
		{"tiny-qwen35-moe", "", "mixture-of-experts"},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", c.dir)
			data, err := os.ReadFile(filepath.Join(dir, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			info, perr := ParseConfig("config.json", data)
			m, lerr := Load(dir, newBackend(t), LoadOptions{})
			if lerr == nil {
				m.Close()
			}
			if c.err != "" {
				if perr == nil || !strings.Contains(perr.Error(), c.err) {
					t.Fatalf("ParseConfig: %v, want an error saying %q", perr, c.err)
				}
				if lerr == nil {
					t.Fatalf("Load accepted what ParseConfig refuses")
				}
				return
			}
			if perr != nil || lerr != nil {
				t.Fatalf("ParseConfig: %v; Load: %v", perr, lerr)
			}
			if got := info.Storage(); got != c.storage {
				t.Errorf("Storage() = %q, want %q", got, c.storage)
			}
		})
	}
}

func TestParseConfigOtherFamilies(t *testing.T) {
	cases := []struct {
		name string
		edit func(m map[string]any) map[string]any
		want []string
	}{
		{"llama", func(m map[string]any) map[string]any {
			m["model_type"] = "llama"
			m["architectures"] = []any{"LlamaForCausalLM"}
			return m
		}, []string{"model_type", `"llama"`, "dense Qwen3.5"}},
		{"qwen3-next", func(m map[string]any) map[string]any { m["model_type"] = "qwen3_next"; return m },
			[]string{"model_type", `"qwen3_next"`}},
		{"architectures only", func(m map[string]any) map[string]any {
			delete(m, "model_type")
			m["architectures"] = []any{"Qwen2ForCausalLM"}
			return m
		}, []string{"architectures", "Qwen2ForCausalLM"}},
		{"wrapper of another text model", func(m map[string]any) map[string]any {
			m["model_type"] = "qwen3"
			return map[string]any{"model_type": "qwen3_5", "text_config": m}
		}, []string{"text_config.model_type", `"qwen3"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("x/config.json", mustJSON(t, tc.edit(baseConfig())))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range append(tc.want, "x/config.json") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// Without any family fields the config is judged by its fields alone.
	m := baseConfig()
	delete(m, "model_type")
	if _, err := ParseConfig("x/config.json", mustJSON(t, m)); err != nil {
		t.Errorf("a config without model_type: %v", err)
	}
}
