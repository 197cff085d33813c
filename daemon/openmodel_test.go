package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
)

// TestOpenModel opens the demo checkpoint under each name a model argument
// can give it (the embedded copy, its directory, a name in a models folder
// of a home of the test's) and refuses a name that is not there.
func TestOpenModel(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	modelsDir, err := api.ModelsDir()
	if err != nil {
		t.Fatal(err)
	}
	demoDir, err := filepath.Abs(filepath.Join("..", "testdata", "demo-decision"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(modelsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(demoDir, filepath.Join(modelsDir, "mine")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		model, path, err string
	}{
		{"", DemoPath, ""},
		{api.DemoName, DemoPath, ""},
		{filepath.Join("..", "testdata", "demo-decision"), demoDir, ""},
		{"mine", filepath.Join(modelsDir, "mine"), ""},
		{"missing", "", `no model "missing" in ` + modelsDir},
	} {
		t.Run(tt.model, func(t *testing.T) {
			be, err := cpu.New(cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			e, err := OpenModel(tt.model, be, decide.Options{})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if got := e.Info().Path; got != tt.path {
				t.Errorf("path %q, want %q", got, tt.path)
			}
		})
	}
}

// TestDecideDocument answers a batch in-process: each request read gets
// the wire form of what the engine answers it alone, a request that could
// not be read nothing but its error.
func TestDecideDocument(t *testing.T) {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := OpenModel("", be, decide.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	d, err := decide.ParseDocument([]byte(`[{"evidence": {"n": 3}, "questions": {"a": {"type": "score", "instructions": "How many?", "criteria": ["none", "some", "many"]}}},
		{"evidence": 1, "questions": {"a": {"type": "noul"}}}]`))
	if err != nil {
		t.Fatal(err)
	}
	resps, errs := DecideDocument(context.Background(), e, d)
	if len(resps) != 2 || resps[1] != nil || errs[1] != d.Errs[1] || errs[0] != nil {
		t.Fatalf("responses %v, errors %v", resps, errs)
	}
	want, err := e.Decide(context.Background(), d.Requests[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := sameAnswers(resps[0], WireResponse(want), 1e-5); err != nil {
		t.Error(err)
	}
	if resps[0].Answers[0].Expected == nil {
		t.Error("a score answer without its expected value")
	}
}
