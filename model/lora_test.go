package model

import (
	"strconv"
	"strings"
	"testing"

	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

const (
	loraDir          = "../testdata/tiny-qwen35-lora"
	rsloraDir        = "../testdata/tiny-qwen35-rslora"
	loraMergedGolden = "../testdata/goldens/tiny-qwen35-lora-merged.goldens.safetensors"
)

func loadAdapter(t testing.TB, dir string) *Adapter {
	t.Helper()
	a, err := LoadAdapter(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// TestLoRAMergeGoldens holds the merged base (scale 1, both adapters) to the
// references made by merging in fp32 and rounding once to bf16, and checks
// that the merge moved the outputs away from the base's.
func TestLoRAMergeGoldens(t *testing.T) {
	f, err := safetensors.Open(loraMergedGolden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	base := goldens.Forwards(t, goldenFile, 0)
	ids := map[string]goldens.Forward{}
	for _, g := range base {
		ids[g.Name] = g
	}
	for _, c := range []struct{ name, dir string }{{"lora", loraDir}, {"rslora", rsloraDir}} {
		t.Run(c.name, func(t *testing.T) {
			ad := loadAdapter(t, c.dir)
			m, err := Load(tinyDir, newBackend(t), LoadOptions{Adapter: ad, LoRAScale: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got, want := m.MergedLoRA(), ad.Pairs(); got != want || want != 38 {
				t.Errorf("merged %d pairs, adapter has %d, want 38", got, want)
			}
			H := m.Config.Hidden
			for _, cs := range []string{"prompt", "rand65"} {
				g, ok := ids[cs]
				if !ok {
					t.Fatalf("no ids for case %s", cs)
				}
				wantNorm := f.Tensor(c.name + "." + cs + ".norm").Weight().Float32s()
				wantLogits := f.Tensor(c.name + "." + cs + ".logits_last").Weight().Float32s()
				norm := hidden(t, m, nil, g.IDs)
				if r, rp := goldens.MaxRel(norm, wantNorm, len(wantNorm)), goldens.MaxRel(norm, wantNorm, H); r > 1e-4 || rp > perPosTol {
					t.Errorf("%s: norm: relative error %.2e, per position %.2e", cs, r, rp)
				}
				logits := forwardLogits(t, m, g.IDs)
				if r := goldens.MaxRel(logits, wantLogits, len(wantLogits)); r > 1e-4 {
					t.Errorf("%s: logits_last: relative error %.2e", cs, r)
				}
				// The adapter must matter: the base's logits are far off.
				if r := goldens.MaxRel(g.Logits, wantLogits, len(wantLogits)); r < 1e-2 {
					t.Errorf("%s: the base's logits are within %.2e of the merged ones: the check cannot tell", cs, r)
				}
			}
		})
	}
}

// TestLoRAScale checks the merge rule on the weights themselves against a
// second computation: at scale s every adapted weight is
// round(W + s·alpha/r·B·A), and untouched weights are the stored bytes.
func TestLoRAScale(t *testing.T) {
	ad := loadAdapter(t, loraDir)
	const scale = 0.8
	m, err := Load(tinyDir, newBackend(t), LoadOptions{Adapter: ad, LoRAScale: scale})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	plain := loadTiny(t, tinyDir)
	factor := 8.0 / 4 * scale
	checked := 0
	for i := range m.layers {
		for _, name := range []string{"mlp.up_proj", "mlp.down_proj", "self_attn.q_proj", "linear_attn.in_proj_qkv", "linear_attn.in_proj_b"} {
			key := "layers." + strconv.Itoa(i) + "." + name + ".weight"
			c := struct {
				name     string
				got, was *tensor.Weight
			}{name, weightNamed(m, key), weightNamed(plain, key)}
			if c.got == nil {
				continue
			}
			stem := "base_model.model.model.layers." + strconv.Itoa(i) + "." + c.name
			var pair *loraPair
			for k := range ad.pairs {
				if ad.pairs[k].stem == stem {
					pair = &ad.pairs[k]
				}
			}
			got, was := c.got.Float32s(), c.was.Float32s()
			if c.got.DType != c.was.DType {
				t.Errorf("%s: dtype %s, stored %s", stem, c.got.DType, c.was.DType)
			}
			if pair == nil { // in_proj_b is not adapted
				if string(c.got.Data) != string(c.was.Data) {
					t.Errorf("%s: not adapted, yet changed", stem)
				}
				continue
			}
			a, b := pair.a.Weight().Float32s(), pair.b.Weight().Float32s()
			out, in := c.was.Shape[0], c.was.Shape[1]
			for o := range out {
				for j := range in {
					var d float64
					for k := range 4 {
						d += float64(b[o*4+k]) * float64(a[k*in+j])
					}
					want := float64(was[o*in+j]) + d*factor
					// One bf16 rounding: half an ulp of 8 significant bits,
					// plus the float32 accumulation's slack.
					if diff := want - float64(got[o*in+j]); diff*diff > (want*want)/(256*256)+1e-12 {
						t.Fatalf("%s[%d,%d] = %v, want %v", stem, o, j, got[o*in+j], want)
					}
				}
			}
			checked++
		}
	}
	if checked < 10 {
		t.Errorf("checked %d adapted weights, want at least 10", checked)
	}
}

// writeAdapter copies the tiny LoRA adapter to a temporary directory, letting
// edit change its config and tensors.
func writeAdapter(t *testing.T, edit func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry) string {
	t.Helper()
	return rewriteFiles(t, loraDir, AdapterConfigFile, AdapterWeightsFile, nil, edit)
}

// TestLoRARefusals checks that every adapter a weight merge cannot
// reproduce is refused with an error naming the cause.
func TestLoRARefusals(t *testing.T) {
	setCfg := func(k string, v any) func(map[string]any, []safetensors.Entry) []safetensors.Entry {
		return func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
			cfg[k] = v
			return ents
		}
	}
	rename := func(from, to string) func(map[string]any, []safetensors.Entry) []safetensors.Entry {
		return func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
			for i := range ents {
				ents[i].Name = strings.Replace(ents[i].Name, from, to, 1)
			}
			return ents
		}
	}
	tests := []struct {
		name string
		edit func(map[string]any, []safetensors.Entry) []safetensors.Entry
		base string // default tinyDir
		want string // at adapter read ("read:") or at load
	}{
		{"trainable_token_indices", setCfg("trainable_token_indices", []int{1, 2}), "", "field trainable_token_indices: is set"},
		{"use_dora", setCfg("use_dora", true), "", "field use_dora: is true"},
		{"rank_pattern", setCfg("rank_pattern", map[string]any{"q_proj": 8}), "", "field rank_pattern: is not empty"},
		{"alpha_pattern", setCfg("alpha_pattern", map[string]any{"q_proj": 16}), "", "field alpha_pattern: is not empty"},
		{"modules_to_save", setCfg("modules_to_save", []string{"lm_head"}), "", "field modules_to_save: is [lm_head]"},
		{"lora_bias", setCfg("lora_bias", true), "", "field lora_bias: is true"},
		{"bias", setCfg("bias", "all"), "", `field bias: is "all"`},
		{"not lora", setCfg("peft_type", "IA3"), "", `field peft_type: is "IA3"`},
		{"no rank", setCfg("r", nil), "", "field r: missing"},
		{"no target", rename("layers.5.mlp.up_proj", "layers.5.mlp.upp_proj"), "",
			"tensor base_model.model.model.layers.5.mlp.upp_proj.lora_A.weight has no target: the base has no model.layers.5.mlp.upp_proj.weight"},
		{"target past the layers", rename("layers.5.", "layers.9."), "", "has no target: the base has no model.layers.9."},
		{"target the text model does not use", rename("model.layers.5.mlp.up_proj", "model.visual.blocks.0.mlp.linear_fc1"), tinyVLDir,
			"adapter tensor base_model.model.model.visual.blocks.0.mlp.linear_fc1.lora_A.weight (target model.visual.blocks.0.mlp.linear_fc1.weight) has no target among the weights the text model uses"},
		{"dora magnitude", func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
			return append(ents, safetensors.F32("base_model.model.model.layers.0.mlp.up_proj.lora_magnitude_vector", []int{160}, make([]float32, 160)))
		}, "", "lora_magnitude_vector is not a lora_A or lora_B weight"},
		{"lone lora_A", func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
			out := ents[:0]
			for _, e := range ents {
				if e.Name != "base_model.model.model.layers.0.mlp.up_proj.lora_B.weight" {
					out = append(out, e)
				}
			}
			return out
		}, "", "layers.0.mlp.up_proj.lora_A.weight has no base_model.model.model.layers.0.mlp.up_proj.lora_B.weight"},
		{"wrong rank", setCfg("r", 8), "", "want rank r = 8"},
		{"quantised base", func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry { return ents },
			"../testdata/tiny-qwen35-mlx-4bit", "on a quantised base"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeAdapter(t, tc.edit)
			ad, err := LoadAdapter(dir)
			if err == nil {
				defer ad.Close()
				base := tc.base
				if base == "" {
					base = tinyDir
				}
				var m *Model
				m, err = Load(base, newBackend(t), LoadOptions{Adapter: ad})
				if err == nil {
					m.Close()
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
	// The unedited copy loads, so the refusals above are the edits'.
	ad := loadAdapter(t, writeAdapter(t, func(_ map[string]any, e []safetensors.Entry) []safetensors.Entry { return e }))
	m, err := Load(tinyDir, newBackend(t), LoadOptions{Adapter: ad})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// TestLoRAOnVLLayout merges the same adapter (named for the plain layout)
// into the multimodal-wrapper form of the base and gets the same outputs.
func TestLoRAOnVLLayout(t *testing.T) {
	ad := loadAdapter(t, loraDir)
	g := goldens.Forwards(t, goldenFile, 0)[0]
	var outs [][]float32
	for _, dir := range []string{tinyDir, tinyVLDir} {
		m, err := Load(dir, newBackend(t), LoadOptions{Adapter: ad, LoRAScale: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, hidden(t, m, nil, g.IDs))
		m.Close()
	}
	if r := goldens.MaxRel(outs[1], outs[0], len(outs[0])); r != 0 {
		t.Errorf("VL layout differs from the plain one by %.2e", r)
	}
}
