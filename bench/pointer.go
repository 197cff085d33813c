package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/model/modeltest"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tokenizer"
)

// PointerOptions configures Pointer.
type PointerOptions struct {
	// Model is a pointer/1 checkpoint directory ("": one made around the
	// embedded demo model, with a random adapter and head).
	Model          string
	Iters          int // timed repetitions of each measurement (the median is shown)
	EvidenceTokens int // evidence length of the request
	Threads        int // CPU backend threads (0: all cores)
}

func (o *PointerOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.Model, "model", "", "pointer/1 checkpoint `DIR` (default: one made around the embedded demo model, with a random adapter and head)")
	fs.IntVar(&o.Iters, "iters", 5, "timed repetitions of each measurement (the median is shown)")
	fs.IntVar(&o.EvidenceTokens, "evidence-tokens", 1500, "evidence length of the request, in tokens")
	fs.IntVar(&o.Threads, "threads", 0, "CPU backend threads (0: all cores)")
}

// PointerReport is what Pointer measured.
type PointerReport struct {
	Engine
	Iters, EvidenceTokens int
	Prefix, Row           PointerForm
	// Diff is the largest difference between the forms' probabilities, cold
	// and warm.
	Diff float64
}

// PointerForm is one form's measurement: median times in milliseconds and
// the token counts of the last cold and warm responses.
type PointerForm struct {
	ColdMS, WarmMS         float64
	ColdTokens, ColdCached int
	WarmTokens, WarmCached int
}

// Pointer measures one request of 8 questions about one long evidence on a
// pointer/1 checkpoint, in the prefix form (the state run once, the branches
// as rows from it) against the row form (the state recomputed in every
// row), cold and warm. It returns the report with an error when the forms'
// probabilities differ by more than 1e-5.
func Pointer(ctx context.Context, env Env, o PointerOptions) (*PointerReport, error) {
	if o.Iters < 1 || o.EvidenceTokens < 1 {
		return nil, fmt.Errorf("--iters and --evidence-tokens must be positive")
	}
	dir := o.Model
	if dir == "" {
		tmp, err := os.MkdirTemp("", "startlux-bench-pointer-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := writeDemoPointer(tmp); err != nil {
			return nil, fmt.Errorf("make a checkpoint: %w", err)
		}
		dir = tmp
	}
	data, err := os.ReadFile(filepath.Join(dir, decide.ConfigFile))
	if err != nil {
		return nil, err
	}
	pc, err := decide.ParsePointerConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, filepath.FromSlash(pc.Base), "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	be, err := env.Open(o.Threads)
	if err != nil {
		return nil, err
	}
	prefix, err := decide.Open(dir, be, decide.Options{})
	if err != nil {
		return nil, err
	}
	defer prefix.Close()
	rowForm, err := decide.Open(dir, be, decide.Options{RowForm: true})
	if err != nil {
		return nil, err
	}
	defer rowForm.Close()

	ev, n := benchEvidence(tok, 1, o.EvidenceTokens)
	req, err := decide.ParseJSON([]byte(`{"evidence": ` + ev + `, "questions": ` + benchQuestions + `}`))
	if err != nil {
		return nil, err
	}
	label := o.Model
	if label == "" {
		label = "demo-decision base + random LoRA (r 4) and head (dp 32)"
	}
	r := &PointerReport{Engine: newEngine(label, be, prefix), Iters: o.Iters, EvidenceTokens: n}
	type form struct {
		name       string
		e          *decide.Engine
		cold, warm []float64
		c, wr      *decide.Response
	}
	forms := []*form{{name: "prefix form", e: prefix}, {name: "row form", e: rowForm}}
	for i := 0; i <= o.Iters; i++ { // the first round warms up and is not counted
		for _, f := range forms {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			f.e.ClearCache()
			t0 := time.Now()
			if f.c, err = f.e.Decide(ctx, req); err != nil {
				return nil, fmt.Errorf("%s: %w", f.name, err)
			}
			t1 := time.Now()
			if f.wr, err = f.e.Decide(ctx, req); err != nil {
				return nil, fmt.Errorf("%s: %w", f.name, err)
			}
			t2 := time.Now()
			if i > 0 {
				f.cold = append(f.cold, ms(t1.Sub(t0)))
				f.warm = append(f.warm, ms(t2.Sub(t1)))
			}
		}
	}
	result := func(f *form) PointerForm {
		return PointerForm{ColdMS: median(f.cold), WarmMS: median(f.warm),
			ColdTokens: f.c.Tokens, ColdCached: f.c.CachedTokens, WarmTokens: f.wr.Tokens, WarmCached: f.wr.CachedTokens}
	}
	p, rf := forms[0], forms[1]
	r.Prefix, r.Row = result(p), result(rf)
	for _, x := range []*decide.Response{p.c, p.wr, rf.wr} {
		r.Diff = math.Max(r.Diff, maxDiff(x, rf.c))
	}
	if r.Diff > 1e-5 {
		return r, fmt.Errorf("the prefix and row forms differ by %.2g in probability (want ≤ 1e-5)", r.Diff)
	}
	return r, nil
}

