package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/internal/work"
	"github.com/startlux/startlux/model/modeltest"
	"github.com/startlux/startlux/tensor"
	"github.com/startlux/startlux/tokenizer"
)

// DecideOptions configures Decide.
type DecideOptions struct {
	Model          string // checkpoint directory ("": the embedded demo model)
	Iters          int    // timed repetitions of each measurement (the median is shown)
	EvidenceTokens int    // evidence length of the 8-question request
	Requests       int    // single-question requests in the batch comparison
	Threads        int    // CPU backend threads (0: all cores)
	// WideLayers, when not 0, measures instead of the demo model a
	// random-weight checkpoint of this many layers with Qwen3.5-0.8B's layer
	// shapes and the demo's vocabulary, tokenizer and decision config.
	WideLayers int
	// Int8 also opens the model with int8 projections (decide.Options.Int8)
	// and times its cold and warm requests against the float engine's,
	// alternated (see DecideInt8).
	Int8 bool
}

func (o *DecideOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.Model, "model", "", "checkpoint `DIR` (default: the embedded demo model)")
	fs.IntVar(&o.Iters, "iters", 5, "timed repetitions of each measurement (the median is shown)")
	fs.IntVar(&o.EvidenceTokens, "evidence-tokens", 1500, "evidence length of the 8-question request, in tokens")
	fs.IntVar(&o.Requests, "requests", 64, "single-question requests in the batch comparison")
	fs.IntVar(&o.Threads, "threads", 0, "CPU backend threads (0: all cores)")
	fs.BoolVar(&o.Int8, "int8", false, "also time the cold and warm request with int8 projections against float, alternated")
	fs.IntVar(&o.WideLayers, "wide-layers", 0, "instead of the demo model, a random-weight checkpoint of `N` layers with Qwen3.5-0.8B's layer shapes\n(every fourth full attention) and the demo's vocabulary, tokenizer and decision config, written to a temporary directory")
}

// DecideReport is what Decide measured: medians in milliseconds, the
// arithmetic of each path in GFLOP (counted in the same run) and the
// largest differences between the paths' probabilities.
type DecideReport struct {
	Engine
	Iters int

	// One request of 8 questions about one evidence of EvidenceTokens
	// tokens, cold then warm.
	EvidenceTokens int
	Cold, Warm     DecidePath
	ColdWarmDiff   float64

	// Requests single-question requests (RequestTokens in all), one by one
	// and in one DecideBatch.
	Requests, RequestTokens int
	OneByOne, Batch         DecidePath
	BatchDiff               float64

	// Sgemm is the backend's sgemm rate (GFLOP/s) after the runs, 0 if it
	// has none.
	Sgemm float64

	// Int8 is the int8 comparison (DecideOptions.Int8).
	Int8 *DecideInt8
}

// DecideInt8 is the cold and warm 8-question request on the float engine
// and on one with int8 projections, alternated round by round (float first
// in even rounds): milliseconds in the order run.
type DecideInt8 struct {
	Kernel                            string
	ColdF, WarmF, ColdQ, WarmQ        []float64
	WeightBytesF, WeightBytesQ        int64
	MaxDiff                           float64 // the largest |Δp| between the engines' answers
	OpenFloatSeconds, OpenInt8Seconds float64
}

// DecidePath is one path's measurement.
type DecidePath struct {
	MS                   float64 // median time
	Tokens, CachedTokens int     // of the (last) response
	GFLOP                float64
}

