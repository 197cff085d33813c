package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/startlux/startlux/backends"
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
		d, what = eval.Daemon{Client: c}, "the daemon at "+f.socket
	} else {
		e, err := openDecideEngine(f.model, f.backend, false)
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
	run, err := eval.Run(ctx, d, exs, eval.RunOptions{Batch: f.batch, Permute: f.permute, Progress: eval.ProgressPrinter(env.stderr, "eval")})
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
	rep.WriteText(env.stdout)
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
