package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/internal/work"
	"github.com/startlux/startlux/model/modeltest"
	"github.com/startlux/startlux/tensor"
	"github.com/startlux/startlux/tokenizer"
)

// benchDecide is "startlux bench decide": on the demo model (or --model),
// one request of 8 questions about one long evidence, cold then warm; and
// many single-question requests through DecideBatch versus one by one.
func benchDecide(ctx context.Context, env *cmdEnv, args []string) error {
	fset := flag.NewFlagSet("bench decide", flag.ContinueOnError)
	fset.SetOutput(env.stderr)
	modelDir := fset.String("model", "", "checkpoint `DIR` (default: the embedded demo model)")
	iters := fset.Int("iters", 5, "timed repetitions of each measurement (the median is shown)")
	evTokens := fset.Int("evidence-tokens", 1500, "evidence length of the 8-question request, in tokens")
	nBatch := fset.Int("requests", 64, "single-question requests in the batch comparison")
	threads := fset.Int("threads", 0, "CPU backend threads (0: all cores)")
	wide := fset.Int("wide-layers", 0, "instead of the demo model, a random-weight checkpoint of `N` layers with Qwen3.5-0.8B's layer shapes\n(every fourth full attention) and the demo's vocabulary, tokenizer and decision config, written to a temporary directory")
	backend := backendFlag(fset)
	if err := fset.Parse(args); err != nil {
		return err
	}
	if *iters < 1 || *nBatch < 1 || *evTokens < 1 || *wide < 0 {
		return fmt.Errorf("bench decide: --iters, --requests and --evidence-tokens must be positive, --wide-layers not negative")
	}
	if *wide > 0 {
		if *modelDir != "" {
			return fmt.Errorf("bench decide: --wide-layers and --model exclude each other")
		}
		dir, err := os.MkdirTemp("", "startlux-wide-")
		if err != nil {
			return fmt.Errorf("bench decide: %w", err)
		}
		defer os.RemoveAll(dir)
		fmt.Fprintf(env.stderr, "writing a checkpoint of %d layers with Qwen3.5-0.8B's layer shapes to %s\n", *wide, dir)
		if err := writeWideDemo(dir, *wide); err != nil {
			return fmt.Errorf("bench decide: --wide-layers: %w", err)
		}
		*modelDir = dir
	}
	be, err := openBackendThreads(*backend, *threads)
	if err != nil {
		return fmt.Errorf("bench decide: %w", err)
	}
	fsys := startlux.DemoModel()
	if *modelDir != "" {
		fsys = os.DirFS(*modelDir)
	}
	open := func(be tensor.Backend) (*decide.Engine, error) {
		if *modelDir == "" {
			return decide.OpenFS(fsys, "demo-decision (embedded)", be, decide.Options{})
		}
		return decide.Open(*modelDir, be, decide.Options{})
	}
	e, err := open(be)
	if err != nil {
		return fmt.Errorf("bench decide: %w", err)
	}
	defer e.Close()
	// A second engine, on a backend that counts, does every measured job
	// once more, untimed, to weigh each path's arithmetic.
	cnt := work.New(be)
	ce, err := open(cnt)
	if err != nil {
		return fmt.Errorf("bench decide: %w", err)
	}
	defer ce.Close()
	count := func(f func() error) (float64, error) {
		before := cnt.Counts()
		err := f()
		return float64(cnt.Counts().Sub(before).Total()) / 1e9, err
	}
	data, err := fs.ReadFile(fsys, "tokenizer.json")
	if err != nil {
		return fmt.Errorf("bench decide: %w", err)
	}
	tok, err := tokenizer.FromJSON(data)
	if err != nil {
		return fmt.Errorf("bench decide: %w", err)
	}
	info := e.Info()
	w := env.stdout
	label := filepath.Base(info.Path)
	if *wide > 0 {
		label = fmt.Sprintf("%d-layer model of Qwen3.5-0.8B's layer shapes (random weights, the demo's vocabulary)", *wide)
	}
	fmt.Fprintf(w, "decide benchmark: model %s, backend %s, GOOS/GOARCH %s/%s, preamble %d tokens\n",
		label, backendLabel(be), runtime.GOOS, runtime.GOARCH, info.PreambleTokens)

	// 1. One request of 8 questions about one long evidence: cold, then warm.
	ev, n := benchEvidence(tok, 1, *evTokens)
	req, err := decide.ParseJSON([]byte(`{"evidence": ` + ev + `, "questions": ` + benchQuestions + `}`))
	if err != nil {
		return fmt.Errorf("bench decide: %w", err)
	}
	var coldMS, warmMS []float64
	var cold, warm *decide.Response
	for i := 0; i <= *iters; i++ { // the first round warms up and is not counted
		e.ClearCache()
		t0 := time.Now()
		if cold, err = e.Decide(ctx, req); err != nil {
			return fmt.Errorf("bench decide: %w", err)
		}
		t1 := time.Now()
		if warm, err = e.Decide(ctx, req); err != nil {
			return fmt.Errorf("bench decide: %w", err)
		}
		t2 := time.Now()
		if i > 0 {
			coldMS = append(coldMS, ms(t1.Sub(t0)))
			warmMS = append(warmMS, ms(t2.Sub(t1)))
		}
	}
	ce.ClearCache()
	coldW, err := count(func() error { _, err := ce.Decide(ctx, req); return err })
	if err != nil {
		return fmt.Errorf("bench decide: %w", err)
	}
	warmW, err := count(func() error { _, err := ce.Decide(ctx, req); return err })
	if err != nil {
		return fmt.Errorf("bench decide: %w", err)
	}
	c, wm := median(coldMS), median(warmMS)
	ideal := float64(cold.Tokens) / float64(warm.Tokens)
	fmt.Fprintf(w, "\n8 questions about one evidence of %d tokens (median of %d):\n", n, *iters)
	fmt.Fprintf(w, "  cold  %8.2f ms/request   tokens %5d   cached_tokens %5d   work %6.2f GFLOP\n", c, cold.Tokens, cold.CachedTokens, coldW)
	fmt.Fprintf(w, "  warm  %8.2f ms/request   tokens %5d   cached_tokens %5d   work %6.2f GFLOP\n", wm, warm.Tokens, warm.CachedTokens, warmW)
	fmt.Fprintf(w, "  warm speedup %.2f×, ideal (cold tokens ÷ warm tokens) %.2f×: %.0f%% of ideal (goal ≥ 80%%)\n",
		c/wm, ideal, 100*c/wm/ideal)
	fmt.Fprintf(w, "  by work (cold GFLOP ÷ warm GFLOP) the ideal is %.2f×: the warm speedup is %.0f%% of it\n",
		coldW/warmW, 100*c/wm/(coldW/warmW))
	fmt.Fprintf(w, "  cold and warm probabilities differ by at most %.2g\n", maxDiff(cold, warm))

	// 2. Single-question requests, each about its own evidence: one by one
	// versus one DecideBatch.
	reqs := make([]*decide.Request, *nBatch)
	for i := range reqs {
		ev, _ := benchEvidence(tok, 100+i, 60)
		q := benchSingle[i%len(benchSingle)]
		if reqs[i], err = decide.ParseJSON([]byte(`{"evidence": ` + ev + `, "questions": {"q": ` + q + `}}`)); err != nil {
			return fmt.Errorf("bench decide: %w", err)
		}
	}
	var oneMS, batchMS []float64
	var one, batch []*decide.Response
	tokens := 0
	for i := 0; i <= *iters; i++ {
		e.ClearCache()
		one = one[:0]
		tokens = 0
		t0 := time.Now()
		for _, r := range reqs {
			resp, err := e.Decide(ctx, r)
			if err != nil {
				return fmt.Errorf("bench decide: %w", err)
			}
			one = append(one, resp)
			tokens += resp.Tokens
		}
		t1 := time.Now()
		var errs []error
		batch, errs = e.DecideBatch(ctx, reqs)
		t2 := time.Now()
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("bench decide: %w", err)
			}
		}
		if i > 0 {
			oneMS = append(oneMS, ms(t1.Sub(t0)))
			batchMS = append(batchMS, ms(t2.Sub(t1)))
		}
	}
	ce.ClearCache()
	oneW, err := count(func() error {
		for _, r := range reqs {
			if _, err := ce.Decide(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("bench decide: %w", err)
	}
	batchW, err := count(func() error { _, errs := ce.DecideBatch(ctx, reqs); return errors.Join(errs...) })
	if err != nil {
		return fmt.Errorf("bench decide: %w", err)
	}
	o, b := median(oneMS), median(batchMS)
	worst := 0.0
	for i := range one {
		worst = math.Max(worst, maxDiff(one[i], batch[i]))
	}
	k := float64(*nBatch)
	fmt.Fprintf(w, "\n%d single-question requests, %d tokens in all (median of %d):\n", *nBatch, tokens, *iters)
	fmt.Fprintf(w, "  one by one    %8.2f ms/request   %8.1f ms in all   work %6.2f GFLOP = %5.1f GFLOP/s\n", o/k, o, oneW, oneW/o*1e3)
	fmt.Fprintf(w, "  decide_batch  %8.2f ms/request   %8.1f ms in all   work %6.2f GFLOP = %5.1f GFLOP/s\n", b/k, b, batchW, batchW/b*1e3)
	fmt.Fprintf(w, "  batch throughput %.2f× one by one (goal ≥ 2×); probabilities differ by at most %.2g\n", o/b, worst)
	if sm, ok := be.(sgemmMeter); ok {
		// The machine's limit, measured now: twice the one-by-one
		// throughput means the batch's work done in half of o.
		sg, err := sm.MeasureSgemm(ctx, 512, 1024, 3584, time.Second)
		if err != nil {
			return fmt.Errorf("bench decide: sgemm: %w", err)
		}
		need := 2 * batchW / o * 1e3
		fmt.Fprintf(w, "  sgemm 512×1024×3584 on this backend now %.1f GFLOP/s; the batch runs at %.0f%% of it, and 2× one by one needs %.1f GFLOP/s = %.0f%% of it\n",
			sg, 100*batchW/b*1e3/sg, need, 100*need/sg)
	}
	if d := maxDiff(cold, warm); d > 1e-5 || worst > 1e-5 {
		return fmt.Errorf("bench decide: results depend on the prefix plan or batching (cold/warm %.2g, batch/one %.2g; want ≤ 1e-5)", d, worst)
	}
	return nil
}

// writeWideDemo writes to dir a random-weight checkpoint of the given
// number of layers with Qwen3.5-0.8B's layer shapes, and the embedded demo
// model's vocabulary size, tokenizer and decision files beside it.
func writeWideDemo(dir string, layers int) error {
	demo := startlux.DemoModel()
	raw, err := fs.ReadFile(demo, "config.json")
	if err != nil {
		return err
	}
	var cfg struct {
		Vocab int `json:"vocab_size"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("demo config.json: %w", err)
	}
	c := modeltest.Qwen35Small(layers)
	c.Vocab = cfg.Vocab
	if _, err := modeltest.Write(dir, c, modeltest.Options{}); err != nil {
		return err
	}
	entries, err := fs.ReadDir(demo, ".")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if name := e.Name(); !e.IsDir() && name != "config.json" && !strings.HasSuffix(name, ".safetensors") {
			b, err := fs.ReadFile(demo, name)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchQuestions are the 8 questions about the long evidence.
const benchQuestions = `{
	"row6": {"type": "noul", "instructions": "Does row 6 exist?"},
	"amount": {"type": "score", "instructions": "How much is on the page?", "criteria": ["empty", "some", "full"]},
	"stock": {"type": "noul", "instructions": "Is any item out of stock?"},
	"item": {"type": "choice", "instructions": "Which item appears first?", "criteria": {"a": "item 0", "b": "item 1", "c": "item 2", "d": "item 3"}},
	"row40": {"type": "noul", "instructions": "Does row 40 exist?"},
	"qty": {"type": "score", "instructions": "How large is the largest quantity?", "criteria": ["small", "medium", "large"]},
	"item7": {"type": "noul", "instructions": "Is item 7 listed?"},
	"kind": {"type": "choice", "instructions": "What is this page?", "criteria": {"inv": "an inventory", "menu": "a menu", "log": "a log"}}
}`

// benchSingle are the questions of the single-question requests, in turn.
var benchSingle = []string{
	`{"type": "noul", "instructions": "Does row 3 exist?"}`,
	`{"type": "score", "instructions": "How much is on the page?", "criteria": ["empty", "some", "full"]}`,
	`{"type": "choice", "instructions": "Which item appears first?", "criteria": {"a": "item 0", "b": "item 1", "c": "item 2"}}`,
	`{"type": "noul", "instructions": "Is any item out of stock?"}`,
}

// benchEvidence returns the JSON of a page of inventory rows about the given
// number of tokens long, and its token count.
func benchEvidence(tok *tokenizer.Tokenizer, seed, tokens int) (string, int) {
	var b strings.Builder
	for i := 0; ; i++ {
		fmt.Fprintf(&b, "Row %d: item %d, qty %d. ", i, (i*7+seed)%13, (i*31+seed*5)%17)
		ev := fmt.Sprintf(`{"page": %q}`, strings.TrimSpace(b.String()))
		if n := len(tok.Encode(ev)); n >= tokens {
			return ev, n
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// maxDiff is the largest difference between two responses' probabilities.
func maxDiff(a, b *decide.Response) float64 {
	worst := 0.0
	for i := range a.Answers {
		for j := range a.Answers[i].Probs {
			worst = math.Max(worst, math.Abs(a.Answers[i].Probs[j]-b.Answers[i].Probs[j]))
		}
	}
	return worst
}
