package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/startlux/startlux/backends"
	"github.com/startlux/startlux/eval"
	"github.com/startlux/startlux/eval/chart"
	"github.com/startlux/startlux/ipc"
)

// runEval is "startlux eval": eval.Run on the data, the report printed.
func runEval(ctx context.Context, env *cmdEnv, args []string) error {
	fs := clientFlagSet("eval", "usage: startlux eval [--model DIR | --socket PATH] --data FILE [--json] [--plot FILE.png]\n\n"+
		"Runs labelled requests (one {\"request\": ..., \"labels\": ...} a line) and prints per question type and\n"+
		"overall: n, accuracy, NLL, Brier score, ECE (15 bins) and the spread of recall over option positions.\n"+
		"Without --model or --socket it evaluates the embedded demo model.", env.stderr)
	model := fs.String("model", "", "evaluate the checkpoint in `DIR` in-process")
	socket := fs.String("socket", "", "evaluate through the daemon on the socket at `PATH` (the model it serves)")
	backend := fs.String("backend", "auto", backends.Usage+"; in-process")
	data := fs.String("data", "", "the labelled data `FILE` (JSON lines)")
	asJSON := fs.Bool("json", false, "print the metrics as JSON")
	plot := fs.String("plot", "", "draw reliability diagrams and position histograms into `FILE.png`")
	var opts eval.RunOptions
	fs.BoolVar(&opts.Permute, "permute", false, "send every request with \"permute\": true (every cyclic shift of the options)")
	fs.IntVar(&opts.Batch, "batch", eval.DefaultBatch, "requests per batch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("eval: unexpected argument %q", fs.Arg(0))
	}
	if *data == "" {
		return errors.New("eval: --data FILE is required")
	}
	if *model != "" && *socket != "" {
		return errors.New("eval: --model and --socket exclude each other")
	}
	exs, err := eval.ReadFile(*data)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	var d eval.Decider
	what := "the embedded demo model"
	if *socket != "" {
		c, err := ipc.Dial(ctx, *socket)
		if err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		defer c.Close()
		d, what = eval.Daemon{Client: c}, "the daemon at "+*socket
	} else {
		e, err := openDecideEngine(*model, *backend, false)
		if err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		defer e.Close()
		d = e
		if *model != "" {
			what = *model
		}
	}
	fmt.Fprintf(env.stderr, "eval: %d examples from %s on %s\n", len(exs), *data, what)
	opts.Progress = eval.ProgressPrinter(env.stderr, "eval")
	run, err := eval.Run(ctx, d, exs, opts)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	fmt.Fprintf(env.stderr, "eval: %d tokens computed, %d from snapshots\n", run.Tokens, run.CachedTokens)
	rep := eval.Compute(run.Records)
	if *plot != "" {
		if err := chart.WriteFile(*plot, rep); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
	}
	return printReport(env.stdout, *asJSON, rep)
}

// printReport prints rep (eval's or calibrate's report) as indented JSON,
// or as its text for people.
func printReport(w io.Writer, asJSON bool, rep interface{ WriteText(io.Writer) }) error {
	if !asJSON {
		rep.WriteText(w)
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