// Print writes the report.
func (r *PointerReport) Print(w io.Writer) error {
	p := &printer{w: w}
	r.Engine.print(p, "pointer")
	p.printf("\n8 questions about one evidence of %d tokens (median of %d):\n", r.EvidenceTokens, r.Iters)
	for _, f := range []struct {
		name string
		f    PointerForm
	}{{"prefix form", r.Prefix}, {"row form", r.Row}} {
		p.printf("  %-11s cold %8.2f ms  tokens %5d cached %5d   warm %8.2f ms  tokens %5d cached %5d\n",
			f.name, f.f.ColdMS, f.f.ColdTokens, f.f.ColdCached, f.f.WarmMS, f.f.WarmTokens, f.f.WarmCached)
	}
	pf, rf := r.Prefix, r.Row
	p.printf("  row form ÷ prefix form: cold %.2f× (tokens %.2f×), warm %.2f× (tokens %.2f×)\n",
		rf.ColdMS/pf.ColdMS, float64(rf.ColdTokens)/float64(pf.ColdTokens),
		rf.WarmMS/pf.WarmMS, float64(rf.WarmTokens)/float64(pf.WarmTokens))
	p.printf("  the forms' probabilities differ by at most %.2g\n", r.Diff)
	return p.err
}

// writeDemoPointer writes a pointer/1 checkpoint into dir: the embedded demo
// model as its base, a random LoRA adapter (r 4) on every layer's MLP and a
// random head (dp 32, temperature 0.7). Its answers mean nothing; its cost
// is that of a real pointer checkpoint of the demo's size.
func writeDemoPointer(dir string) error {
	demo := startlux.DemoModel()
	base := filepath.Join(dir, "base")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	err := fs.WalkDir(demo, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(demo, p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(base, filepath.FromSlash(p)), b, 0o644)
	})
	if err != nil {
		return err
	}
	cfg, err := model.ReadConfig(demo, daemon.DemoPath)
	if err != nil {
		return err
	}
	var jc struct {
		System string `json:"system"`
	}
	b, err := fs.ReadFile(demo, decide.ConfigFile)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &jc); err != nil {
		return err
	}
	ad := filepath.Join(dir, "adapter")
	if err := os.MkdirAll(ad, 0o755); err != nil {
		return err
	}
	if err := modeltest.WriteAdapter(ad, cfg, modeltest.AdapterOptions{Rank: 4, Alpha: 8,
		Targets: []string{"mlp.up_proj", "mlp.down_proj"}, StdB: 0.02, Seed: 11}); err != nil {
		return err
	}
	H := cfg.Hidden
	seed := uint64(12)
	rnd := func(n int, std float64) []float32 {
		v := make([]float32, n)
		a := std * math.Sqrt(3)
		for i := range v {
			v[i] = float32(a * (2*float64(splitmix(&seed)>>11)/(1<<53) - 1))
		}
		return v
	}
	write := func(name string, v any) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), b, 0o644)
	}
	const dp = 32
	head := []safetensors.Entry{
		safetensors.F32("q_proj.weight", []int{dp, H}, rnd(dp*H, 1/math.Sqrt(float64(H)))),
		safetensors.F32("k_proj.weight", []int{dp, H}, rnd(dp*H, 1/math.Sqrt(float64(H)))),
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "head.safetensors"), head, nil); err != nil {
		return err
	}
	return write(decide.ConfigFile, map[string]any{"format": decide.PointerFormat, "system": jc.System, "base": "base",
		"adapter": "adapter", "lora_scale": 0.8, "head": map[string]any{"file": "head.safetensors", "dp": dp, "temperature": 0.7}})
}
