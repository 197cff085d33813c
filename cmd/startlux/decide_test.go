package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux/internal/goldens"
)

// TestDecideInProcess runs "startlux decide" with --local (the embedded
// demo model) and --model on a golden request and checks the printed
// probabilities against decide-demo.json.
func TestDecideInProcess(t *testing.T) {
	cases, err := goldens.DecideDemo(filepath.Join("..", "..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	c := cases[len(cases)-2] // the 32-option wide choice
	for _, args := range [][]string{{"decide", "--local"}, {"decide", "--model", filepath.Join("..", "..", "testdata", "demo-decision")}} {
		resp := decideOut(t, c.Request, args...)
		if len(resp.Answers) != len(c.Answers) || resp.Tokens <= 0 || resp.CachedTokens <= 0 {
			t.Fatalf("%v: response %+v", args, resp)
		}
		for name, ga := range c.Answers {
			for i, p := range ga.Probs {
				if d := math.Abs(resp.Answers[name].Probs[i] - p); d > 1e-4 {
					t.Errorf("%v: %s p[%d] = %v, want %v", args, name, i, resp.Answers[name].Probs[i], p)
				}
			}
		}
	}
}

// TestDecideInt8 runs "startlux decide --local --int8" and --model --int8
// on a golden request: the probabilities are within the int8 gate's 0.03
// of the references, and not all equal to them (the int8 path ran); --int8
// without an in-process model is refused.
func TestDecideInt8(t *testing.T) {
	cases, err := goldens.DecideDemo(filepath.Join("..", "..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	c := cases[0]
	for _, args := range [][]string{{"decide", "--local", "--int8"}, {"decide", "--int8", "--model", filepath.Join("..", "..", "testdata", "demo-decision")}} {
		resp := decideOut(t, c.Request, args...)
		worst := 0.0
		for name, ga := range c.Answers {
			for i, p := range ga.Probs {
				worst = math.Max(worst, math.Abs(resp.Answers[name].Probs[i]-p))
			}
		}
		if worst > 0.03 || worst == 0 {
			t.Errorf("%v: probabilities %.3g from the float references, want within 0.03 and not exactly them", args, worst)
		}
	}
	var errOut bytes.Buffer
	env := &cmdEnv{stdin: bytes.NewReader(c.Request), stdout: &bytes.Buffer{}, stderr: &errOut}
	if err := run(context.Background(), env, []string{"decide", "--int8", "--socket", "/nonexistent.sock"}); err == nil || !strings.Contains(err.Error(), "needs --model or --local") {
		t.Errorf("decide --int8 through the daemon: %v", err)
	}
}

// decideResponse is what "startlux decide" prints, as far as the tests read it.
type decideResponse struct {
	Answers map[string]struct {
		Probs []float64 `json:"probs"`
	} `json:"answers"`
	Tokens       int `json:"tokens"`
	CachedTokens int `json:"cached_tokens"`
}

// decideOut runs a decide command on request and decodes what it printed.
func decideOut(t *testing.T, request []byte, args ...string) decideResponse {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &cmdEnv{stdin: bytes.NewReader(request), stdout: &out, stderr: &errOut}
	if err := run(context.Background(), env, args); err != nil {
		t.Fatalf("%v: %v (%s)", args, err, errOut.String())
	}
	var resp decideResponse
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		t.Fatalf("%v: %v in %s", args, err, out.String())
	}
	return resp
}

func TestDecideBadInput(t *testing.T) {
	tests := []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"decide", "--local"}, `{"evidence": 1, "questions": {"a": {"type": "noul"}}}`, `question "a": instructions: missing`},
		{[]string{"decide", "--local", "--model", "x"}, `{}`, "exclude each other"},
		{[]string{"decide", "--local", "extra"}, `{}`, "unexpected argument"},
		{[]string{"decide", "--model", "no-such-dir"}, `{"evidence": 1, "questions": {"a": {"type": "noul", "instructions": "x"}}}`, "no-such-dir"},
	}
	for _, tc := range tests {
		var out, errOut bytes.Buffer
		env := &cmdEnv{stdin: strings.NewReader(tc.stdin), stdout: &out, stderr: &errOut}
		err := run(context.Background(), env, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestBenchDecideSmoke runs the decide benchmark at a tiny size, on the
// demo model and on a one-layer checkpoint of the 0.8B shapes
// (--wide-layers): it checks the report is produced and that results do not
// depend on the prefix plan or batching (the benchmark fails otherwise). It
// measures nothing.
func TestBenchDecideSmoke(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"demo", nil, []string{"demo-decision"}},
		{"wide", []string{"--wide-layers", "1"}, []string{"1-layer model of Qwen3.5-0.8B's layer shapes", "writing a checkpoint of 1 layers"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			env := &cmdEnv{stdin: strings.NewReader(""), stdout: &out, stderr: &out}
			args := append([]string{"--iters", "1", "--requests", "3", "--evidence-tokens", "300"}, tc.args...)
			if err := run(context.Background(), env, append([]string{"bench", "decide"}, args...)); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			for _, want := range append([]string{"cold", "warm", "ideal", "by work", "GFLOP/s", "one by one", "decide_batch"}, tc.want...) {
				if !strings.Contains(out.String(), want) {
					t.Errorf("report lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
	var out bytes.Buffer
	env := &cmdEnv{stdin: strings.NewReader(""), stdout: &out, stderr: &out}
	if err := run(context.Background(), env, []string{"bench", "decide", "--wide-layers", "2", "--model", "x"}); err == nil || !strings.Contains(err.Error(), "exclude") {
		t.Errorf("--wide-layers with --model: err %v", err)
	}
}
