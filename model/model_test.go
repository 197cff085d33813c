package model

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

// TestGoldens holds every layer's output, the final norm and the last
// position's logits to the transformers fp32 references, for the bare and
// the multimodal-wrapper forms of the same weights.
//
// Tolerances: logits_last within 1e-4 relative; each layer's output and the
// norm within 1e-4 relative over the whole [T, H] matrix and within
// perPosTol per position vector. The per-position bound is looser than 1e-4
// because the tiny random checkpoint is ill-conditioned: its DeltaNet decays
// amplify 1-ulp differences (torch's fp32 softplus rounds differently from a
// correctly rounded one in ~18% of inputs) about a hundredfold, so the
// goldens themselves are up to 1.9e-4 per position away from the same
// forward pass evaluated in float64 (rand64, rand300), and this engine is up
// to 1.5e-4 away from it in another direction.
const perPosTol = 5e-4

// The tiny random checkpoint amplifies fp32 rounding (see perPosTol), so
// batching and resuming, which change rounding only, are held to 1e-5 on the
// trained demo checkpoint and to perPosTol on the tiny one.
func invarianceTol(dir string) float64 {
	if dir == tinyDir {
		return perPosTol
	}
	return 1e-5
}
func TestGoldens(t *testing.T) {
	for _, dir := range []string{tinyDir, tinyVLDir} {
		t.Run(dir, func(t *testing.T) {
			m := loadTiny(t, dir)
			c := m.Config
			H := c.Hidden
			cases := goldens.Forwards(t, goldenFile, c.Layers)
			layers := make([][]float32, c.Layers)
			m.layerHook = func(i int, h tensor.Tensor, rows int) {
				layers[i] = make([]float32, rows*H)
				if err := m.be.Read(context.Background(), h, 0, layers[i]); err != nil {
					t.Fatal(err)
				}
			}
			for _, g := range cases {
				T := len(g.IDs)
				norm := hidden(t, m, nil, g.IDs)
				for i, want := range g.Layers {
					if want == nil {
						continue
					}
					if r, rp := goldens.MaxRel(layers[i], want, len(want)), goldens.MaxRel(layers[i], want, H); r > 1e-4 || rp > perPosTol {
						t.Errorf("%s: layer %d: relative error %.2e, per position %.2e", g.Name, i, r, rp)
					}
				}
				if r, rp := goldens.MaxRel(norm, g.Norm, len(g.Norm)), goldens.MaxRel(norm, g.Norm, H); r > 1e-4 || rp > perPosTol {
					t.Errorf("%s: norm: relative error %.2e, per position %.2e", g.Name, r, rp)
				}
				out, err := m.Forward(context.Background(), []Row{{IDs: g.IDs, Gather: []int{T - 1}}}, m.Head())
				if err != nil {
					t.Fatal(err)
				}
				if r := goldens.MaxRel(out[0], g.Logits, c.Vocab); r > 1e-4 {
					t.Errorf("%s: logits_last: relative error %.2e", g.Name, r)
				}
			}
		})
	}
}

