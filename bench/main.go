package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/startlux/startlux/backends"
	"github.com/startlux/startlux/tensor"
)

// Main is "startlux bench" on args (what follows the command's name): an
// optional leading --cpuprofile FILE, which profiles the whole run into
// FILE, then a benchmark's name and its flags, or "all", which runs every
// benchmark with its default flags. Reports go to stdout, usage and
// progress to stderr. It returns flag.ErrHelp after printing a usage that
// was asked for.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
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
				fmt.Fprintf(stderr, "bench: cpu profile: %v\n", err)
			}
		}()
		args = rest
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: startlux bench [--cpuprofile FILE] <benchmark|all> [flags]\n\nbenchmarks:")
		for _, b := range All() {
			fmt.Fprintf(stderr, "  %-9s %s\n", b.Name, b.Summary)
		}
		if len(args) == 0 {
			return errors.New("bench: no benchmark named")
		}
		return flag.ErrHelp
	}
	if args[0] == "all" {
		if len(args) > 1 {
			if args[1] == "-h" || args[1] == "--help" || args[1] == "-help" {
				fmt.Fprintln(stderr, "usage: startlux bench [--cpuprofile FILE] all\n\nruns every benchmark with its default flags, one after the other")
				return flag.ErrHelp
			}
			return fmt.Errorf("bench all: takes no flags (got %q); run one benchmark to set its flags", args[1])
		}
		for _, b := range All() {
			fmt.Fprintf(stdout, "== bench %s\n", b.Name)
			if err := b.run(ctx, nil, stdout, stderr); err != nil {
				return err
			}
		}
		return nil
	}
	for _, b := range All() {
		if b.Name == args[0] {
			return b.run(ctx, args[1:], stdout, stderr)
		}
	}
	return fmt.Errorf("bench: unknown benchmark %q", args[0])
}

// run parses b's flags (and --backend, where it takes one) from args, runs
// it and prints its report to stdout, also when the run returns an error
// about its results.
func (b Benchmark) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench "+b.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	run := b.Flags(fs)
	backend := new(string)
	if b.UsesBackend {
		backend = fs.String("backend", "auto", backends.Usage)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("bench %s: unexpected argument %q", b.Name, fs.Arg(0))
	}
	r, err := run(ctx, Env{Log: stderr, Open: func(threads int) (tensor.Backend, error) {
		return backends.Open(*backend, threads)
	}})
	if r != nil {
		if perr := r.Print(stdout); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return fmt.Errorf("bench %s: %w", b.Name, err)
	}
	return nil
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
