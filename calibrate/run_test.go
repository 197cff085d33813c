package calibrate

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/eval"
)

// openEngine opens the checkpoint in dir ("" for the embedded demo) on the
// CPU backend.
func openEngine(t *testing.T, dir string) *decide.Engine {
	t.Helper()
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var e *decide.Engine
	if dir == "" {
		e, err = decide.OpenFS(startlux.DemoModel(), "demo", be, decide.Options{})
	} else {
		e, err = decide.Open(dir, be, decide.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// zeroShotCopy links tiny-qwen35's files (a checkpoint without a decision
// config) into a fresh directory.
func zeroShotCopy(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "testdata", "tiny-qwen35"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		if err := os.Symlink(filepath.Join(src, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRun calibrates the demo model and a zero-shot checkpoint: the
// held-out figures before the fit are eval's of the same engine, the notes
// say what was fitted from what, and Write gives the checkpoint the config
// the report describes; a checkpoint without a jevfmt/1 config and a write
// without a directory are refused.
func TestRun(t *testing.T) {
	tasks := filepath.Join("..", "testdata", "eval", "demo-tasks.jsonl")
	all, err := eval.ReadFile(tasks)
	if err != nil {
		t.Fatal(err)
	}
	train, hold := all[:60], all[300:340]
	for _, tt := range []struct {
		name    string
		dir     func(t *testing.T) string
		holdout []eval.Example
		write   bool
		heldOut string   // the report's HeldOut
		notes   []string // in the notes
		err     string
	}{
		{"demo, folds", func(*testing.T) string { return "" }, nil, false, "3 folds", nil, ""},
		{"demo, held out", func(*testing.T) string { return "" }, hold, false, "holdout", nil, ""},
		{"zero-shot", zeroShotCopy, hold, false, "holdout", []string{"has no decision_config.json: fitted the config derived for zero-shot use; --write writes it"}, ""},
		{"zero-shot, written", zeroShotCopy, hold, true, "holdout", []string{"fitted the config derived for zero-shot use"}, ""},
		{"demo, written", func(*testing.T) string { return "" }, nil, true, "", nil, "no checkpoint directory to write to"},
		{"pointer", func(*testing.T) string { return filepath.Join("..", "testdata", "tiny-pointer") }, nil, false, "", nil, "is a pointer/1 checkpoint: only jevfmt/1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir(t)
			e := openEngine(t, dir)
			var log bytes.Buffer
			o := RunOptions{Options: Options{Folds: 3}, Dir: dir, Data: train, DataFile: "train.jsonl", Holdout: tt.holdout, HoldoutFile: "hold.jsonl", Write: tt.write, Log: &log}
			rep, err := Run(context.Background(), e, o)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.HeldOut != tt.heldOut || !strings.Contains(log.String(), "calibrate: running 60 examples of train.jsonl once each") {
				t.Errorf("held out %q, want %q; log:\n%s", rep.HeldOut, tt.heldOut, log.String())
			}
			notes := strings.Join(rep.Notes, "\n")
			for _, n := range tt.notes {
				if !strings.Contains(notes, n) {
					t.Errorf("notes %q lack %q", rep.Notes, n)
				}
			}
			if tt.notes == nil && strings.Contains(notes, "zero-shot") {
				t.Errorf("notes %q", rep.Notes)
			}
			for typ, T := range e.Config().TemperatureByType {
				if rep.Temperatures["before"][typ] != T {
					t.Errorf("%s: temperature before %v, the engine's %v", typ, rep.Temperatures["before"][typ], T)
				}
			}
			if tt.holdout != nil {
				run, err := eval.Run(context.Background(), e, tt.holdout, eval.RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := eval.Compute(run.Records).Overall
				if got := rep.Before.Overall; math.Abs(got.NLL-want.NLL) > 1e-9 || math.Abs(got.ECE-want.ECE) > 1e-9 {
					t.Errorf("before: NLL %v ECE %v, eval gives %v %v", got.NLL, got.ECE, want.NLL, want.ECE)
				}
			}
			path := filepath.Join(dir, decide.ConfigFile)
			if !tt.write {
				if rep.Written != "" {
					t.Errorf("written %q without Write", rep.Written)
				}
				return
			}
			b, err := os.ReadFile(path)
			if err != nil || rep.Written != path {
				t.Fatalf("written %q (%v), want %s", rep.Written, err, path)
			}
			cfg, err := decide.ParseConfig(b)
			if err != nil {
				t.Fatal(err)
			}
			for typ, T := range rep.Temperatures["after"] {
				if math.Abs(cfg.TemperatureByType[typ]-T) > 1e-8 {
					t.Errorf("%s: written temperature %v, reported %v", typ, cfg.TemperatureByType[typ], T)
				}
			}
		})
	}
}

// TestReadData reads the data and the held-out data from their files, and
// names a file that cannot be read.
func TestReadData(t *testing.T) {
	tasks := filepath.Join("..", "testdata", "eval", "demo-tasks.jsonl")
	all, err := eval.ReadFile(tasks)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, data, holdout string
		held                bool
		err                 string
	}{
		{"data", tasks, "", false, ""},
		{"data and holdout", tasks, tasks, true, ""},
		{"missing data", "no-such.jsonl", "", false, "no-such.jsonl"},
		{"missing holdout", tasks, "no-hold.jsonl", false, "no-hold.jsonl"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := RunOptions{DataFile: tt.data, HoldoutFile: tt.holdout}
			err := o.ReadData()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || len(o.Data) != len(all) || (o.Holdout != nil) != tt.held || tt.held && len(o.Holdout) != len(all) {
				t.Errorf("%d examples, %d held out, %v; want %d, held out %v", len(o.Data), len(o.Holdout), err, len(all), tt.held)
			}
		})
	}
}
