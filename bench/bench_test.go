package bench

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/model/modeltest"
	"github.com/startlux/startlux/tensor"
)

// TestSummarize checks the latency figures against values worked out by
// hand: 1..100 ms one after another, and the same run concurrently.
func TestSummarize(t *testing.T) {
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[99-i] = time.Duration(i+1) * time.Millisecond // unsorted on purpose
	}
	got := summarize(lat, 0)
	want := ServeResult{Throughput: 100 / 5.050, Mean: 50.5, P50: 50, P99: 99}
	if !near(got, want) {
		t.Errorf("one after another: %+v, want %+v", got, want)
	}
	if got := summarize(lat, 2*time.Second); !near(got, ServeResult{Throughput: 50, Mean: 50.5, P50: 50, P99: 99}) {
		t.Errorf("concurrent over 2 s: %+v", got)
	}
	if lat[0] != 100*time.Millisecond {
		t.Error("summarize sorted its argument")
	}
	rs := []ServeResult{{1, 10, 5, 9}, {3, 30, 4, 7}, {2, 20, 6, 8}}
	if got := medianResult(rs); got != (ServeResult{2, 20, 5, 8}) {
		t.Errorf("medianResult = %+v, want each figure's median", got)
	}
}

func near(a, b ServeResult) bool {
	eq := func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 }
	return eq(a.Throughput, b.Throughput) && eq(a.Mean, b.Mean) && eq(a.P50, b.P50) && eq(a.P99, b.P99)
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestAll checks that every benchmark has a name of its own and flags that
// parse, and that a benchmark without a backend runs from its flags.
func TestAll(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range All() {
		if seen[b.Name] || b.Summary == "" {
			t.Errorf("benchmark %q: a second one of that name, or no summary", b.Name)
		}
		seen[b.Name] = true
		fs := flag.NewFlagSet(b.Name, flag.ContinueOnError)
		run := b.Flags(fs)
		args := []string{}
		if b.Name == "tokenize" {
			args = []string{"--tokenizer", "../testdata/qwen3-tokenizer/tokenizer.json.gz", "--time", "10ms"}
		}
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		if b.UsesBackend {
			continue
		}
		r, err := run(context.Background(), Env{})
		if err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		var out bytes.Buffer
		if err := r.Print(&out); err != nil || strings.Count(out.String(), "MB/s (one goroutine)\n") != 2 {
			t.Errorf("%s: report %q, %v", b.Name, out.String(), err)
		}
	}
}

// TestPrefillInt8 runs the prefill benchmark's int8 comparison on a small
// configuration and checks its report: both kinds timed in every round,
// the projections' bytes half the bf16 ones plus the scales, and the final
// hidden states near float's.
func TestPrefillInt8(t *testing.T) {
	cfg := func(layers int) model.Config {
		c := modeltest.Qwen35Small(layers)
		c.Hidden, c.Intermediate, c.Vocab = 128, 256, 1000
		c.Heads, c.KVHeads, c.HeadDim, c.RopeDim = 2, 1, 64, 16
		c.NK, c.NV, c.DK, c.DV = 2, 4, 32, 32
		return c
	}
	env := Env{Open: func(int) (tensor.Backend, error) { return cpu.New(cpu.Options{}) }}
	r, err := Prefill(context.Background(), env, PrefillOptions{Tokens: 40, Runs: 3, Int8: true, Check: true, Layers: 4, config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	q := r.Int8
	if q == nil || len(q.BF16) != 3 || len(q.Int8) != 3 || q.Kernel == "" || q.Check == nil || q.Check.Positions != 40 {
		t.Fatalf("report %+v", q)
	}
	var scales int64
	c4 := cfg(4)
	for _, s := range c4.Tensors() {
		if s.Role == model.RoleProjection {
			scales += 8 * int64(s.Shape[0])
		}
	}
	if q.ProjInt8 != q.ProjBF16/2+scales {
		t.Errorf("int8 projections %d bytes, want half of bf16's %d plus %d", q.ProjInt8, q.ProjBF16, scales)
	}
	// Random weights at small widths give int8 errors of 10–20% (see
	// docs/int8.md); a broken int8 path gives errors of order one or NaN.
	if c := q.Check; !(c.Whole < 0.5 && c.Mean <= c.Max && c.Whole > 0) {
		t.Errorf("hidden-state check %+v", c)
	}
	var out bytes.Buffer
	if err := r.Print(&out); err != nil || !strings.Contains(out.String(), "int8 / bf16: ") || !strings.Contains(out.String(), "final hidden state") {
		t.Errorf("report %q, %v", out.String(), err)
	}
	t.Log(out.String())
	for _, o := range []PrefillOptions{{Tokens: 4, Runs: 1, Check: true}, {Tokens: 4, Runs: 1, Int8: true, Quant: 4}} {
		if _, err := Prefill(context.Background(), env, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// TestDecideInt8 runs the decide benchmark's int8 comparison on the demo
// model, briefly, and checks its report. The benchmark's questions are not
// the demo model's tasks and it answers choice and score at temperature 0.2,
// so a sound int8 path moves some of their probabilities by up to 0.3; a
// broken one moves them by order one.
func TestDecideInt8(t *testing.T) {
	env := Env{Open: func(int) (tensor.Backend, error) { return cpu.New(cpu.Options{}) }}
	r, err := Decide(context.Background(), env, DecideOptions{Iters: 2, EvidenceTokens: 100, Requests: 2, Int8: true})
	if err != nil {
		t.Fatal(err)
	}
	q := r.Int8
	if q == nil || q.Kernel == "" || len(q.ColdF) != 2 || len(q.ColdQ) != 2 || len(q.WarmF) != 2 || len(q.WarmQ) != 2 {
		t.Fatalf("report %+v", q)
	}
	if !(q.WeightBytesQ < q.WeightBytesF) || !(q.MaxDiff < 0.5) {
		t.Errorf("weights %d (int8) and %d, answers differ by %g", q.WeightBytesQ, q.WeightBytesF, q.MaxDiff)
	}
	var out bytes.Buffer
	if err := r.Print(&out); err != nil || !strings.Contains(out.String(), "int8 speedup") {
		t.Errorf("report %q, %v", out.String(), err)
	}
}
