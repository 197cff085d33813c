package model

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

// TestTensors holds Config.Tensors to the checkpoints transformers saved:
// in the Hugging Face and the multimodal layout, every tensor of the text
// model the file holds is listed once, under its stored key, with its stored
// shape; and the MLX conversion holds the same keys in its own layout.
func TestTensors(t *testing.T) {
	for _, tc := range []struct {
		dir    string
		layout Layout
		shapes bool // the conversion transposes the conv
	}{
		{tinyDir, LayoutHF, true},
		{tinyVLDir, LayoutVL, true},
		{mlx4Dir, LayoutMLX, false},
	} {
		t.Run(string(tc.layout), func(t *testing.T) {
			m := loadTiny(t, tc.dir)
			f, err := safetensors.Open(filepath.Join(tc.dir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			stored := map[string][]int{}
			for _, n := range f.Names() {
				if base, ok := strings.CutSuffix(n, ".scales"); ok {
					stored[base+".weight"] = nil // quantised: the packed shape is not the logical one
				} else if !ignored(n) && !strings.HasSuffix(n, ".biases") {
					if _, q := stored[n]; !q {
						stored[n] = f.Tensor(n).Shape
					}
				}
			}
			specs := m.Config.Tensors()
			seen := map[string]bool{}
			for _, s := range specs {
				key := tc.layout.Key(s.Name)
				shape, ok := stored[key]
				switch {
				case !ok:
					t.Errorf("%s (%s): not in the checkpoint", s.Name, key)
				case seen[key]:
					t.Errorf("%s listed twice", key)
				case tc.shapes && shape != nil && !slices.Equal(shape, s.Shape):
					t.Errorf("%s: listed as %v, stored %v", key, s.Shape, shape)
				}
				seen[key] = true
			}
			for k := range stored {
				if !seen[k] {
					t.Errorf("%s is in the checkpoint but not listed", k)
				}
			}
		})
	}
}

// TestTensorRoles checks each listed tensor's role against its name.
func TestTensorRoles(t *testing.T) {
	want := map[string]Role{
		"embed_tokens.weight": RoleEmbedding, "lm_head.weight": RoleHead, "norm.weight": RoleNorm,
		"input_layernorm.weight": RoleNorm, "post_attention_layernorm.weight": RoleNorm,
		"mlp.gate_proj.weight": RoleProjection, "mlp.up_proj.weight": RoleProjection, "mlp.down_proj.weight": RoleProjection,
		"self_attn.q_proj.weight": RoleProjection, "self_attn.k_proj.weight": RoleProjection,
		"self_attn.v_proj.weight": RoleProjection, "self_attn.o_proj.weight": RoleProjection,
		"self_attn.q_norm.weight": RoleNorm, "self_attn.k_norm.weight": RoleNorm,
		"linear_attn.in_proj_qkv.weight": RoleProjection, "linear_attn.in_proj_z.weight": RoleProjection,
		"linear_attn.out_proj.weight":  RoleProjection,
		"linear_attn.in_proj_a.weight": RoleHeadGate, "linear_attn.in_proj_b.weight": RoleHeadGate,
		"linear_attn.conv1d.weight": RoleConv, "linear_attn.A_log": RoleDecayLog, "linear_attn.dt_bias": RoleDecayBias,
		"linear_attn.norm.weight": RoleGatedNorm,
	}
	for _, s := range loadTiny(t, tinyDir).Config.Tensors() {
		name := s.Name
		var i int
		if _, err := fmt.Sscanf(name, "layers.%d.", &i); err == nil {
			name = strings.TrimPrefix(name, layerPrefix(i))
		}
		if r, ok := want[name]; !ok || s.Role != r {
			t.Errorf("%s: role %d, want %d", s.Name, s.Role, r)
		}
	}
}

// TestProjections checks the list of large projections two ways: by name
// against the layer types of the config, and by use: with every listed
// weight replaced by a renamed copy, every matrix product of a Forward uses
// either a replacement or one of the weights the list leaves out on purpose
// (DeltaNet's in_proj_a/b and the LM head), every replacement is used, and
// the results are bit-identical.
func TestProjections(t *testing.T) {
	for _, dir := range []string{tinyDir, demoDir} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rec := &matMulNames{Backend: newBackend(t)}
			m, err := Load(dir, rec, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c := m.Config
			var want []string
			for i, lin := range c.Linear {
				p := fmt.Sprintf("layers.%d.", i)
				for _, n := range []string{"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"} {
					want = append(want, p+n+".weight")
				}
				mix := []string{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"}
				if lin {
					mix = []string{"linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.out_proj"}
				}
				for _, n := range mix {
					want = append(want, p+n+".weight")
				}
			}
			var got []string
			for _, ref := range m.projections() {
				got = append(got, ref.Name)
				if w := *ref.w; len(w.Shape) != 2 || !slices.Equal(w.Shape, ref.Shape) {
					t.Errorf("%s: bound weight has shape %v, listed %v", ref.Name, w.Shape, ref.Shape)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("projections %v\nwant %v", got, want)
			}

			rows := []Row{{IDs: []int32{5, 9, 200, 31, 7}, Gather: []int{1, 4}}, {IDs: []int32{44, 3}, Gather: []int{1}}}
			head := m.HeadRows([]int{3, 4, 5})
			before, err := m.Forward(context.Background(), rows, head)
			if err != nil {
				t.Fatal(err)
			}
			const mark = "replaced:"
			for _, ref := range m.projections() {
				w := *ref.w
				r := *w
				r.Name = mark + w.Name
				*ref.w = &r
			}
			rec.reset()
			after, err := m.Forward(context.Background(), rows, head)
			if err != nil {
				t.Fatal(err)
			}
			used := map[string]bool{}
			for _, n := range rec.names {
				switch {
				case strings.HasPrefix(n, mark):
					used[n] = true
				case strings.HasSuffix(n, ".in_proj_a.weight"), strings.HasSuffix(n, ".in_proj_b.weight"), n == head.Name:
				default:
					t.Errorf("MatMul with %s, which is not listed", n)
				}
			}
			for _, ref := range m.projections() {
				if !used[(*ref.w).Name] {
					t.Errorf("%s is listed but its replacement was never used", ref.Name)
				}
			}
			for b := range before {
				if !slices.Equal(before[b], after[b]) {
					t.Errorf("row %d: %v before, %v with the renamed copies", b, before[b], after[b])
				}
			}
		})
	}
}

// matMulNames is a backend that records the name of every weight MatMul
// multiplies by.
type matMulNames struct {
	tensor.Backend
	mu    sync.Mutex
	names []string
}

func (b *matMulNames) MatMul(out, x tensor.Tensor, w *tensor.Weight, rows int) {
	b.mu.Lock()
	b.names = append(b.names, w.Name)
	b.mu.Unlock()
	b.Backend.MatMul(out, x, w, rows)
}

func (b *matMulNames) reset() {
	b.mu.Lock()
	b.names = nil
	b.mu.Unlock()
}
