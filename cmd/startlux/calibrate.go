package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/startlux/startlux/calibrate"
)

// runCalibrate is "startlux calibrate": calibrate.Run, its report printed.
func runCalibrate(ctx context.Context, env *cmdEnv, args []string) error {
	var o calibrate.RunOptions
	fs := clientFlagSet("calibrate", "usage: startlux calibrate [--model DIR] --data FILE [--holdout FILE | --folds K] [--debias] [--write]\n\n"+
		"Fits one temperature per question type (least NLL) on labelled data, and with --debias a prior over\n"+
		"option positions first, and prints NLL and ECE before and after on data the fit did not see (the\n"+
		"--holdout file, or each of K folds fitted on the others). --write updates the checkpoint's\n"+
		"decision_config.json atomically, keeping the old one as decision_config.json.bak.", env.stderr)
	fs.StringVar(&o.Dir, "model", "", "the jevfmt/1 checkpoint in `DIR` (default: the embedded demo model, which cannot be written)")
	backend := backendFlag(fs)
	fs.StringVar(&o.DataFile, "data", "", "the labelled data `FILE` to fit on (JSON lines)")
	fs.StringVar(&o.HoldoutFile, "holdout", "", "measure on this labelled `FILE` instead of cross-validating")
	fs.IntVar(&o.Folds, "folds", calibrate.DefaultFolds, "cross-validation folds `K` when there is no --holdout")
	fs.BoolVar(&o.Debias, "debias", false, "estimate a position prior from cyclic shifts of the options and divide it out")
	fs.IntVar(&o.DebiasSample, "debias-sample", calibrate.DefaultPriorSample, "questions per type and option count run over every shift for the prior")
	fs.BoolVar(&o.Write, "write", false, "write the fitted temperatures (and prior) into DIR/decision_config.json")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	setFlags := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { setFlags[fl.Name] = true })
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("calibrate: unexpected argument %q", fs.Arg(0))
	case o.DataFile == "":
		return errors.New("calibrate: --data FILE is required")
	case o.HoldoutFile != "" && setFlags["folds"]:
		return errors.New("calibrate: --holdout and --folds exclude each other")
	case o.HoldoutFile == "" && o.Folds < 2:
		return fmt.Errorf("calibrate: --folds %d: need at least 2", o.Folds)
	case o.DebiasSample < calibrate.MinPriorQuestions:
		return fmt.Errorf("calibrate: --debias-sample %d: need at least %d", o.DebiasSample, calibrate.MinPriorQuestions)
	case o.Write && o.Dir == "":
		return errors.New("calibrate: --write needs --model DIR (the embedded demo model cannot be written; copy it to a directory first)")
	}
	if err := o.ReadData(); err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	e, err := openDecideEngine(o.Dir, *backend, false)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	defer e.Close()
	o.Log = env.stderr
	rep, err := calibrate.Run(ctx, e, o)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	return printReport(env.stdout, *asJSON, rep)
}
