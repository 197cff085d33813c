package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchCPUProfile runs a short benchmark under --cpuprofile and checks
// that a gzipped pprof profile was written.
func TestBenchCPUProfile(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	var out, errOut bytes.Buffer
	env := &cmdEnv{stdout: &out, stderr: &errOut}
	args := []string{"bench", "--cpuprofile", prof, "tokenize", "--tokenizer", "../../testdata/qwen3-tokenizer/tokenizer.json.gz", "--time", "20ms"}
	if err := run(context.Background(), env, args); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "MB/s") {
		t.Errorf("no throughput in the output:\n%s", out.String())
	}
	f, err := os.Open(prof)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := gzip.NewReader(f); err != nil {
		t.Errorf("the profile is not a gzipped pprof file: %v", err)
	}
	if err := run(context.Background(), env, []string{"bench", "--cpuprofile"}); err == nil || !strings.Contains(err.Error(), "needs a file name") {
		t.Errorf("--cpuprofile without a file: %v", err)
	}
}

// TestBenchAllArgs checks that "bench all" with arguments runs nothing: -h
// prints its usage, anything else is refused by name.
func TestBenchAllArgs(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"bench", "all", "-h"}, "help requested"},
		{[]string{"bench", "all", "--help"}, "help requested"},
		{[]string{"bench", "all", "--iters", "1"}, `takes no flags (got "--iters")`},
	} {
		var out, errOut bytes.Buffer
		env := &cmdEnv{stdout: &out, stderr: &errOut}
		err := run(context.Background(), env, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%q: error %v, want one containing %q", tt.args, err, tt.wantErr)
		}
		if strings.Contains(out.String(), "== bench") {
			t.Errorf("%q ran a benchmark:\n%s", tt.args, out.String())
		}
	}
}
