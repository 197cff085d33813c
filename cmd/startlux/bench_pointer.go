package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/model/modeltest"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tokenizer"
)

// benchPointer is "startlux bench pointer": one request of 8 questions about
// one long evidence on a pointer/1 checkpoint, in the prefix form (the state
// run once, the branches as rows from it) against the row form (the state
// recomputed in every row), cold and warm.
func benchPointer(ctx context.Context, env *cmdEnv, args []string) error {
	fset := flag.NewFlagSet("bench pointer", flag.ContinueOnError)
	fset.SetOutput(env.stderr)
	modelDir := fset.String("model", "", "pointer/1 checkpoint `DIR` (default: one made around the embedded demo model, with a random adapter and head)")
	iters := fset.Int("iters", 5, "timed repetitions of each measurement (the median is shown)")
	evTokens := fset.Int("evidence-tokens", 1500, "evidence length of the request, in tokens")
	threads := fset.Int("threads", 0, "CPU backend threads (0: all cores)")
	backend := backendFlag(fset)
	if err := fset.Parse(args); err != nil {
		return err
	}
	if *iters < 1 || *evTokens < 1 {
		return fmt.Errorf("bench pointer: --iters and --evidence-tokens must be positive")
	}
	dir := *modelDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "startlux-bench-pointer-")
		if err != nil {
			return fmt.Errorf("bench pointer: %w", err)
		}
		defer os.RemoveAll(tmp)
		if err := writeDemoPointer(tmp); err != nil {
			return fmt.Errorf("bench pointer: make a checkpoint: %w", err)
		}
		dir = tmp
	}
	data, err := os.ReadFile(filepath.Join(dir, decide.ConfigFile))
	if err != nil {
		return fmt.Errorf("bench pointer: %w", err)
	}
	pc, err := decide.ParsePointerConfig(data)
	if err != nil {
		return fmt.Errorf("bench pointer: %s: %w", dir, err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, filepath.FromSlash(pc.Base), "tokenizer.json"))
	if err != nil {
		return fmt.Errorf("bench pointer: %w", err)
	}
	be, err := openBackendThreads(*backend, *threads)
	if err != nil {
		return fmt.Errorf("bench pointer: %w", err)
	}
	prefix, err := decide.Open(dir, be, decide.Options{})
	if err != nil {
		return fmt.Errorf("bench pointer: %w", err)
	}
	defer prefix.Close()
	rowForm, err := decide.Open(dir, be, decide.Options{RowForm: true})
	if err != nil {
		return fmt.Errorf("bench pointer: %w", err)
	}
	defer rowForm.Close()

	ev, n := benchEvidence(tok, 1, *evTokens)
	req, err := decide.ParseJSON([]byte(`{"evidence": ` + ev + `, "questions": ` + benchQuestions + `}`))
	if err != nil {
		return fmt.Errorf("bench pointer: %w", err)
	}
	info := prefix.Info()
	w := env.stdout
	label := *modelDir
	if label == "" {
		label = "demo-decision base + random LoRA (r 4) and head (dp 32)"
	}
	fmt.Fprintf(w, "pointer benchmark: model %s, backend %s, GOOS/GOARCH %s/%s, preamble %d tokens\n",
		label, backendLabel(be), runtime.GOOS, runtime.GOARCH, info.PreambleTokens)

	type form struct {
		name       string
		e          *decide.Engine
		cold, warm []float64
		c, wr      *decide.Response
	}
	forms := []*form{{name: "prefix form", e: prefix}, {name: "row form", e: rowForm}}
	for i := 0; i <= *iters; i++ { // the first round warms up and is not counted
		for _, f := range forms {
			if err := ctx.Err(); err != nil {
				return err
			}
			f.e.ClearCache()
			t0 := time.Now()
			if f.c, err = f.e.Decide(ctx, req); err != nil {
				return fmt.Errorf("bench pointer: %s: %w", f.name, err)
			}
			t1 := time.Now()
			if f.wr, err = f.e.Decide(ctx, req); err != nil {
				return fmt.Errorf("bench pointer: %s: %w", f.name, err)
			}
			t2 := time.Now()
			if i > 0 {
				f.cold = append(f.cold, ms(t1.Sub(t0)))
				f.warm = append(f.warm, ms(t2.Sub(t1)))
			}
		}
	}
	fmt.Fprintf(w, "\n8 questions about one evidence of %d tokens (median of %d):\n", n, *iters)
	for _, f := range forms {
		fmt.Fprintf(w, "  %-11s cold %8.2f ms  tokens %5d cached %5d   warm %8.2f ms  tokens %5d cached %5d\n",
			f.name, median(f.cold), f.c.Tokens, f.c.CachedTokens, median(f.warm), f.wr.Tokens, f.wr.CachedTokens)
	}
	p, r := forms[0], forms[1]
	fmt.Fprintf(w, "  row form ÷ prefix form: cold %.2f× (tokens %.2f×), warm %.2f× (tokens %.2f×)\n",
		median(r.cold)/median(p.cold), float64(r.c.Tokens)/float64(p.c.Tokens),
		median(r.warm)/median(p.warm), float64(r.wr.Tokens)/float64(p.wr.Tokens))
	worst := 0.0
	for _, x := range []*decide.Response{p.c, p.wr, r.wr} {
		worst = math.Max(worst, maxDiff(x, r.c))
	}
	fmt.Fprintf(w, "  the forms' probabilities differ by at most %.2g\n", worst)
	if worst > 1e-5 {
		return fmt.Errorf("bench pointer: the prefix and row forms differ by %.2g in probability (want ≤ 1e-5)", worst)
	}
	return nil
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
	cfg, err := model.ReadConfig(demo, "demo-decision (embedded)")
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
