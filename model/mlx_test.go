package model

import (
	"context"
	"testing"

	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/tensor"
)

// TestMLXQuantised holds the mlx-community layout (language_model.model.*,
// norms stored pre-shifted, conv [D, K, 1]) with 4-bit group-32 and 8-bit
// group-64 affine quantisation to the goldens made by transformers on the
// exactly dequantised weights.
func TestMLXQuantised(t *testing.T) {
	for _, c := range []struct{ dir, goldens string }{
		{"../testdata/tiny-qwen35-mlx-4bit", "../testdata/goldens/tiny-qwen35-mlx-4bit.goldens.safetensors"},
		{"../testdata/tiny-qwen35-mlx-8bit", "../testdata/goldens/tiny-qwen35-mlx-8bit.goldens.safetensors"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			m := loadTiny(t, c.dir)
			if m.normShift != 0 {
				t.Errorf("norm shift %v, want 0 for pre-shifted MLX norms", m.normShift)
			}
			if m.embed.Quant == nil || m.layers[0].mlp.gate.Quant == nil {
				t.Fatal("quantised weights not recognised")
			}
			if m.embed.DType != tensor.U32 {
				t.Errorf("embedding stored as %s", m.embed.DType)
			}
			H := m.Config.Hidden
			for _, g := range goldens.Forwards(t, c.goldens, 0) {
				norm := hidden(t, m, nil, g.IDs)
				if r, rp := goldens.MaxRel(norm, g.Norm, len(g.Norm)), goldens.MaxRel(norm, g.Norm, H); r > 1e-4 || rp > perPosTol {
					t.Errorf("%s: norm: relative error %.2e, per position %.2e", g.Name, r, rp)
				}
				out := forwardLogits(t, m, g.IDs)
				if r := goldens.MaxRel(out, g.Logits, m.Config.Vocab); r > 1e-4 {
					t.Errorf("%s: logits_last: relative error %.2e", g.Name, r)
				}
				// The letter readout: a few quantised head rows alone.
				pick := []int{4095, 0, 1234}
				part, err := m.Forward(context.Background(), []Row{{IDs: g.IDs, Gather: []int{len(g.IDs) - 1}}}, m.HeadRows(pick))
				if err != nil {
					t.Fatal(err)
				}
				want := []float32{out[4095], out[0], out[1234]}
				if r := goldens.MaxRel(part[0], want, len(want)); r > 1e-5 {
					t.Errorf("%s: head rows %v give %v, full head %v", g.Name, pick, part[0], want)
				}
			}
		})
	}
}
