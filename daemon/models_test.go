package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
)

// checkpointDir makes dir/name a directory that passes for a checkpoint
// (config.json and decision_config.json) and returns it.
func checkpointDir(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "decision_config.json"} {
		if err := os.WriteFile(filepath.Join(p, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestResolveModel(t *testing.T) {
	models := t.TempDir()
	good := checkpointDir(t, models, "good")
	half := filepath.Join(models, "half")
	os.Mkdir(half, 0o755)
	os.WriteFile(filepath.Join(half, "config.json"), []byte("{}"), 0o644)
	chat := filepath.Join(models, "zchat") // zero-shot: no decision config
	os.Mkdir(chat, 0o755)
	chatCfg, err := os.ReadFile(filepath.Join("..", "testdata", "tiny-qwen35", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(chat, "config.json"), chatCfg, 0o644)
	os.WriteFile(filepath.Join(chat, "tokenizer.json"), []byte("{}"), 0o644)
	cases := []struct {
		arg, want, err string
	}{
		{"", "", ""},
		{"demo", "", ""},
		{"good", good, ""},
		{good, good, ""},
		{"half", "", `model "half" in ` + models + " is not a checkpoint"},
		{"zchat", chat, ""},
		{chat, chat, ""},
		{half, "", "is not a checkpoint"},
		{"missing", "", "startlux models"},
	}
	for _, c := range cases {
		got, err := ResolveModel(c.arg, models)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("ResolveModel(%s) = %s, %v; want %s", c.arg, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ResolveModel(%s) error %v, want one saying %q", c.arg, err, c.err)
		}
	}
	list, err := ListModels(models)
	if err != nil || len(list) != 4 || list[0].Name != api.DemoName || !list[0].Embedded || list[1].Path != good ||
		!strings.Contains(list[2].Unloadable, "no tokenizer.json") || list[3].Path != chat || list[3].Unloadable != "" || list[3].Calibrated {
		t.Errorf("ListModels = %+v, %v", list, err)
	}
	if list, err := ListModels(filepath.Join(models, "none")); err != nil || len(list) != 1 {
		t.Errorf("ListModels of a missing folder = %+v, %v", list, err)
	}
}

func TestPercentiles(t *testing.T) {
	var l latencies
	if p50, p99 := l.percentiles(); p50 != 0 || p99 != 0 {
		t.Errorf("empty: %v %v", p50, p99)
	}
	// 1..2000 ms: only the last 1024 (977..2000) are kept.
	for i := 1; i <= 2000; i++ {
		l.add(time.Duration(i) * time.Millisecond)
	}
	p50, p99 := l.percentiles()
	if p50 != 1488 || p99 != 1990 {
		t.Errorf("p50 %v p99 %v, want 1488 and 1990", p50, p99)
	}
}

// TestCheckpointPath tells paths from names, relative paths made absolute
// from the working directory, and checks the paths' checkpoints.
func TestCheckpointPath(t *testing.T) {
	root := t.TempDir()
	good := checkpointDir(t, root, "good")
	t.Chdir(good)
	for _, c := range []struct {
		arg, want, err string
		path           bool
	}{
		{arg: "good"},
		{arg: api.DemoName},
		{arg: ""},
		{arg: good, want: good, path: true},
		{arg: ".", want: good, path: true},
		{arg: "../good", want: good, path: true},
		{arg: "./good", err: "not a checkpoint"},
		{arg: "..", err: "not a checkpoint"},
		{arg: filepath.Join(root, "none"), err: "none"},
	} {
		dir, ok, err := CheckpointPath(c.arg)
		if dir != c.want || ok != c.path || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("CheckpointPath(%q) = %q, %v, %v; want %q, %v, an error saying %q", c.arg, dir, ok, err, c.want, c.path, c.err)
		}
	}
}
