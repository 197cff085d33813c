package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/startlux/startlux/tokenizer"
	"github.com/startlux/startlux/tokenizer/tokenizertest"
)

// benchmarks lists the subcommands of startlux bench, in the order "all" runs
// them.
func benchmarks() []command {
	return []command{
		{"prefill", "Qwen3.5-0.8B-shaped prefill: tok/s and GFLOP/s against the machine's sgemm", benchPrefill},
		{"decide", "the demo model: cold vs warm evidence, decide_batch vs one by one", benchDecide},
		{"pointer", "pointer/1: prefix form vs row form, cold and warm", benchPointer},
		{"serve", "the daemon over its socket: throughput, p50/p99, overhead against in-process", benchServe},
		{"tokenize", "encode throughput of the real Qwen3 vocabulary", benchTokenize},
	}
}

func runBench(ctx context.Context, env *cmdEnv, args []string) error {
	if profile, rest, ok := cpuProfileArg(args); ok {
		if profile == "" {
			return errors.New("bench: --cpuprofile needs a file name")
		}
		f, err := os.Create(profile)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("bench: cpu profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintf(env.stderr, "bench: cpu profile: %v\n", err)
			}
		}()
		args = rest
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(env.stderr, "usage: startlux bench [--cpuprofile FILE] <benchmark|all> [flags]\n\nbenchmarks:")
		for _, b := range benchmarks() {
			fmt.Fprintf(env.stderr, "  %-9s %s\n", b.name, b.summary)
		}
		if len(args) == 0 {
			return errors.New("bench: no benchmark named")
		}
		return flag.ErrHelp
	}
	if args[0] == "all" {
		for _, b := range benchmarks() {
			fmt.Fprintf(env.stdout, "== bench %s\n", b.name)
			if err := b.run(ctx, env, nil); err != nil {
				return fmt.Errorf("bench %s: %w", b.name, err)
			}
		}
		return nil
	}
	for _, b := range benchmarks() {
		if b.name == args[0] {
			return b.run(ctx, env, args[1:])
		}
	}
	return fmt.Errorf("bench: unknown benchmark %q", args[0])
}

// cpuProfileArg reads a leading --cpuprofile FILE (or -cpuprofile, or
// with =FILE) off args: the file ("" when missing), the rest, and whether
// the flag was there.
func cpuProfileArg(args []string) (file string, rest []string, ok bool) {
	if len(args) == 0 {
		return "", args, false
	}
	name, val, hasVal := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
	if name != "cpuprofile" || !strings.HasPrefix(args[0], "-") {
		return "", args, false
	}
	if hasVal {
		return val, args[1:], true
	}
	if len(args) < 2 {
		return "", nil, true
	}
	return args[1], args[2:], true
}

// benchTokenize measures single-goroutine encode throughput on the golden
// tokenizer strings and on 1 MB of mixed text.
func benchTokenize(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("bench tokenize", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	path := fs.String("tokenizer", "testdata/qwen3-tokenizer/tokenizer.json.gz", "tokenizer.json (or .json.gz) to measure")
	dur := fs.Duration("time", 3*time.Second, "how long to measure each text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tok, err := tokenizer.Load(*path)
	if err != nil {
		return err
	}
	mixed := tokenizertest.MixedText(1 << 20)
	lines := strings.Split(mixed, "\n")
	for _, c := range []struct {
		name  string
		texts []string
	}{
		{"1 MB mixed text, as one string", []string{mixed}},
		{"1 MB mixed text, paragraph by paragraph", lines},
	} {
		if err := ctx.Err(); err != nil {
			return err
		}
		mb := encodeRate(tok, c.texts, *dur)
		fmt.Fprintf(env.stdout, "tokenize %s: %.1f MB/s (one goroutine)\n", c.name, mb)
	}
	return nil
}

// encodeRate encodes texts one after another, over and over, on the calling
// goroutine for at least dur (and at least one full pass), and returns the
// throughput in MB/s of input text (1 MB = 10⁶ bytes). The tokenizer's cache
// is warmed by an untimed first pass, so the figure is the steady state.
func encodeRate(t *tokenizer.Tokenizer, texts []string, dur time.Duration) (mbPerSec float64) {
	for _, s := range texts {
		t.Encode(s)
	}
	var n int64
	start := time.Now()
	for {
		for _, s := range texts {
			t.Encode(s)
			n += int64(len(s))
		}
		if el := time.Since(start); el >= dur {
			return float64(n) / el.Seconds() / 1e6
		}
	}
}
