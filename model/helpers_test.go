package model

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

const (
	tinyDir    = "../testdata/tiny-qwen35"
	tinyVLDir  = "../testdata/tiny-qwen35-vl"
	demoDir    = "../testdata/demo-decision"
	mlx4Dir    = "../testdata/tiny-qwen35-mlx-4bit"
	goldenFile = "../testdata/goldens/tiny-qwen35.goldens.safetensors"
)

func newBackend(t testing.TB) tensor.Backend {
	t.Helper()
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

func loadTiny(t testing.TB, dir string) *Model {
	t.Helper()
	m, err := Load(dir, newBackend(t), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// inVocab maps token ids taken from another checkpoint's goldens into a
// vocabulary of the given size (ids already inside it are kept).
func inVocab(ids []int32, vocab int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = id % int32(vocab)
	}
	return out
}

// hidden runs ids (after prefix) as one row and returns every position's
// final normed hidden state.
func hidden(t testing.TB, m *Model, prefix *State, ids []int32) []float32 {
	t.Helper()
	out, err := m.Forward(context.Background(), []Row{{Prefix: prefix, IDs: ids, Gather: seq(len(ids))}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// stateBits reads every tensor of a state back through the backend.
func stateBits(t testing.TB, s *State) [][]uint32 {
	t.Helper()
	var out [][]uint32
	for _, l := range s.layers {
		for _, x := range l.tensors() {
			v := make([]float32, x.Len())
			if err := s.m.be.Read(context.Background(), x, 0, v); err != nil {
				t.Fatal(err)
			}
			b := make([]uint32, len(v))
			for i, f := range v {
				b[i] = math.Float32bits(f)
			}
			out = append(out, b)
		}
	}
	return out
}

// rewrite copies the checkpoint in src to a new temporary directory,
// letting edit change config.json (as a map) and the tensors.
func rewrite(t testing.TB, src string, edit func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry) string {
	t.Helper()
	return rewriteFiles(t, src, "config.json", "model.safetensors", map[string]string{"format": "pt"}, edit)
}

// rewriteFiles copies a JSON config and a safetensors file (named cfgName
// and weightsName) from src to a new temporary directory, letting edit change
// the config (as a map) and the tensors; a nil result from edit leaves the
// tensors out.
func rewriteFiles(t testing.TB, src, cfgName, weightsName string, meta map[string]string, edit func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry) string {
	t.Helper()
	dst := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(src, cfgName))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(src, weightsName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ents []safetensors.Entry
	for _, n := range f.Names() {
		info := f.Tensor(n)
		ents = append(ents, safetensors.Entry{Name: n, DType: info.DType, Shape: append([]int(nil), info.Shape...),
			Data: append([]byte(nil), info.Data...)})
	}
	ents = edit(cfg, ents)
	cb, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, cfgName), cb, 0o644); err != nil {
		t.Fatal(err)
	}
	if ents != nil {
		if err := safetensors.WriteFile(filepath.Join(dst, weightsName), ents, meta); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// convert returns the entries with every float tensor re-stored as d.
func convert(ents []safetensors.Entry, d tensor.DType) []safetensors.Entry {
	for i, e := range ents {
		if !e.DType.IsFloat() {
			continue
		}
		w := &tensor.Weight{Name: e.Name, DType: e.DType, Shape: e.Shape, Data: e.Data}
		ents[i].Data = tensor.FromFloat32(e.Name, d, e.Shape, w.Float32s()).Data
		ents[i].DType = d
	}
	return ents
}

// forwardLogits returns the full LM head's logits at the last position.
func forwardLogits(t testing.TB, m *Model, ids []int32) []float32 {
	t.Helper()
	out, err := m.Forward(context.Background(), []Row{{IDs: ids, Gather: []int{len(ids) - 1}}}, m.Head())
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// weightNamed returns the model's weight of the given logical name, or nil.
func weightNamed(m *Model, name string) *tensor.Weight {
	for _, ref := range m.weights() {
		if ref.Name == name {
			return *ref.w
		}
	}
	return nil
}
