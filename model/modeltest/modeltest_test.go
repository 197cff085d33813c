package modeltest

import (
	"context"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

// tinyShape is a small configuration with every dimension a multiple of the
// quantisation group, so that both layouts load quickly.
func tinyShape() model.Config {
	return model.Config{Hidden: 64, Layers: 4, Intermediate: 128, Vocab: 512, Heads: 2, KVHeads: 1, HeadDim: 64,
		RopeDim: 16, RopeTheta: 1e7, Eps: 1e-6, Linear: Hybrid(4), NK: 2, NV: 4, DK: 32, DV: 32, ConvK: 4,
		Tied: true, MaxPositions: 262144}
}

func newBackend(t *testing.T) tensor.Backend {
	t.Helper()
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// TestWrite writes the checkpoint in both layouts, checks that both load
// with the configuration they were written for and run, and that every
// quantised matrix is the quantisation of the same random draws as the bf16
// one (each dequantised element within half a step plus bf16 rounding),
// while everything else is stored alike (norms shifted by one in the MLX
// layout).
func TestWrite(t *testing.T) {
	dirs := map[int]string{}
	for _, bits := range []int{0, 4, 8} {
		dir := t.TempDir()
		dirs[bits] = dir
		params, err := Write(dir, tinyShape(), Options{Bits: bits})
		if err != nil {
			t.Fatal(err)
		}
		// 4 layers: 3 DeltaNet (qkv 256, z 128, b/a 4 rows, out 64×128; conv 256×4; 4+4+32 vectors), 1 attention
		// (q 256, k/v 64, o 64×128; q/k norms 64 each); MLPs 3·64·128; 2 norms of 64 per layer; final norm 64.
		want := int64(3*(256*64+128*64+2*4*64+64*128+256*4+4+4+32) + (256*64 + 2*64*64 + 64*128 + 2*64) + 4*(3*64*128+2*64) + 64)
		if params != want {
			t.Errorf("bits %d: %d non-embedding parameters, want %d", bits, params, want)
		}
		m, err := model.Load(dir, newBackend(t), model.LoadOptions{})
		if err != nil {
			t.Fatalf("bits %d: %v", bits, err)
		}
		if !reflect.DeepEqual(m.Config, tinyShape()) {
			t.Errorf("bits %d: loaded as %+v, written as %+v", bits, m.Config, tinyShape())
		}
		if q := m.Embedding().Quant; (q != nil) != (bits != 0) || (q != nil && q.Bits != bits) {
			t.Errorf("bits %d: embedding quantisation %+v", bits, q)
		}
		out, err := m.Forward(context.Background(), []model.Row{{IDs: []int32{1, 2, 500, 7}, Gather: []int{0, 3}}}, m.Head())
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range out[0] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("bits %d: non-finite logits", bits)
			}
		}
		m.Close()
	}
	ref, err := safetensors.Open(filepath.Join(dirs[0], "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for _, bits := range []int{4, 8} {
		f, err := safetensors.Open(filepath.Join(dirs[bits], "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range ref.Names() {
			want := ref.Tensor(name).Weight()
			key := "language_model." + name
			base := strings.TrimSuffix(key, ".weight")
			if sc := f.Tensor(base + ".scales"); sc != nil {
				w := f.Tensor(key).Weight()
				w.Shape = want.Shape
				w.Quant = &tensor.Quant{Bits: bits, Group: 64, Scales: sc.Weight(), Biases: f.Tensor(base + ".biases").Weight()}
				if err := w.Validate(); err != nil {
					t.Fatal(err)
				}
				got, exp := make([]float32, w.Cols()), make([]float32, w.Cols())
				scales := sc.Weight()
				srow := make([]float32, w.Cols()/64)
				for r := range w.Rows() {
					w.Row(r, got)
					want.Row(r, exp)
					scales.Row(r, srow)
					for c := range got {
						tol := srow[c/64]*0.51 + 2*abs(exp[c])/128 + 1e-6
						if d := got[c] - exp[c]; d > tol || -d > tol {
							t.Fatalf("%d-bit %s (%d,%d): %v, bf16 %v", bits, name, r, c, got[c], exp[c])
						}
					}
				}
				continue
			}
			g := f.Tensor(key)
			if g == nil {
				t.Fatalf("%d-bit checkpoint lacks %s", bits, key)
			}
			a, b := g.Weight().Float32s(), want.Float32s()
			shift := float32(0)
			if strings.HasSuffix(name, "layernorm.weight") || strings.HasSuffix(name, "_norm.weight") || name == "model.norm.weight" {
				shift = 1
			}
			for i := range a {
				if a[i] != b[i]+shift {
					t.Fatalf("%d-bit %s[%d] = %v, bf16 %v (shift %v)", bits, name, i, a[i], b[i], shift)
				}
			}
		}
		f.Close()
	}
}

func abs(x float32) float32 { return float32(math.Abs(float64(x))) }

// TestWriteAdapter writes an adapter for a written checkpoint and merges it:
// the loader finds a target for every pair and merges one per adapted
// module and layer.
func TestWriteAdapter(t *testing.T) {
	c := tinyShape()
	base, ad := t.TempDir(), t.TempDir()
	if _, err := Write(base, c, Options{}); err != nil {
		t.Fatal(err)
	}
	targets := []string{"mlp.up_proj", "self_attn.o_proj"}
	if err := WriteAdapter(ad, c, AdapterOptions{Rank: 4, Alpha: 8, Targets: targets, StdB: 0.02, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	a, err := model.LoadAdapter(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Rank != 4 || a.Alpha != 8 {
		t.Errorf("adapter r %d alpha %v, want 4 and 8", a.Rank, a.Alpha)
	}
	m, err := model.Load(base, newBackend(t), model.LoadOptions{Adapter: a})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if want := c.Layers + 1; m.MergedLoRA() != want { // up_proj in every layer, o_proj in the one attention layer
		t.Errorf("%d pairs merged, want %d", m.MergedLoRA(), want)
	}
	if err := WriteAdapter(t.TempDir(), c, AdapterOptions{Rank: 4, Alpha: 8, Targets: []string{"mlp.upp_proj"}}); err == nil {
		t.Error("an adapter on no tensor was written")
	}
}

// TestWriteRefusals checks the errors of a configuration Write cannot write.
func TestWriteRefusals(t *testing.T) {
	c := tinyShape()
	c.Linear = c.Linear[:3]
	if _, err := Write(t.TempDir(), c, Options{}); err == nil || !strings.Contains(err.Error(), "3 layer kinds for 4 layers") {
		t.Errorf("mismatched layer kinds: %v", err)
	}
	if _, err := Write(t.TempDir(), tinyShape(), Options{Bits: 7}); err == nil || !strings.Contains(err.Error(), "7 bits") {
		t.Errorf("7 bits: %v", err)
	}
}
