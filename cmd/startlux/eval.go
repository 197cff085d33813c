package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/backends"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/eval"
	"github.com/startlux/startlux/eval/chart"
	"github.com/startlux/startlux/internal/atomicfile"
	"github.com/startlux/startlux/ipc"
)

// evalFlags are the flags of "startlux eval".
type evalFlags struct {
	model   string
	socket  string
	backend string
	data    string
	json    bool
	plot    string
	permute bool
	batch   int
}

func runEval(ctx context.Context, env *cmdEnv, args []string) error {
	var f evalFlags
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: startlux eval [--model DIR | --socket PATH] --data FILE [--json] [--plot FILE.png]\n\n"+
			"Runs labelled requests (one {\"request\": ..., \"labels\": ...} a line) and prints per question type and\n"+
			"overall: n, accuracy, NLL, Brier score, ECE (15 bins) and the spread of recall over option positions.\n"+
			"Without --model or --socket it evaluates the embedded demo model.\n\nflags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&f.model, "model", "", "evaluate the checkpoint in `DIR` in-process")
	fs.StringVar(&f.socket, "socket", "", "evaluate through the daemon on the socket at `PATH` (the model it serves)")
	fs.StringVar(&f.backend, "backend", "auto", backends.Usage+"; in-process")
	fs.StringVar(&f.data, "data", "", "the labelled data `FILE` (JSON lines)")
	fs.BoolVar(&f.json, "json", false, "print the metrics as JSON")
	fs.StringVar(&f.plot, "plot", "", "draw reliability diagrams and position histograms into `FILE.png`")
	fs.BoolVar(&f.permute, "permute", false, "send every request with \"permute\": true (every cyclic shift of the options)")
	fs.IntVar(&f.batch, "batch", eval.DefaultBatch, "requests per batch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("eval: unexpected argument %q", fs.Arg(0))
	}
	if f.data == "" {
		return errors.New("eval: --data FILE is required")
	}
	if f.model != "" && f.socket != "" {
		return errors.New("eval: --model and --socket exclude each other")
	}
	exs, err := eval.ReadFile(f.data)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	var d eval.Decider
	what := "the embedded demo model"
	if f.socket != "" {
		c, err := ipc.Dial(ctx, f.socket)
		if err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		defer c.Close()
		d, what = daemonDecider{c}, "the daemon at "+f.socket
	} else {
		e, err := openDecideEngine(&decideFlags{model: f.model, backend: f.backend})
		if err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		defer e.Close()
		d = e
		if f.model != "" {
			what = f.model
		}
	}
	fmt.Fprintf(env.stderr, "eval: %d examples from %s on %s\n", len(exs), f.data, what)
	run, err := eval.Run(ctx, d, exs, eval.RunOptions{Batch: f.batch, Permute: f.permute, Progress: exampleProgress(env.stderr, "eval")})
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	fmt.Fprintf(env.stderr, "eval: %d tokens computed, %d from snapshots\n", run.Tokens, run.CachedTokens)
	rep := eval.Compute(run.Records)
	if f.plot != "" {
		if err := writePlot(f.plot, rep); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
	}
	if f.json {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printReport(env.stdout, rep)
	return nil
}

// writePlot draws the report into a PNG file, replacing it whole.
func writePlot(path string, rep *eval.Report) error {
	var b strings.Builder
	if err := chart.WritePNG(&b, rep); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, []byte(b.String()), 0o644, "")
}

// exampleProgress reports progress on w at most every two seconds, and at
// the end.
func exampleProgress(w io.Writer, what string) func(done, total int) {
	start := time.Now()
	last := start
	return func(done, total int) {
		now := time.Now()
		if done < total && now.Sub(last) < 2*time.Second {
			return
		}
		last = now
		el := now.Sub(start).Seconds()
		fmt.Fprintf(w, "%s: %d/%d examples (%.0f%%), %.1f s, %.1f examples/s\n", what, done, total, 100*float64(done)/float64(total), el, float64(done)/max(el, 1e-9))
	}
}

// printReport writes the metrics table and the position table.
func printReport(w io.Writer, rep *eval.Report) {
	fmt.Fprintf(w, "%-8s %6s %9s %8s %8s %8s %11s\n", "type", "n", "accuracy", "nll", "brier", "ece", "recall-std")
	row := func(name string, m *eval.Metrics) {
		fmt.Fprintf(w, "%-8s %6d %9.4f %8.4f %8.4f %8.4f %11.4f\n", name, m.N, m.Accuracy, m.NLL, m.Brier, m.ECE, m.PositionRecallStd)
	}
	for _, t := range eval.Types {
		if m := rep.Types[t]; m != nil {
			row(string(t), m)
		}
	}
	row("overall", rep.Overall)
	fmt.Fprintln(w, "\nposition: share of questions choosing it / share whose right option is there / recall there")
	for _, t := range eval.Types {
		m := rep.Types[t]
		if m == nil {
			continue
		}
		fmt.Fprintf(w, "%-8s", t)
		for j := range m.Chosen {
			recall := "-"
			if m.Right[j] > 0 {
				recall = fmt.Sprintf("%.2f", float64(m.Hits[j])/float64(m.Right[j]))
			}
			fmt.Fprintf(w, "  %s %.2f/%.2f/%s", positionName(j), float64(m.Chosen[j])/float64(m.N), float64(m.Right[j])/float64(m.N), recall)
		}
		fmt.Fprintln(w)
	}
}

func positionName(j int) string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXY"
	if j < len(letters) {
		return letters[j : j+1]
	}
	return fmt.Sprint(j + 1)
}

// daemonDecider sends batches of requests to the daemon (decide_batch).
type daemonDecider struct{ c *ipc.Client }

// DecideBatch asks the daemon; a failed call fails every request.
func (d daemonDecider) DecideBatch(ctx context.Context, reqs []*decide.Request) ([]*decide.Response, []error) {
	resps := make([]*decide.Response, len(reqs))
	errs := make([]error, len(reqs))
	params := struct {
		Requests []*decide.Request `msgpack:"requests"`
	}{reqs}
	var res api.BatchResult
	err := d.c.Call(ctx, api.MethodDecideBatch, params, &res)
	if err == nil && len(res.Responses) != len(reqs) {
		err = fmt.Errorf("the daemon answered %d of %d requests", len(res.Responses), len(reqs))
	}
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return resps, errs
	}
	for i, raw := range res.Responses {
		var resp api.Response
		var perr *api.Error
		if err := ipc.DecodeBatchItem(raw, &resp); errors.As(err, &perr) {
			errs[i] = errors.New(perr.Message)
			continue
		} else if err != nil {
			errs[i] = fmt.Errorf("response %d: %w", i, err)
			continue
		}
		resps[i] = fromWire(&resp)
	}
	return resps, errs
}

// fromWire is a decision response from the daemon as eval reads it (no
// letter logits: they do not travel).
func fromWire(w *api.Response) *decide.Response {
	r := &decide.Response{Answers: make(decide.Answers, len(w.Answers)), Tokens: w.Tokens, CachedTokens: w.CachedTokens, ElapsedMS: w.ElapsedMS}
	for i, a := range w.Answers {
		r.Answers[i] = decide.Answer{Name: a.Name, Options: a.Options, Probs: a.Probs, Answer: a.Answer, Expected: a.Expected}
	}
	return r
}

var _ eval.Decider = daemonDecider{}
