package model

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

func TestLoadRefusals(t *testing.T) {
	keep := func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry { return ents }
	const victim = "model.layers.3.linear_attn.in_proj_a.weight"
	cases := []struct {
		name string
		dir  func(t *testing.T) string
		want []string
	}{
		{"moe", func(t *testing.T) string { return "../testdata/tiny-qwen35-moe" },
			[]string{"tiny-qwen35-moe", "config.json", "model_type", "qwen3_5_moe_text", "mixture-of-experts"}},
		{"yarn", func(t *testing.T) string {
			return rewrite(t, tinyDir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
				cfg["rope_parameters"] = map[string]any{"rope_type": "yarn", "rope_theta": 1e7, "factor": 4.0,
					"original_max_position_embeddings": 1024.0}
				return ents
			})
		}, []string{"config.json", "rope_parameters.rope_type", "yarn"}},
		{"missing theta", func(t *testing.T) string {
			return rewrite(t, tinyDir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
				cfg["rope_parameters"] = map[string]any{"rope_type": "default"}
				return ents
			})
		}, []string{"config.json", "rope_theta", "missing"}},
		{"tensor removed", func(t *testing.T) string {
			return rewrite(t, tinyDir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
				return slices.DeleteFunc(ents, func(e safetensors.Entry) bool { return e.Name == victim })
			})
		}, []string{"model.safetensors", victim, "missing"}},
		{"wrong shape", func(t *testing.T) string {
			return rewrite(t, tinyDir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
				for i := range ents {
					if ents[i].Name == victim {
						ents[i].Shape = []int{8, 32} // same bytes as [4 64]
					}
				}
				return ents
			})
		}, []string{"model.safetensors", victim, "[8 32]", "want [4 64]"}},
		{"truncated", func(t *testing.T) string {
			d := rewrite(t, tinyDir, keep)
			p := filepath.Join(d, "model.safetensors")
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, st.Size()-100); err != nil {
				t.Fatal(err)
			}
			return d
		}, []string{"model.safetensors", "truncated", "tensor "}},
		{"no weights", func(t *testing.T) string {
			d := rewrite(t, tinyDir, keep)
			os.Remove(filepath.Join(d, "model.safetensors"))
			return d
		}, []string{"model.safetensors"}},
		{"no config", func(t *testing.T) string { return t.TempDir() }, []string{"config.json"}},
		{"sharded tensor missing", func(t *testing.T) string {
			d := rewrite(t, tinyDir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry { return nil })
			shard(t, tinyDir, d, victim)
			return d
		}, []string{"model.safetensors.index.json", victim, "missing"}},
		{"mlx bits disagree with config", func(t *testing.T) string {
			return rewrite(t, mlx4Dir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
				cfg["quantization"] = map[string]any{"group_size": 32.0, "bits": 8.0, "mode": "affine"}
				delete(cfg, "quantization_config")
				return ents
			})
		}, []string{"model.safetensors", "language_model.model.", "4 bits, group 32", "config.json says 8 bits"}},
		{"mlx mxfp4", func(t *testing.T) string {
			return rewrite(t, mlx4Dir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
				cfg["quantization"] = map[string]any{"group_size": 32.0, "bits": 4.0, "mode": "mxfp4"}
				return ents
			})
		}, []string{"config.json", "quantization.mode", "mxfp4"}},
		{"mlx without biases", func(t *testing.T) string {
			return rewrite(t, mlx4Dir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
				return slices.DeleteFunc(ents, func(e safetensors.Entry) bool { return strings.HasSuffix(e.Name, ".biases") })
			})
		}, []string{"model.safetensors", ".biases is missing", "mxfp4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Load(c.dir(t), newBackend(t), LoadOptions{})
			if err == nil {
				m.Close()
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestHugeConfigsRefused loads the tiny checkpoint under configs that
// claim far more than its tensors hold (the layer counts that took a daemon
// to "fatal error: runtime: out of memory", or to 3.4 GB before an error):
// each must be refused by name, quickly, having allocated next to nothing.
func TestHugeConfigsRefused(t *testing.T) {
	cases := []struct {
		name string
		edit func(cfg map[string]any)
		want []string
	}{
		{"a billion layers", func(cfg map[string]any) { cfg["num_hidden_layers"] = 1e9 },
			[]string{"num_hidden_layers", "1000000000", "more than the 1024"}},
		{"ten million layers", func(cfg map[string]any) { cfg["num_hidden_layers"] = 1e7 },
			[]string{"num_hidden_layers", "10000000", "more than the 1024"}},
		{"more layers than stored", func(cfg map[string]any) { cfg["num_hidden_layers"] = 1000.0 },
			[]string{"num_hidden_layers is 1000", "tensors hold 6 layers", "does not match"}},
		{"a huge vocabulary", func(cfg map[string]any) { cfg["vocab_size"] = 2e9 }, []string{"vocab_size", "more than"}},
		{"a huge width", func(cfg map[string]any) { cfg["hidden_size"] = 60000.0 },
			[]string{"embed_tokens.weight", "want [4096 60000]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := rewrite(t, tinyDir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
				c.edit(cfg)
				delete(cfg, "layer_types") // the kinds then follow full_attention_interval
				return ents
			})
			be := newBackend(t)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			m, err := Load(dir, be, LoadOptions{})
			runtime.ReadMemStats(&after)
			if err == nil {
				m.Close()
				t.Fatal("accepted")
			}
			for _, w := range append(c.want, "config.json") {
				if !strings.Contains(err.Error(), w) && !(w == "config.json" && strings.Contains(err.Error(), "model.safetensors")) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// The tiny checkpoint's tensors are mapped, not read: a refusal
			// allocates a few megabytes of bookkeeping at most.
			if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
				t.Errorf("the refused load allocated %d MB", got>>20)
			}
		})
	}
}