// TestHeadRows checks that projecting onto a few LM-head rows gives the same
// numbers as those entries of the full logits.
func TestHeadRows(t *testing.T) {
	m := loadTiny(t, tinyDir)
	g := goldens.Forwards(t, goldenFile, 0)[0]
	rows := []Row{{IDs: g.IDs, Gather: []int{0, len(g.IDs) - 1}}}
	full, err := m.Forward(context.Background(), rows, m.Head())
	if err != nil {
		t.Fatal(err)
	}
	pick := []int{4095, 7, 100, 7}
	part, err := m.Forward(context.Background(), rows, m.HeadRows(pick))
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config.Vocab
	for gi := range 2 {
		for j, v := range pick {
			a, b := part[0][gi*len(pick)+j], full[0][gi*V+v]
			if d := a - b; d > 1e-5*max(1, abs32(b)) || -d > 1e-5*max(1, abs32(b)) {
				t.Errorf("gather %d row %d: %v vs full %v", gi, v, a, b)
			}
		}
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// TestResume checks that a prefix state followed by the rest equals one
// pass, including a state made from a state, at chunk edges and inside
// chunks, and that using a state never changes it. Both test checkpoints
// end in a full-attention layer; a 4-layer cut of the tiny one ends in a
// DeltaNet layer, whose state a keeping pass makes without its output.
func TestResume(t *testing.T) {
	tests := []struct {
		name string
		dir  func(t *testing.T) string
		tol  float64
	}{
		{"tiny", func(*testing.T) string { return tinyDir }, perPosTol},
		{"demo", func(*testing.T) string { return demoDir }, 1e-5},
		{"tiny, last layer DeltaNet", func(t *testing.T) string { return firstLayers(t, tinyDir, 4) }, perPosTol},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { testResume(t, tc.dir(t), tc.tol) })
	}
}

// firstLayers returns a copy of the checkpoint in dir cut to its first n
// layers.
func firstLayers(t *testing.T, dir string, n int) string {
	return rewrite(t, dir, func(cfg map[string]any, ents []safetensors.Entry) []safetensors.Entry {
		cfg["num_hidden_layers"] = n
		cfg["layer_types"] = cfg["layer_types"].([]any)[:n]
		var kept []safetensors.Entry
		for _, e := range ents {
			var layer int
			if _, err := fmt.Sscanf(e.Name, "model.layers.%d.", &layer); err == nil && layer >= n {
				continue
			}
			kept = append(kept, e)
		}
		return kept
	})
}

func testResume(t *testing.T, dir string, tol float64) {
	m := loadTiny(t, dir)
	H := m.Config.Hidden
	var ids []int32
	for _, g := range goldens.Forwards(t, goldenFile, 0) {
		if g.Name == "rand300" {
			ids = inVocab(g.IDs[:150], m.Config.Vocab)
		}
	}
	whole := hidden(t, m, nil, ids)
	ctx := context.Background()
	for _, split := range [][]int{{1}, {2}, {3, 5}, {64}, {70, 130}, {63, 64, 65}} {
		t.Run(fmt.Sprint(split), func(t *testing.T) {
			var st *State
			prev := 0
			for _, s := range split {
				next, err := m.Prefill(ctx, st, ids[prev:s])
				if err != nil {
					t.Fatal(err)
				}
				if next.Len() != s {
					t.Fatalf("state covers %d positions, want %d", next.Len(), s)
				}
				if st != nil {
					st.Free()
				}
				st, prev = next, s
			}
			before := stateBits(t, st)
			got := hidden(t, m, st, ids[prev:])
			if r := goldens.MaxRel(got, whole[prev*H:], H); r > tol {
				t.Errorf("resumed at %v: relative error %.2e", split, r)
			}
			after := stateBits(t, st)
			if !equalBits(before, after) {
				t.Error("using the state changed it")
			}
			st.Free()
		})
	}
}

func equalBits(a, b [][]uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

// TestBatch checks that rows of different lengths, with and without
// (different, shared) prefixes, give in one batch what each gives alone,
// and that the prefixes are left bit-identical.
func TestBatch(t *testing.T) {
	for _, dir := range []string{tinyDir, demoDir} {
		t.Run(dir, func(t *testing.T) { testBatch(t, dir) })
	}
}

func testBatch(t *testing.T, dir string) {
	m := loadTiny(t, dir)
	H := m.Config.Hidden
	ctx := context.Background()
	var ids []int32
	for _, g := range goldens.Forwards(t, goldenFile, 0) {
		if g.Name == "prompt" {
			ids = inVocab(g.IDs, m.Config.Vocab)
		}
	}
	p1, err := m.Prefill(ctx, nil, ids[:20])
	if err != nil {
		t.Fatal(err)
	}
	p2, err := m.Prefill(ctx, nil, ids[30:37])
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Free()
	defer p2.Free()
	rows := []Row{
		{Prefix: p1, IDs: ids[20:90], Gather: []int{0, 5, 69}},
		{IDs: ids[:3], Gather: []int{2, 0}},
		{Prefix: p2, IDs: ids[40:41], Gather: []int{0}},
		{Prefix: p1, IDs: ids[50:80], Gather: seq(30)},
		{IDs: ids[10:76], Gather: []int{65, 64, 63, 1}},
	}
	b1, b2 := stateBits(t, p1), stateBits(t, p2)
	for _, head := range []*tensor.Weight{nil, m.HeadRows([]int{1, 2, 3, m.Config.Vocab - 1})} {
		width := H
		if head != nil {
			width = head.Rows()
		}
		batch, err := m.Forward(ctx, rows, head)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			alone, err := m.Forward(ctx, []Row{r}, head)
			if err != nil {
				t.Fatal(err)
			}
			if len(batch[i]) != len(r.Gather)*width {
				t.Fatalf("row %d: %d floats, want %d", i, len(batch[i]), len(r.Gather)*width)
			}
			if e := goldens.MaxRel(batch[i], alone[0], width); e > invarianceTol(dir) {
				t.Errorf("row %d (head %v): batch vs alone relative error %.2e", i, head != nil, e)
			}
		}
	}
	if !equalBits(b1, stateBits(t, p1)) || !equalBits(b2, stateBits(t, p2)) {
		t.Error("a batch changed a prefix state")
	}
}

func TestForwardRejects(t *testing.T) {
	m := loadTiny(t, tinyDir)
	ctx := context.Background()
	other := loadTiny(t, tinyDir)
	st, err := other.Prefill(ctx, nil, []int32{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	freed, err := m.Prefill(ctx, nil, []int32{1})
	if err != nil {
		t.Fatal(err)
	}
	freed.Free()
	cases := []struct {
		name string
		rows []Row
		want string
	}{
		{"no rows", nil, "no rows"},
		{"empty row", []Row{{IDs: nil}}, "no tokens"},
		{"bad id", []Row{{IDs: []int32{1, 4096}}}, "outside the vocabulary"},
		{"bad gather", []Row{{IDs: []int32{1}, Gather: []int{1}}}, "gather index"},
		{"foreign prefix", []Row{{Prefix: st, IDs: []int32{1}}}, "another model"},
		{"freed prefix", []Row{{Prefix: freed, IDs: []int32{1}}}, "freed"},
	}
	for _, c := range cases {
		if _, err := m.Forward(ctx, c.rows, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := m.Prefill(ctx, nil, nil); err == nil {
		t.Error("empty prefill accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Forward(cctx, []Row{{IDs: []int32{1}, Gather: []int{0}}}, nil); err == nil {
		t.Error("cancelled context ignored")
	}
}

// TestGatheredTail checks that running the last layer's row-wise part on the
// gathered rows only (the normal path) agrees with running it on every row
// (the path taken while a layer hook watches).
func TestGatheredTail(t *testing.T) {
	for _, dir := range []string{demoDir, tinyDir} {
		m := loadTiny(t, dir)
		ids := make([]int32, 70)
		for i := range ids {
			ids[i] = int32((i*53%4000 + 3) % m.Config.Vocab)
		}
		rows := []Row{{IDs: ids, Gather: []int{69, 3, 40}}, {IDs: ids[:20], Gather: []int{19}}}
		for _, head := range []*tensor.Weight{nil, m.Head()} {
			short, err := m.Forward(context.Background(), rows, head)
			if err != nil {
				t.Fatal(err)
			}
			m.layerHook = func(int, tensor.Tensor, int) {}
			full, err := m.Forward(context.Background(), rows, head)
			m.layerHook = nil
			if err != nil {
				t.Fatal(err)
			}
			width := m.Config.Hidden
			if head != nil {
				width = head.Rows()
			}
			for i := range rows {
				if r := goldens.MaxRel(short[i], full[i], width); r > invarianceTol(dir) {
					t.Errorf("%s row %d (head %v): gathered tail differs by %.2e", dir, i, head != nil, r)
				}
			}
		}
	}
}

// TestKeptStateWithoutLastOutput checks that a keeping pass, which skips
// the last layer's work after its mixer's state (the normal path), keeps
// the same state bit for bit as a pass that runs the whole last layer (the
// path taken while a layer hook watches), for a last full-attention layer
// and a last DeltaNet layer, from scratch and after a prefix.
func TestKeptStateWithoutLastOutput(t *testing.T) {
	dirs := map[string]string{"full attention last": tinyDir, "DeltaNet last": firstLayers(t, tinyDir, 4)}
	for name, dir := range dirs {
		t.Run(name, func(t *testing.T) {
			m := loadTiny(t, dir)
			ids := make([]int32, 90)
			for i := range ids {
				ids[i] = int32(i*71%4000 + 5)
			}
			ctx := context.Background()
			prefix, err := m.Prefill(ctx, nil, ids[:30])
			if err != nil {
				t.Fatal(err)
			}
			defer prefix.Free()
			for _, p := range []*State{nil, prefix} {
				short, err := m.Prefill(ctx, p, ids[30:])
				if err != nil {
					t.Fatal(err)
				}
				m.layerHook = func(int, tensor.Tensor, int) {}
				full, err := m.Prefill(ctx, p, ids[30:])
				m.layerHook = nil
				if err != nil {
					t.Fatal(err)
				}
				if !equalBits(stateBits(t, short), stateBits(t, full)) {
					t.Errorf("prefix %d: kept states differ", p.Len())
				}
				short.Free()
				full.Free()
			}
		})
	}
}