// Decide measures, on the demo model (or Model, or a WideLayers
// checkpoint), one request of 8 questions about one long evidence, cold then
// warm, and many single-question requests through DecideBatch against one
// by one. It returns the report with an error when the answers depend on
// the prefix plan or the batching (by more than 1e-5).
func Decide(ctx context.Context, env Env, o DecideOptions) (*DecideReport, error) {
	if o.Iters < 1 || o.Requests < 1 || o.EvidenceTokens < 1 || o.WideLayers < 0 {
		return nil, fmt.Errorf("--iters, --requests and --evidence-tokens must be positive, --wide-layers not negative")
	}
	modelDir := o.Model
	if o.WideLayers > 0 {
		if modelDir != "" {
			return nil, fmt.Errorf("--wide-layers and --model exclude each other")
		}
		dir, err := os.MkdirTemp("", "startlux-wide-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		env.logf("writing a checkpoint of %d layers with Qwen3.5-0.8B's layer shapes to %s\n", o.WideLayers, dir)
		if err := writeWideDemo(dir, o.WideLayers); err != nil {
			return nil, fmt.Errorf("--wide-layers: %w", err)
		}
		modelDir = dir
	}
	be, err := env.Open(o.Threads)
	if err != nil {
		return nil, err
	}
	fsys := startlux.DemoModel()
	if modelDir != "" {
		fsys = os.DirFS(modelDir)
	}
	openWith := func(be tensor.Backend, opts decide.Options) (*decide.Engine, error) {
		if modelDir == "" {
			return decide.OpenFS(fsys, "demo-decision (embedded)", be, opts)
		}
		return decide.Open(modelDir, be, opts)
	}
	open := func(be tensor.Backend) (*decide.Engine, error) { return openWith(be, decide.Options{}) }
	t0 := time.Now()
	e, err := open(be)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	openFloat := time.Since(t0)
	// A second engine, on a backend that counts, does every measured job
	// once more, untimed, to weigh each path's arithmetic.
	cnt := work.New(be)
	ce, err := open(cnt)
	if err != nil {
		return nil, err
	}
	defer ce.Close()
	count := func(f func() error) (float64, error) {
		before := cnt.Counts()
		err := f()
		return float64(cnt.Counts().Sub(before).Total()) / 1e9, err
	}
	data, err := fs.ReadFile(fsys, "tokenizer.json")
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromJSON(data)
	if err != nil {
		return nil, err
	}
	r := &DecideReport{Engine: newEngine(filepath.Base(e.Info().Path), be, e), Iters: o.Iters, Requests: o.Requests}
	if o.WideLayers > 0 {
		r.Model = fmt.Sprintf("%d-layer model of Qwen3.5-0.8B's layer shapes (random weights, the demo's vocabulary)", o.WideLayers)
	}

	// 1. One request of 8 questions about one long evidence: cold, then warm.
	ev, n := benchEvidence(tok, 1, o.EvidenceTokens)
	r.EvidenceTokens = n
	req, err := decide.ParseJSON([]byte(`{"evidence": ` + ev + `, "questions": ` + benchQuestions + `}`))
	if err != nil {
		return nil, err
	}
	var coldMS, warmMS []float64
	var cold, warm *decide.Response
	for i := 0; i <= o.Iters; i++ { // the first round warms up and is not counted
		e.ClearCache()
		t0 := time.Now()
		if cold, err = e.Decide(ctx, req); err != nil {
			return nil, err
		}
		t1 := time.Now()
		if warm, err = e.Decide(ctx, req); err != nil {
			return nil, err
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
		return nil, err
	}
	warmW, err := count(func() error { _, err := ce.Decide(ctx, req); return err })
	if err != nil {
		return nil, err
	}
	r.Cold = DecidePath{MS: median(coldMS), Tokens: cold.Tokens, CachedTokens: cold.CachedTokens, GFLOP: coldW}
	r.Warm = DecidePath{MS: median(warmMS), Tokens: warm.Tokens, CachedTokens: warm.CachedTokens, GFLOP: warmW}
	r.ColdWarmDiff = maxDiff(cold, warm)

	// 2. Single-question requests, each about its own evidence: one by one
	// versus one DecideBatch.
	reqs := make([]*decide.Request, o.Requests)
	for i := range reqs {
		ev, _ := benchEvidence(tok, 100+i, 60)
		q := benchSingle[i%len(benchSingle)]
		if reqs[i], err = decide.ParseJSON([]byte(`{"evidence": ` + ev + `, "questions": {"q": ` + q + `}}`)); err != nil {
			return nil, err
		}
	}
	var oneMS, batchMS []float64
	var one, batch []*decide.Response
	tokens := 0
	for i := 0; i <= o.Iters; i++ {
		e.ClearCache()
		one = one[:0]
		tokens = 0
		t0 := time.Now()
		for _, r := range reqs {
			resp, err := e.Decide(ctx, r)
			if err != nil {
				return nil, err
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
				return nil, err
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
		return nil, err
	}
	batchW, err := count(func() error { _, errs := ce.DecideBatch(ctx, reqs); return errors.Join(errs...) })
	if err != nil {
		return nil, err
	}
	r.RequestTokens = tokens
	r.OneByOne = DecidePath{MS: median(oneMS), GFLOP: oneW}
	r.Batch = DecidePath{MS: median(batchMS), GFLOP: batchW}
	for i := range one {
		r.BatchDiff = math.Max(r.BatchDiff, maxDiff(one[i], batch[i]))
	}
	if sm, ok := be.(sgemmMeter); ok {
		// The machine's limit, measured now.
		if r.Sgemm, err = sm.MeasureSgemm(ctx, 512, 1024, 3584, time.Second); err != nil {
			return nil, fmt.Errorf("sgemm: %w", err)
		}
	}
	if o.Int8 {
		t0 := time.Now()
		qe, err := openWith(be, decide.Options{Int8: true})
		if err != nil {
			return nil, fmt.Errorf("int8: %w", err)
		}
		defer qe.Close()
		q := &DecideInt8{Kernel: qe.Info().Int8, OpenFloatSeconds: openFloat.Seconds(), OpenInt8Seconds: time.Since(t0).Seconds(),
			WeightBytesF: e.Info().WeightBytes, WeightBytesQ: qe.Info().WeightBytes}
		for i := 0; i <= o.Iters; i++ { // the first round warms up and is not counted
			order := []*decide.Engine{e, qe}
			if i%2 == 1 {
				order = []*decide.Engine{qe, e}
			}
			var answers [2]*decide.Response
			for _, en := range order {
				en.ClearCache()
				t0 := time.Now()
				cold, err := en.Decide(ctx, req)
				if err != nil {
					return nil, err
				}
				t1 := time.Now()
				if _, err := en.Decide(ctx, req); err != nil {
					return nil, err
				}
				t2 := time.Now()
				if en == qe {
					answers[1] = cold
				} else {
					answers[0] = cold
				}
				if i == 0 {
					continue
				}
				if en == qe {
					q.ColdQ, q.WarmQ = append(q.ColdQ, ms(t1.Sub(t0))), append(q.WarmQ, ms(t2.Sub(t1)))
				} else {
					q.ColdF, q.WarmF = append(q.ColdF, ms(t1.Sub(t0))), append(q.WarmF, ms(t2.Sub(t1)))
				}
			}
			q.MaxDiff = maxDiff(answers[0], answers[1])
		}
		r.Int8 = q
	}
	if r.ColdWarmDiff > 1e-5 || r.BatchDiff > 1e-5 {
		return r, fmt.Errorf("results depend on the prefix plan or batching (cold/warm %.2g, batch/one %.2g; want ≤ 1e-5)", r.ColdWarmDiff, r.BatchDiff)
	}
	return r, nil
}

// Print writes the report.
func (r *DecideReport) Print(w io.Writer) error {
	p := &printer{w: w}
	r.Engine.print(p, "decide")
	c, wm := r.Cold, r.Warm
	ideal := float64(c.Tokens) / float64(wm.Tokens)
	p.printf("\n8 questions about one evidence of %d tokens (median of %d):\n", r.EvidenceTokens, r.Iters)
	p.printf("  cold  %8.2f ms/request   tokens %5d   cached_tokens %5d   work %6.2f GFLOP\n", c.MS, c.Tokens, c.CachedTokens, c.GFLOP)
	p.printf("  warm  %8.2f ms/request   tokens %5d   cached_tokens %5d   work %6.2f GFLOP\n", wm.MS, wm.Tokens, wm.CachedTokens, wm.GFLOP)
	p.printf("  warm speedup %.2f×, ideal (cold tokens ÷ warm tokens) %.2f×: %.0f%% of ideal (goal ≥ 80%%)\n",
		c.MS/wm.MS, ideal, 100*c.MS/wm.MS/ideal)
	p.printf("  by work (cold GFLOP ÷ warm GFLOP) the ideal is %.2f×: the warm speedup is %.0f%% of it\n",
		c.GFLOP/wm.GFLOP, 100*c.MS/wm.MS/(c.GFLOP/wm.GFLOP))
	p.printf("  cold and warm probabilities differ by at most %.2g\n", r.ColdWarmDiff)

	o, b, k := r.OneByOne, r.Batch, float64(r.Requests)
	p.printf("\n%d single-question requests, %d tokens in all (median of %d):\n", r.Requests, r.RequestTokens, r.Iters)
	p.printf("  one by one    %8.2f ms/request   %8.1f ms in all   work %6.2f GFLOP = %5.1f GFLOP/s\n", o.MS/k, o.MS, o.GFLOP, o.GFLOP/o.MS*1e3)
	p.printf("  decide_batch  %8.2f ms/request   %8.1f ms in all   work %6.2f GFLOP = %5.1f GFLOP/s\n", b.MS/k, b.MS, b.GFLOP, b.GFLOP/b.MS*1e3)
	p.printf("  batch throughput %.2f× one by one (goal ≥ 2×); probabilities differ by at most %.2g\n", o.MS/b.MS, r.BatchDiff)
	if sg := r.Sgemm; sg > 0 {
		// Twice the one-by-one throughput means the batch's work done in
		// half of the one-by-one time.
		need := 2 * b.GFLOP / o.MS * 1e3
		p.printf("  sgemm 512×1024×3584 on this backend now %.1f GFLOP/s; the batch runs at %.0f%% of it, and 2× one by one needs %.1f GFLOP/s = %.0f%% of it\n",
			sg, 100*b.GFLOP/b.MS*1e3/sg, need, 100*need/sg)
	}
	if q := r.Int8; q != nil {
		q.print(p, r.Iters)
	}
	return p.err
}

func (q *DecideInt8) print(p *printer, iters int) {
	p.printf("\nint8 projections (kernel %s) against float, the 8-question request, %d rounds alternated:\n", q.Kernel, iters)
	for _, c := range []struct {
		name string
		f, q []float64
	}{{"cold", q.ColdF, q.ColdQ}, {"warm", q.WarmF, q.WarmQ}} {
		fm, flo, fhi := spread(c.f)
		qm, qlo, qhi := spread(c.q)
		p.printf("  %s  float %8.2f ms (%.2f–%.2f)   int8 %8.2f ms (%.2f–%.2f)   int8 speedup %.2f× (medians)\n", c.name, fm, flo, fhi, qm, qlo, qhi, fm/qm)
	}
	p.printf("  weights: float %.1f MB, int8 %.1f MB; open: float %.2fs, int8 %.2fs (calibration, conversion); answers differ by at most %.3g\n",
		float64(q.WeightBytesF)/1e6, float64(q.WeightBytesQ)/1e6, q.OpenFloatSeconds, q.OpenInt8Seconds, q.MaxDiff)
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
