package main

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

// tinyBenchShape is a small shape with every dimension a multiple of the
// quantisation group, so the writer's both layouts can be loaded quickly.
func tinyBenchShape() benchShape {
	return benchShape{H: 64, L: 4, I: 128, V: 512, NH: 2, NKV: 1, HD: 64, NK: 2, NV: 4, DK: 32, DV: 32, K: 4}
}

// TestBenchCheckpoint writes the benchmark's checkpoint in both layouts,
// checks that both load and run, and that every quantised matrix is the
// quantisation of the same random draws as the bf16 one (each dequantised
// element within half a step plus bf16 rounding), while everything else is
// stored alike (norms shifted by one in the MLX layout).
func TestBenchCheckpoint(t *testing.T) {
	dirs := map[int]string{}
	for _, bits := range []int{0, 4, 8} {
		dir := t.TempDir()
		dirs[bits] = dir
		params, err := writeBenchCheckpoint(dir, tinyBenchShape(), bits)
		if err != nil {
			t.Fatal(err)
		}
		// 4 layers: 3 DeltaNet (qkv 256, z 128, b/a 4 rows, out 64×128; conv 256×4; 4+4+32 vectors), 1 attention
		// (q 256, k/v 64, o 64×128; q/k norms 64 each); MLPs 3·64·128; 2 norms of 64 per layer; final norm 64.
		want := int64(3*(256*64+128*64+2*4*64+64*128+256*4+4+4+32) + (256*64 + 2*64*64 + 64*128 + 2*64) + 4*(3*64*128+2*64) + 64)
		if params != want {
			t.Errorf("bits %d: %d non-embedding parameters, want %d", bits, params, want)
		}
		be, err := cpu.New(cpu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(dir, be, model.LoadOptions{})
		if err != nil {
			t.Fatalf("bits %d: %v", bits, err)
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

func TestBenchPrefillFlags(t *testing.T) {
	for _, args := range [][]string{{"--quant", "7"}, {"--tokens", "0"}, {"extra"}} {
		err := benchPrefill(context.Background(), &cmdEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}, args)
		if err == nil || strings.Contains(err.Error(), "panic") {
			t.Errorf("%v: %v", args, err)
		}
	}
}
