package bench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
)

func TestCPUProfileArg(t *testing.T) {
	for _, tt := range []struct {
		args []string
		file string
		rest []string
		ok   bool
	}{
		{[]string{"--cpuprofile", "p.out", "decide", "--iters", "1"}, "p.out", []string{"decide", "--iters", "1"}, true},
		{[]string{"-cpuprofile=p.out", "all"}, "p.out", []string{"all"}, true},
		{[]string{"--cpuprofile"}, "", nil, true},
		{[]string{"decide", "--cpuprofile", "x"}, "", []string{"decide", "--cpuprofile", "x"}, false},
		{[]string{"cpuprofile", "x"}, "", []string{"cpuprofile", "x"}, false},
		{nil, "", nil, false},
	} {
		file, rest, ok := cpuProfileArg(tt.args)
		if file != tt.file || ok != tt.ok || !slices.Equal(rest, tt.rest) {
			t.Errorf("cpuProfileArg(%q) = %q, %q, %v; want %q, %q, %v", tt.args, file, rest, ok, tt.file, tt.rest, tt.ok)
		}
	}
}

// TestMainDispatch checks Main's dispatch: which arguments run a benchmark (its
// report on stdout), which print a usage (flag.ErrHelp) and which are
// refused, with what.
func TestMainDispatch(t *testing.T) {
	tok := []string{"--tokenizer", "../testdata/tiny-qwen35/tokenizer.json", "--time", "5ms"}
	for _, tt := range []struct {
		name    string
		args    []string
		err     string // "" for none
		help    bool   // the error is flag.ErrHelp
		stdout  string // in the output
		stderr  string // in the usage and progress
		noBench bool   // nothing was run
	}{
		{"one benchmark", append([]string{"tokenize"}, tok...), "", false, "MB/s", "", false},
		{"no benchmark", nil, "bench: no benchmark named", false, "", "benchmarks:\n  prefill", true},
		{"help", []string{"--help"}, "", true, "", "  tokenize  encode throughput", true},
		{"all help", []string{"all", "-help"}, "", true, "", "runs every benchmark", true},
		{"all with flags", []string{"all", "--time", "1s"}, `bench all: takes no flags (got "--time")`, false, "", "", true},
		{"unknown", []string{"nope"}, `bench: unknown benchmark "nope"`, false, "", "", true},
		{"extra argument", append([]string{"tokenize", "extra"}, tok...), `bench tokenize: unexpected argument "extra"`, false, "", "", true},
		{"bad flag", []string{"tokenize", "--backend", "cpu"}, "flag provided but not defined: -backend", false, "", "", true},
		{"run fails", []string{"tokenize", "--tokenizer", "no-such.json"}, "bench tokenize: ", false, "", "", true},
		{"profile without a file", []string{"--cpuprofile"}, "bench: --cpuprofile needs a file name", false, "", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := Main(context.Background(), tt.args, &out, &errOut)
			switch {
			case tt.help:
				if !errors.Is(err, flag.ErrHelp) {
					t.Errorf("error %v, want flag.ErrHelp", err)
				}
			case tt.err == "" && err != nil, tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("error %v, want %q", err, tt.err)
			}
			if !strings.Contains(out.String(), tt.stdout) || !strings.Contains(errOut.String(), tt.stderr) {
				t.Errorf("stdout %q, want %q in it; stderr %q, want %q in it", out.String(), tt.stdout, errOut.String(), tt.stderr)
			}
			if tt.noBench && out.Len() > 0 {
				t.Errorf("a benchmark ran: %q", out.String())
			}
		})
	}
}
