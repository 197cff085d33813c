package metal_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/internal/testenv"
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
)

// The whole Qwen3.5 graph through the emulated Metal backend, against the
// transformers fp32 goldens. Activations are float32 throughout, so the
// tolerance is the fp32 one of testdata/SOURCES.md: logits within 1e-4
// relative; the final normed hidden states within 1e-4 relative over the
// whole [T, H] matrix and 5e-4 per position (the tiny random checkpoint
// amplifies fp32 rounding in its DeltaNet decays; model's own tests explain
// and use the same bound).
const perPosTol = 5e-4

// goldenRuns are the checkpoints and cases run: the real prompt, one token
// and 65 (past a 64-position chunk) for the bf16 checkpoint, and one case of
// each MLX-quantised form (quantised GEMM and embedding inside the graph;
// their goldens are transformers on the exactly dequantised weights). The
// emulator is slow; the model package runs every case on the CPU backend.
// STARTLUX_METAL_FULL=1 runs every case of every goldens file here too.
var goldenRuns = []struct {
	dir, goldens string
	cases        []string
}{
	{"../testdata/tiny-qwen35", "../testdata/goldens/tiny-qwen35.goldens.safetensors", []string{"prompt", "rand1", "rand65"}},
	{"../testdata/tiny-qwen35-mlx-4bit", "../testdata/goldens/tiny-qwen35-mlx-4bit.goldens.safetensors", []string{"prompt"}},
	{"../testdata/tiny-qwen35-mlx-8bit", "../testdata/goldens/tiny-qwen35-mlx-8bit.goldens.safetensors", []string{"rand65"}},
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// underTest opens the backend under test (the emulator, or the GPU with
// -tags mactest), ending the test through testenv.Missing without the
// emulator's compiler.
func underTest(t *testing.T) tensor.Backend {
	t.Helper()
	be, err := metal.OpenUnderTest()
	if errors.Is(err, metal.ErrNoCompiler) {
		testenv.Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// loadUnderTest loads a checkpoint on the backend under test (the emulator,
// or the GPU with -tags mactest).
func loadUnderTest(t *testing.T, dir string) *model.Model {
	t.Helper()
	be := underTest(t)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestModelGoldens(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-model run through the emulator")
	}
	ctx := context.Background()
	for _, run := range goldenRuns {
		m := loadUnderTest(t, run.dir)
		H := m.Config.Hidden
		want := map[string]bool{}
		for _, c := range run.cases {
			want[c] = true
		}
		full := os.Getenv("STARTLUX_METAL_FULL") != ""
		for _, g := range goldens.Forwards(t, run.goldens, 0) {
			if !want[g.Name] && !full {
				continue
			}
			delete(want, g.Name)
			t.Run(strings.TrimPrefix(run.dir, "../testdata/")+"/"+g.Name, func(t *testing.T) {
				T := len(g.IDs)
				out, err := m.Forward(ctx, []model.Row{{IDs: g.IDs, Gather: seq(T)}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if r, rp := goldens.MaxRel(out[0], g.Norm, len(g.Norm)), goldens.MaxRel(out[0], g.Norm, H); r > 1e-4 || rp > perPosTol {
					t.Errorf("norm: relative error %.2e, per position %.2e", r, rp)
				}
				lg, err := m.Forward(ctx, []model.Row{{IDs: g.IDs, Gather: []int{T - 1}}}, m.Head())
				if err != nil {
					t.Fatal(err)
				}
				if r := goldens.MaxRel(lg[0], g.Logits, len(g.Logits)); r > 1e-4 {
					t.Errorf("logits_last: relative error %.2e", r)
				} else {
					t.Logf("T=%d logits rel %.2e, norm rel %.2e", T, r, goldens.MaxRel(out[0], g.Norm, len(g.Norm)))
				}
			})
		}
		if len(want) > 0 {
			t.Errorf("%s: cases %v not in the goldens", run.goldens, want)
		}
	}
}

// TestModelResumeAndBatch runs a prefix once, then several right-padded rows
// resuming from it in one batch (prefix attention, conv and delta states,
// padding), and holds each row to the same tokens run alone from scratch.
func TestModelResumeAndBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-model run through the emulator")
	}
	m := loadUnderTest(t, "../testdata/demo-decision")
	ctx := context.Background()
	ids := func(seed, n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32((seed*7919 + i*104729) % m.Config.Vocab)
		}
		return out
	}
	prefix := ids(1, 40)
	st, err := m.Prefill(ctx, nil, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Free()
	tails := [][]int32{ids(2, 1), ids(3, 2), ids(4, 9)}
	var rows []model.Row
	for _, tl := range tails {
		rows = append(rows, model.Row{Prefix: st, IDs: tl, Gather: seq(len(tl))})
	}
	got, err := m.Forward(ctx, rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	H := m.Config.Hidden
	for i, tl := range tails {
		full := append(append([]int32{}, prefix...), tl...)
		want, err := m.Forward(ctx, []model.Row{{IDs: full, Gather: seq(len(full))[len(prefix):]}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := goldens.MaxRel(got[i], want[0], H); r > 1e-5 {
			t.Errorf("row %d (%d tokens after a %d-token prefix): relative error %.2e against one pass", i, len(tl), len(prefix), r)
		}
	}
}
