package model

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/model/safetensors"
)

// TestWriteOutputs writes the outputs of every golden case of the tiny
// checkpoint and holds the file read back to the transformers goldens.
func TestWriteOutputs(t *testing.T) {
	m := loadTiny(t, tinyDir)
	for _, g := range goldens.Forwards(t, goldenFile, 0) {
		t.Run(g.Name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.safetensors")
			if err := m.WriteOutputs(context.Background(), g.IDs, path); err != nil {
				t.Fatal(err)
			}
			f, err := safetensors.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, tt := range []struct {
				name  string
				shape []int
				want  []float32
			}{
				{"norm", []int{len(g.IDs), m.Config.Hidden}, g.Norm},
				{"logits_last", []int{m.Config.Vocab}, g.Logits},
			} {
				got := f.Tensor(tt.name)
				if got == nil || fmt.Sprint(got.Shape) != fmt.Sprint(tt.shape) {
					t.Fatalf("%s missing or shaped wrong: %v, want shape %v", tt.name, got, tt.shape)
				}
				if r := goldens.MaxRel(got.Weight().Float32s(), tt.want, len(tt.want)); r > 1e-4 {
					t.Errorf("%s: relative error %.2e", tt.name, r)
				}
			}
		})
	}
	if err := m.WriteOutputs(context.Background(), nil, filepath.Join(t.TempDir(), "x")); err == nil {
		t.Error("no ids accepted")
	}
}