// TestTruncatedNamesTensor checks that a truncated file's error names the
// tensor that runs past the end.
func TestTruncatedNamesTensor(t *testing.T) {
	d := rewrite(t, tinyDir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry { return ents })
	p := filepath.Join(d, "model.safetensors")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	var hdr map[string]struct {
		Offsets []int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(raw[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	last, end := "", int64(0)
	for k, v := range hdr {
		if len(v.Offsets) == 2 && v.Offsets[1] > end {
			last, end = k, v.Offsets[1]
		}
	}
	size := int64(len(raw))
	os.Truncate(p, size-1)
	_, err = Load(d, newBackend(t), LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), last) {
		t.Errorf("error %v does not name %s", err, last)
	}
}

// outputs runs a few cases and returns the norms and last logits.
func outputs(t *testing.T, m *Model) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, g := range goldens.Forwards(t, goldenFile, 0) {
		if len(g.IDs) > 100 {
			continue
		}
		o, err := m.Forward(context.Background(), []Row{{IDs: g.IDs, Gather: seq(len(g.IDs))}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.Forward(context.Background(), []Row{{IDs: g.IDs, Gather: []int{len(g.IDs) - 1}}}, m.Head())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o[0], l[0])
	}
	return out
}

// TestStoredForms checks that the same weights re-saved as F32 give
// identical outputs and as F16 close ones, that a sharded copy and an
// in-memory file system load to the same model, and that the untied head is
// the lm_head tensor.
func TestStoredForms(t *testing.T) {
	base := loadTiny(t, tinyDir)
	want := outputs(t, base)
	if base.Config.Tied || base.Head() == base.Embedding() || base.Head().Name != "lm_head.weight" {
		t.Fatalf("tiny-qwen35 has an untied head; got tied=%v head %s", base.Config.Tied, base.Head().Name)
	}
	if base.Embedding().DType != tensor.BF16 {
		t.Errorf("embedding is %s, want the stored BF16", base.Embedding().DType)
	}
	f32 := rewrite(t, tinyDir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
		return convert(ents, tensor.F32)
	})
	f16 := rewrite(t, tinyDir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
		return convert(ents, tensor.F16)
	})
	sharded := rewrite(t, tinyDir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry { return nil })
	shard(t, tinyDir, sharded)

	cases := []struct {
		name  string
		load  func() (*Model, error)
		dtype tensor.DType
		tol   float64
	}{
		{"f32", func() (*Model, error) { return Load(f32, newBackend(t), LoadOptions{}) }, tensor.F32, 0},
		{"f16", func() (*Model, error) { return Load(f16, newBackend(t), LoadOptions{}) }, tensor.F16, 1e-3},
		{"sharded", func() (*Model, error) { return Load(sharded, newBackend(t), LoadOptions{}) }, tensor.BF16, 0},
		{"fs", func() (*Model, error) {
			return LoadFS(os.DirFS(tinyDir), "tiny", newBackend(t), LoadOptions{})
		}, tensor.BF16, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := c.load()
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if d := m.layers[0].mlp.gate.DType; d != c.dtype {
				t.Errorf("weights kept as %s, want %s", d, c.dtype)
			}
			got := outputs(t, m)
			for i := range want {
				n := m.Config.Hidden
				if i%2 == 1 {
					n = m.Config.Vocab
				}
				if r := goldens.MaxRel(got[i], want[i], n); r > c.tol {
					t.Errorf("output %d: relative difference %.2e, want ≤ %.0e", i, r, c.tol)
				}
			}
		})
	}
}

