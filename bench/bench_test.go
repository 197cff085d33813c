package bench

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
	"time"
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
