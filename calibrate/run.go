package calibrate

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/eval"
)

// RunOptions configures [Run]: the fit ([Options]), the data, and where
// the config is read from and written to.
type RunOptions struct {
	Options
	// Dir is the checkpoint directory the engine runs, "" for the
	// embedded demo model: its decision config is the one updated. It
	// names the checkpoint in notes and errors.
	Dir string
	// Data are the examples the fit runs on, read from DataFile
	// ([RunOptions.ReadData]; the log names it).
	Data     []eval.Example
	DataFile string
	// Holdout, when not nil, are the examples the fit is measured on, read
	// from HoldoutFile; nil cross-validates over Folds folds of Data.
	Holdout     []eval.Example
	HoldoutFile string
	// DebiasSample is how many questions per type and option count are run
	// over every shift for the prior, with Debias (0: DefaultPriorSample).
	DebiasSample int
	// Write replaces Dir's decision_config.json with the fitted one,
	// keeping the old as decision_config.json.bak ([WriteConfig]).
	Write bool
	// Log receives progress lines (nil: none).
	Log io.Writer
}

// ReadData reads Data from DataFile and, when HoldoutFile is set, Holdout
// from it ([eval.ReadFile]).
func (o *RunOptions) ReadData() error {
	var err error
	if o.Data, err = eval.ReadFile(o.DataFile); err != nil {
		return err
	}
	if o.HoldoutFile != "" {
		o.Holdout, err = eval.ReadFile(o.HoldoutFile)
	}
	return err
}

// Run is "startlux calibrate": it runs the data (and the held-out data)
// through e once, fits e's readout to the letter logits read ([Calibrate]),
// and with Write replaces the checkpoint's decision config by the fitted
// one ([UpdateConfig]). It fails for a checkpoint without a jevfmt/1
// decision config (pointer/1). A checkpoint run zero-shot (no
// decision_config.json) is fitted from the config e derived for it; writing
// that one makes the checkpoint calibrated.
func Run(ctx context.Context, e *decide.Engine, o RunOptions) (*Report, error) {
	cfg := e.Config()
	if cfg == nil {
		return nil, fmt.Errorf("%s is a %s checkpoint: only jevfmt/1 has per-type temperatures and letter positions to fit", o.Dir, decide.PointerFormat)
	}
	cfgData, err := readConfig(o.Dir, e)
	if err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	sample := o.DebiasSample
	if sample == 0 {
		sample = DefaultPriorSample
	}
	opts := eval.RunOptions{Progress: eval.ProgressPrinter(log, "calibrate")}
	if o.Debias {
		opts.PermuteQuestion = PriorSample(cfg, o.Data, sample)
	}
	fmt.Fprintf(log, "calibrate: running %d examples of %s once each\n", len(o.Data), o.DataFile)
	run, err := eval.Run(ctx, e, o.Data, opts)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "calibrate: %d tokens computed, %d from snapshots\n", run.Tokens, run.CachedTokens)
	items, left := Items(run.Records)
	var holdItems []Item
	if o.Holdout != nil {
		fmt.Fprintf(log, "calibrate: running %d held-out examples of %s\n", len(o.Holdout), o.HoldoutFile)
		hrecs, err := eval.Run(ctx, e, o.Holdout, eval.RunOptions{Progress: eval.ProgressPrinter(log, "calibrate")})
		if err != nil {
			return nil, err
		}
		var hl int
		holdItems, hl = Items(hrecs.Records)
		left += hl
		if holdItems == nil {
			holdItems = []Item{}
		}
	}
	res, err := Calibrate(cfg, items, holdItems, o.Options)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		HeldOut: res.HeldOut, Before: res.Before, After: res.After,
		Temperatures: map[string]map[string]float64{"before": cfg.TemperatureByType, "after": res.Params.TemperatureByType},
		Prior:        res.Params.PositionPrior, Notes: res.Params.Notes, LeftOut: left,
	}
	if rep.Notes == nil {
		rep.Notes = []string{}
	}
	if e.Info().Derived {
		note := fmt.Sprintf("%s has no %s: fitted the config derived for zero-shot use", o.Dir, decide.ConfigFile)
		if !o.Write {
			note += "; --write writes it, and the model is then calibrated"
		}
		rep.Notes = append(rep.Notes, note)
	}
	if left > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d questions ranked in groups (more than %d options) are left out: their readout is not one row", left, cfg.WideChoice.Group))
	}
	if o.Write {
		out, err := UpdateConfig(cfgData, res.Params, o.Debias)
		if err != nil {
			return nil, err
		}
		if err := WriteConfig(o.Dir, out); err != nil {
			return nil, err
		}
		rep.Written = filepath.Join(o.Dir, decide.ConfigFile)
	}
	return rep, nil
}

// readConfig returns the decision config of the checkpoint in dir that e
// runs (the embedded demo model's when dir is ""), as the text Run
// updates: the file, or for a checkpoint without one (zero-shot) the config
// e derived, written out; writing it then gives the checkpoint a
// decision_config.json, which makes it calibrated.
func readConfig(dir string, e *decide.Engine) ([]byte, error) {
	if dir == "" {
		return fs.ReadFile(startlux.DemoModel(), decide.ConfigFile)
	}
	if e.Info().Derived {
		return e.Config().MarshalFile()
	}
	return os.ReadFile(filepath.Join(dir, decide.ConfigFile))
}
