package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/startlux/startlux"
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

// calibrateReport is what calibrate prints with --json.
type calibrateReport struct {
	HeldOut      string                          `json:"held_out"`
	Before       *eval.Report                    `json:"before"`
	After        *eval.Report                    `json:"after"`
	Temperatures map[string]map[string]float64   `json:"temperature_by_type"` // "before" and "after"
	Prior        map[string]map[string][]float64 `json:"position_prior,omitempty"`
	Notes        []string                        `json:"notes"`
	LeftOut      int                             `json:"left_out"`
	Written      string                          `json:"written,omitempty"`
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
	fs.StringVar(&f.backend, "backend", "auto", "compute backend: auto, cpu, cpu-go or metal")
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
	e, err := openDecideEngine(&decideFlags{model: f.model, backend: f.backend})
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

	opts := eval.RunOptions{Progress: exampleProgress(env.stderr, "calibrate")}
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
		hrecs, err := eval.Run(ctx, e, hold, eval.RunOptions{Progress: exampleProgress(env.stderr, "calibrate")})
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
	rep := calibrateReport{
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
	printCalibration(env.stdout, &rep)
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

// printCalibration writes the temperatures, the prior, the held-out figures
// before and after, and the notes.
func printCalibration(w io.Writer, r *calibrateReport) {
	fmt.Fprintln(w, "temperature_by_type:")
	for _, t := range eval.Types {
		fmt.Fprintf(w, "  %-7s %.4f → %.4f\n", t, r.Temperatures["before"][string(t)], r.Temperatures["after"][string(t)])
	}
	if len(r.Prior) > 0 {
		fmt.Fprintln(w, "position_prior:")
		for _, t := range eval.Types {
			for _, n := range sortedCounts(r.Prior[string(t)]) {
				fmt.Fprintf(w, "  %-7s %2s options:", t, n)
				for _, p := range r.Prior[string(t)][n] {
					fmt.Fprintf(w, " %.3f", p)
				}
				fmt.Fprintln(w)
			}
		}
	}
	fmt.Fprintf(w, "\nheld out (%s):\n%-8s %6s %17s %17s %17s %17s\n", r.HeldOut, "type", "n", "nll", "ece", "accuracy", "recall-std")
	row := func(name string, b, a *eval.Metrics) {
		fmt.Fprintf(w, "%-8s %6d %8.4f→%-8.4f %8.4f→%-8.4f %8.4f→%-8.4f %8.4f→%-8.4f\n", name, a.N,
			b.NLL, a.NLL, b.ECE, a.ECE, b.Accuracy, a.Accuracy, b.PositionRecallStd, a.PositionRecallStd)
	}
	for _, t := range eval.Types {
		if a := r.After.Types[t]; a != nil {
			row(string(t), r.Before.Types[t], a)
		}
	}
	row("overall", r.Before.Overall, r.After.Overall)
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if r.Written != "" {
		fmt.Fprintf(w, "wrote %s (the old one is %s%s)\n", r.Written, r.Written, calibrate.BackupSuffix)
	}
}

func sortedCounts(m map[string][]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	// Numeric order: shorter keys first, then by text.
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && (len(ks[j]) < len(ks[j-1]) || len(ks[j]) == len(ks[j-1]) && ks[j] < ks[j-1]); j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}