// shard splits src's model.safetensors into two files plus an index in dst,
// leaving out the tensors named in skip.
func shard(t *testing.T, src, dst string, skip ...string) {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var parts [2][]safetensors.Entry
	index := map[string]string{}
	for i, n := range f.Names() {
		if slices.Contains(skip, n) {
			continue
		}
		info := f.Tensor(n)
		parts[i%2] = append(parts[i%2], safetensors.Entry{Name: n, DType: info.DType, Shape: info.Shape, Data: info.Data})
		index[n] = fmt.Sprintf("model-%05d-of-00002.safetensors", i%2+1)
	}
	for i, p := range parts {
		if err := safetensors.WriteFile(filepath.Join(dst, fmt.Sprintf("model-%05d-of-00002.safetensors", i+1)), p, nil); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": index})
	if err := os.WriteFile(filepath.Join(dst, "model.safetensors.index.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadProgressAndBytes(t *testing.T) {
	var last, total int64
	calls := 0
	m, err := Load(tinyDir, newBackend(t), LoadOptions{Progress: func(d, tot int64) {
		if d < last {
			t.Errorf("progress went back from %d to %d", last, d)
		}
		last, total = d, tot
		calls++
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st, _ := os.Stat(filepath.Join(tinyDir, "model.safetensors"))
	if calls < 10 || last != total || total <= 0 || total > st.Size() {
		t.Errorf("progress: %d calls, last %d of %d (file %d bytes)", calls, last, total, st.Size())
	}
	if wb := m.WeightBytes(); wb != total {
		t.Errorf("WeightBytes %d, want every tensor's bytes %d", wb, total)
	}
}

// TestDemoModelFS loads the embedded demo checkpoint (tied head) from its
// file system and checks it runs exactly as the same files loaded by path.
func TestDemoModelFS(t *testing.T) {
	a, err := LoadFS(startlux.DemoModel(), "demo", newBackend(t), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := loadTiny(t, demoDir)
	if !a.Config.Tied || a.Head() != a.Embedding() {
		t.Error("demo checkpoint's head is not tied to its embedding")
	}
	ids := []int32{5, 9, 300, int32(a.Config.Vocab - 1), 17, 17, 2}
	for _, head := range []bool{false, true} {
		var ha, hb *tensor.Weight
		if head {
			ha, hb = a.Head(), b.Head()
		}
		oa, err := a.Forward(context.Background(), []Row{{IDs: ids, Gather: seq(len(ids))}}, ha)
		if err != nil {
			t.Fatal(err)
		}
		ob, err := b.Forward(context.Background(), []Row{{IDs: ids, Gather: seq(len(ids))}}, hb)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(oa[0], ob[0]) {
			t.Errorf("head %v: embedded and on-disk checkpoints differ", head)
		}
	}
}
