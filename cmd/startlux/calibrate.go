package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/backends"
	"github.com/startlux/startlux/calibrate"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/eval"
)

// calibrateFlags are the flags of "startlux calibrate".
type calibrateFlags struct {
	model        string
	backend      string
	data         string
	holdout      string
	folds        int
	debias       bool
	debiasSample int
	write        bool
	json         bool
}

func runCalibrate(ctx context.Context, env *cmdEnv, args []string) error {
	var f calibrateFlags
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: startlux calibrate [--model DIR] --data FILE [--holdout FILE | --folds K] [--debias] [--write]\n\n"+
			"Fits one temperature per question type (least NLL) on labelled data, and with --debias a prior over\n"+
			"option positions first, and prints NLL and ECE before and after on data the fit did not see (the\n"+
			"--holdout file, or each of K folds fitted on the others). --write updates the checkpoint's\n"+
			"decision_config.json atomically, keeping the old one as decision_config.json.bak.\n\nflags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&f.model, "model", "", "the jevfmt/1 checkpoint in `DIR` (default: the embedded demo model, which cannot be written)")
	fs.StringVar(&f.backend, "backend", "auto", backends.Usage)
	fs.StringVar(&f.data, "data", "", "the labelled data `FILE` to fit on (JSON lines)")
	fs.StringVar(&f.holdout, "holdout", "", "measure on this labelled `FILE` instead of cross-validating")
	fs.IntVar(&f.folds, "folds", calibrate.DefaultFolds, "cross-validation folds `K` when there is no --holdout")
	fs.BoolVar(&f.debias, "debias", false, "estimate a position prior from cyclic shifts of the options and divide it out")
	fs.IntVar(&f.debiasSample, "debias-sample", calibrate.DefaultPriorSample, "questions per type and option count run over every shift for the prior")
	fs.BoolVar(&f.write, "write", false, "write the fitted temperatures (and prior) into DIR/decision_config.json")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	setFlags := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { setFlags[fl.Name] = true })
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("calibrate: unexpected argument %q", fs.Arg(0))
	case f.data == "":
		return errors.New("calibrate: --data FILE is required")
	case f.holdout != "" && setFlags["folds"]:
		return errors.New("calibrate: --holdout and --folds exclude each other")
	case f.holdout == "" && f.folds < 2:
		return fmt.Errorf("calibrate: --folds %d: need at least 2", f.folds)
	case f.debiasSample < calibrate.MinPriorQuestions:
		return fmt.Errorf("calibrate: --debias-sample %d: need at least %d", f.debiasSample, calibrate.MinPriorQuestions)
	case f.write && f.model == "":
		return errors.New("calibrate: --write needs --model DIR (the embedded demo model cannot be written; copy it to a directory first)")
	}
	train, err := eval.ReadFile(f.data)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	var hold []eval.Example
	if f.holdout != "" {
		if hold, err = eval.ReadFile(f.holdout); err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
	}
	e, err := openDecideEngine(f.model, f.backend, false)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	defer e.Close()
	cfg := e.Config()
	if cfg == nil {
		return fmt.Errorf("calibrate: %s is a %s checkpoint: only jevfmt/1 has per-type temperatures and letter positions to fit", f.model, decide.PointerFormat)
	}
	cfgData, err := readDecisionConfig(f.model, e)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}

	opts := eval.RunOptions{Progress: eval.ProgressPrinter(env.stderr, "calibrate")}
	if f.debias {
		opts.PermuteQuestion = calibrate.PriorSample(cfg, train, f.debiasSample)
	}
	fmt.Fprintf(env.stderr, "calibrate: running %d examples of %s once each\n", len(train), f.data)
	run, err := eval.Run(ctx, e, train, opts)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	fmt.Fprintf(env.stderr, "calibrate: %d tokens computed, %d from snapshots\n", run.Tokens, run.CachedTokens)
	items, left := calibrate.Items(run.Records)
	var holdItems []calibrate.Item
	if hold != nil {
		fmt.Fprintf(env.stderr, "calibrate: running %d held-out examples of %s\n", len(hold), f.holdout)
		hrecs, err := eval.Run(ctx, e, hold, eval.RunOptions{Progress: eval.ProgressPrinter(env.stderr, "calibrate")})
		if err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		var hl int
		holdItems, hl = calibrate.Items(hrecs.Records)
		left += hl
		if holdItems == nil {
			holdItems = []calibrate.Item{}
		}
	}
	res, err := calibrate.Calibrate(cfg, items, holdItems, calibrate.Options{Folds: f.folds, Debias: f.debias})
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	rep := calibrate.Report{
		HeldOut: res.HeldOut, Before: res.Before, After: res.After,
		Temperatures: map[string]map[string]float64{"before": cfg.TemperatureByType, "after": res.Params.TemperatureByType},
		Prior:        res.Params.PositionPrior, Notes: res.Params.Notes, LeftOut: left,
	}
	if rep.Notes == nil {
		rep.Notes = []string{}
	}
	if e.Info().Derived {
		note := fmt.Sprintf("%s has no %s: fitted the config derived for zero-shot use", f.model, decide.ConfigFile)
		if !f.write {
			note += "; --write writes it, and the model is then calibrated"
		}
		rep.Notes = append(rep.Notes, note)
	}
	if left > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d questions ranked in groups (more than %d options) are left out: their readout is not one row", left, cfg.WideChoice.Group))
	}
	if f.write {
		out, err := calibrate.UpdateConfig(cfgData, res.Params, f.debias)
		if err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		if err := calibrate.WriteConfig(f.model, out); err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		rep.Written = filepath.Join(f.model, decide.ConfigFile)
	}
	if f.json {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.WriteText(env.stdout)
	return nil
}

// readDecisionConfig returns the decision config of the checkpoint in dir
// that e runs (the embedded demo model's when dir is ""), as the text
// calibrate updates: the file, or for a checkpoint without one (zero-shot)
// the config e derived, written out; --write then gives the checkpoint a
// decision_config.json, which makes it calibrated.
func readDecisionConfig(dir string, e *decide.Engine) ([]byte, error) {
	if dir == "" {
		return fs.ReadFile(startlux.DemoModel(), decide.ConfigFile)
	}
	if e.Info().Derived {
		return e.Config().MarshalFile()
	}
	return os.ReadFile(filepath.Join(dir, decide.ConfigFile))
}
