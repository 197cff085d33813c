package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/calibrate"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/eval/chart"
)

// demoTasks writes lines [from, to) of the demo checkpoint's labelled set
// to a file and returns its path.
func demoTasks(t *testing.T, from, to int) string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "eval", "demo-tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan() && i < to; i++ {
		if i >= from {
			b.Write(sc.Bytes())
			b.WriteByte('\n')
		}
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("tasks-%d-%d.jsonl", from, to))
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// copyDemo copies the demo checkpoint into a fresh directory.
func copyDemo(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "demo-decision")
	dst := t.TempDir()
	for _, name := range []string{"config.json", decide.ConfigFile, "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// metricsJSON is one entry of eval --json.
type metricsJSON map[string]float64

type reportJSON struct {
	Types   map[string]metricsJSON `json:"types"`
	Overall metricsJSON            `json:"overall"`
}

func runEvalJSON(t *testing.T, args ...string) (reportJSON, string) {
	t.Helper()
	out, err := runCmd(t, nil, append([]string{"eval", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("eval %v: %v", args, err)
	}
	var r reportJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("eval --json printed %q: %v", out, err)
	}
	return r, out
}

func sameMetrics(t *testing.T, what string, a, b metricsJSON, tol float64) {
	t.Helper()
	for k, v := range b {
		if math.Abs(a[k]-v) > tol {
			t.Errorf("%s: %s %.9f vs %.9f", what, k, a[k], v)
		}
	}
}

// TestEvalJSONAndPlot: eval --json has exactly the documented fields, its n
// count the labelled questions of each type, and --plot writes a PNG of two
// panels per type.
func TestEvalJSONAndPlot(t *testing.T) {
	data := demoTasks(t, 0, 120)
	plot := filepath.Join(t.TempDir(), "eval.png")
	r, out := runEvalJSON(t, "--data", data, "--plot", plot)
	var raw map[string]map[string]json.RawMessage
	json.Unmarshal([]byte(out), &raw)
	var top []string
	for k := range raw {
		top = append(top, k)
	}
	sort.Strings(top)
	if strings.Join(top, ",") != "overall,types" {
		t.Errorf("top-level keys %v", top)
	}
	want := "accuracy,brier,ece,n,nll,position_recall_std"
	check := func(name string, m metricsJSON) {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		if strings.Join(ks, ",") != want {
			t.Errorf("%s: keys %v, want %s", name, ks, want)
		}
	}
	counts := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(must(os.ReadFile(data)))), "\n") {
		var ex struct {
			Request struct {
				Questions map[string]struct{ Type string } `json:"questions"`
			} `json:"request"`
		}
		json.Unmarshal([]byte(line), &ex)
		for _, q := range ex.Request.Questions {
			counts[q.Type]++
		}
	}
	for name, m := range r.Types {
		check(name, m)
		if m["n"] != counts[name] {
			t.Errorf("%s: n %v, the data has %v", name, m["n"], counts[name])
		}
	}
	check("overall", r.Overall)
	if len(r.Types) != 3 || r.Overall["n"] != 120 {
		t.Errorf("types %d, overall n %v", len(r.Types), r.Overall["n"])
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 3*chart.PanelWidth || b.Dy() != 2*chart.PanelHeight {
		t.Errorf("plot %v, want %d×%d", b, 3*chart.PanelWidth, 2*chart.PanelHeight)
	}
	// The text form prints the same figures.
	txt, err := runCmd(t, nil, "eval", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt, fmt.Sprintf("overall     120 %9.4f %8.4f", r.Overall["accuracy"], r.Overall["nll"])) {
		t.Errorf("text report:\n%s", txt)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestEvalThroughDaemon: --socket gives the figures the in-process engine
// gives, with and without --permute.
func TestEvalThroughDaemon(t *testing.T) {
	data := demoTasks(t, 200, 260)
	sock, _ := startServe(t)
	for _, extra := range [][]string{nil, {"--permute"}} {
		local, _ := runEvalJSON(t, append([]string{"--data", data}, extra...)...)
		remote, _ := runEvalJSON(t, append([]string{"--data", data, "--socket", sock}, extra...)...)
		sameMetrics(t, fmt.Sprint("overall ", extra), remote.Overall, local.Overall, 1e-6)
		for name, m := range local.Types {
			sameMetrics(t, fmt.Sprint(name, extra), remote.Types[name], m, 1e-6)
		}
	}
}

// calibrateJSON is calibrate --json's output.
type calibrateJSON struct {
	HeldOut      string                          `json:"held_out"`
	Before       reportJSON                      `json:"before"`
	After        reportJSON                      `json:"after"`
	Temperatures map[string]map[string]float64   `json:"temperature_by_type"`
	Prior        map[string]map[string][]float64 `json:"position_prior"`
	Notes        []string                        `json:"notes"`
	Written      string                          `json:"written"`
}

// TestCalibrateWrite runs calibrate --write twice on a copy of the demo
// checkpoint whose config has a position prior (first keeping it, then
// with --debias), each with a held-out file, and checks it against eval:
// "before" is eval of the checkpoint as it was on the held-out file,
// "after" is eval of the written one (the engine reading the new
// temperatures and prior gives what calibrate computed from stored logits),
// and the replaced config is the backup.
func TestCalibrateWrite(t *testing.T) {
	dir := copyDemo(t)
	cfgPath := filepath.Join(dir, decide.ConfigFile)
	var m map[string]any
	json.Unmarshal(must(os.ReadFile(cfgPath)), &m)
	m["position_prior"] = map[string]any{"noul": map[string]any{"3": []float64{0.5, 0.3, 0.2}}, "choice": map[string]any{"4": []float64{0.4, 0.2, 0.2, 0.2}}}
	os.WriteFile(cfgPath, must(json.MarshalIndent(m, "", "  ")), 0o644)
	train, hold := demoTasks(t, 0, 220), demoTasks(t, 250, 400)

	for _, debias := range []bool{false, true} {
		orig := must(os.ReadFile(cfgPath))
		before, _ := runEvalJSON(t, "--model", dir, "--data", hold)
		args := []string{"calibrate", "--model", dir, "--data", train, "--holdout", hold, "--write", "--json"}
		if debias {
			args = append(args, "--debias", "--debias-sample", "20")
		}
		out, err := runCmd(t, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		var res calibrateJSON
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if res.HeldOut != "holdout" || res.Written != cfgPath {
			t.Errorf("held out %q, written %q", res.HeldOut, res.Written)
		}
		after, _ := runEvalJSON(t, "--model", dir, "--data", hold)
		for name, m := range after.Types {
			sameMetrics(t, fmt.Sprintf("debias %v, before vs eval of the original, %s", debias, name), res.Before.Types[name], before.Types[name], 1e-9)
			sameMetrics(t, fmt.Sprintf("debias %v, after vs eval of the written checkpoint, %s", debias, name), res.After.Types[name], m, 1e-6)
		}
		// choice has 44 examples in the fitting data: it keeps its temperature.
		if res.Temperatures["after"]["choice"] != res.Temperatures["before"]["choice"] || !strings.Contains(strings.Join(res.Notes, "\n"), "choice: 44 examples, fewer than 50: keeps temperature") {
			t.Errorf("choice: %v, notes %q", res.Temperatures, res.Notes)
		}
		if res.Temperatures["after"]["noul"] == res.Temperatures["before"]["noul"] {
			t.Errorf("noul was not fitted: %v", res.Temperatures)
		}
		if b := must(os.ReadFile(cfgPath + calibrate.BackupSuffix)); !bytes.Equal(b, orig) {
			t.Error("the backup is not the replaced config")
		}
		cfg, err := decide.ParseConfig(must(os.ReadFile(cfgPath)))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(cfg.TemperatureByType["noul"]-res.Temperatures["after"]["noul"]) > 1e-8 {
			t.Errorf("written noul T %v, reported %v", cfg.TemperatureByType["noul"], res.Temperatures["after"]["noul"])
		}
		if got, want := fmt.Sprint(cfg.PositionPrior), fmt.Sprint(res.Prior); got != want {
			t.Errorf("written prior %s, reported %s", got, want)
		}
		if !debias && fmt.Sprint(cfg.PositionPrior["choice"]["4"]) != "[0.4 0.2 0.2 0.2]" {
			t.Errorf("without --debias the prior must stay: %v", cfg.PositionPrior)
		}
	}
}

func TestCalibrateRefusals(t *testing.T) {
	data := demoTasks(t, 0, 10)
	noConfig := filepath.Join("..", "..", "testdata", "tiny-qwen35")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", data, "--write"}, "--write needs --model DIR"},
		{[]string{"--model", "demo", "--data", data, "--write"}, "--write needs --model DIR"},
		{[]string{"--model", filepath.Join("..", "..", "testdata", "tiny-pointer"), "--data", data}, "is a pointer/1 checkpoint: only jevfmt/1"},
		{[]string{"--data", data, "--holdout", data, "--folds", "3"}, "--holdout and --folds exclude each other"},
		{[]string{"--data", data, "--folds", "1"}, "--folds 1: need at least 2"},
		{[]string{}, "--data FILE is required"},
	} {
		_, err := runCmd(t, nil, append([]string{"calibrate"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("calibrate %v: got %v, want %q", tc.args, err, tc.want)
		}
	}
	_, err := runCmd(t, nil, "eval", "--data", data, "--model", noConfig, "--socket", "x")
	if err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("eval --model --socket: %v", err)
	}
}

// TestCalibrateModelsFolder calibrates a model given by its name in the
// models folder, as serve and eval take it: the config is read from and
// written to that model's directory, not a directory of that name here.
func TestCalibrateModelsFolder(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	folder, err := api.ModelsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(folder, "mine")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(copyDemo(t), dir); err != nil {
		t.Fatal(err)
	}
	orig := must(os.ReadFile(filepath.Join(dir, decide.ConfigFile)))
	out, err := runCmd(t, nil, "calibrate", "--model", "mine", "--data", demoTasks(t, 0, 120), "--holdout", demoTasks(t, 250, 300), "--write", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res calibrateJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if want := filepath.Join(dir, decide.ConfigFile); res.Written != want {
		t.Errorf("written %q, want %q", res.Written, want)
	}
	if b := must(os.ReadFile(filepath.Join(dir, decide.ConfigFile+calibrate.BackupSuffix))); !bytes.Equal(b, orig) {
		t.Error("the backup in the model's directory is not the replaced config")
	}
}

// TestCalibrateZeroShot calibrates a copy of tiny-qwen35, a chat checkpoint
// without a decision config: "before" is eval of the zero-shot checkpoint,
// --write gives it a decision_config.json, the derived config with the
// fitted temperatures, and the checkpoint then opens calibrated, with the
// figures calibrate reported.
func TestCalibrateZeroShot(t *testing.T) {
	src, err := filepath.Abs(filepath.Join("..", "..", "testdata", "tiny-qwen35"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		if err := os.Symlink(filepath.Join(src, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	train, hold := demoTasks(t, 0, 200), demoTasks(t, 200, 320)
	before, _ := runEvalJSON(t, "--model", dir, "--data", hold)
	out, err := runCmd(t, nil, "calibrate", "--model", dir, "--data", train, "--holdout", hold, "--write", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res calibrateJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	cfgPath := filepath.Join(dir, decide.ConfigFile)
	if res.Written != cfgPath || !strings.Contains(strings.Join(res.Notes, "\n"), "fitted the config derived for zero-shot use") {
		t.Errorf("written %q, notes %q", res.Written, res.Notes)
	}
	for _, typ := range []string{"noul", "choice", "score"} {
		if res.Temperatures["before"][typ] != decide.DefaultTemperature {
			t.Errorf("%s: temperature before %v, want the derived %v", typ, res.Temperatures["before"][typ], decide.DefaultTemperature)
		}
	}
	if _, err := os.Stat(cfgPath + calibrate.BackupSuffix); err == nil {
		t.Error("a backup of a config that did not exist")
	}
	cfg, err := decide.ParseConfig(must(os.ReadFile(cfgPath)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.System != decide.DefaultSystem || cfg.Letters != decide.DefaultLetters || cfg.ThinkBlock != decide.ThinkEmpty ||
		cfg.LetterTokenIDs[0] != 32 || cfg.LetterTokenIDs[24] != 56 || cfg.WideChoice != decide.DefaultWideChoice ||
		math.Abs(cfg.TemperatureByType["noul"]-res.Temperatures["after"]["noul"]) > 1e-8 {
		t.Errorf("written config %+v, reported temperatures %v", cfg, res.Temperatures["after"])
	}
	after, _ := runEvalJSON(t, "--model", dir, "--data", hold)
	for name, m := range after.Types {
		sameMetrics(t, "before vs eval of the zero-shot checkpoint, "+name, res.Before.Types[name], before.Types[name], 1e-9)
		sameMetrics(t, "after vs eval of the written checkpoint, "+name, res.After.Types[name], m, 1e-6)
	}
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := decide.Open(dir, be, decide.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Info().Derived {
		t.Error("the calibrated checkpoint still runs a derived config")
	}
}
