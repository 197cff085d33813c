package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/human"
	"github.com/startlux/startlux/ipc"
)

// runServe is "startlux serve": the daemon. It listens at once, loads the
// model in the background (progress on a terminal), and stops gracefully on
// SIGTERM or SIGINT (main ties ctx to them).
func runServe(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: startlux serve [flags]\n\nRuns the daemon: serves decisions on the socket until SIGTERM or SIGINT.\n\nflags:")
		fs.PrintDefaults()
	}
	var c daemon.ServeConfig
	fs.StringVar(&c.Model, "model", "", "checkpoint `DIR` or a name in the models folder (default: the embedded demo model)")
	fs.StringVar(&c.Socket, "socket", "", "socket `PATH` (default: "+ipc.DefaultSocketPath()+")")
	fs.Int64Var(&c.CacheLimit, "cache-limit", 0, "`BYTES` of prefix snapshots kept (0: the engine's default, -1: none)")
	fs.IntVar(&c.MaxBatch, "max-batch", 0, "most requests answered in one engine call (0: 64); 1 turns batching across clients off")
	fs.BoolVar(&c.Int8, "int8", false, "run the large projections as int8 products (the load method's \"int8\" changes it); refused by a backend without them")
	fs.IntVar(&c.PassTokens, "pass-tokens", 0, "longest forward pass of a large request in `TOKENS` (0: 256); passes of concurrent requests take turns")
	fs.Int64Var(&c.MaxTokensInFlight, "max-tokens-in-flight", 0, "`TOKENS` of the decisions queued and running beyond which requests get overloaded (0: 4194304)")
	fs.IntVar(&c.MaxRequestTokens, "max-request-tokens", 0, "most `TOKENS` of all the rows one request renders (0: 262144); with the model's shapes it sets the memory the largest pass may take, which the fit check counts")
	fs.Int64Var(&c.ScratchLimit, "scratch-limit", 0, "`BYTES` of freed activation and scratch buffers the backend keeps for reuse, least recently used dropped first (0: 1 GiB, -1: none)")
	idleUnload := fs.Duration("idle-unload", daemon.DefaultIdleUnload, "unload the model after this `DURATION` without a decision (0: never; when not given, the app's setting, else 30m); the next decision loads it again")
	backend := backendFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "idle-unload" {
			c.IdleUnload = idleUnload
		}
	})
	c.Backend = *backend
	c.Logger = slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c.Progress = newProgressPrinter(env.stderr).show
	c.Listening = func(path string) { fmt.Fprintf(env.stderr, "startlux: listening on %s\n", path) }
	opts, err := c.RunOptions()
	if err == nil {
		err = daemon.Run(ctx, opts)
	}
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintln(env.stderr, "startlux: stopped")
	return nil
}

// progressPrinter shows load progress on a terminal or in a log
// (human.ProgressPrinter).
type progressPrinter struct{ *human.ProgressPrinter }

// newProgressPrinter returns a progress printer writing to w.
func newProgressPrinter(w io.Writer) *progressPrinter {
	return &progressPrinter{human.NewProgressPrinter(w, isTerminal(w))}
}

// show writes what lp says of the load.
func (p *progressPrinter) show(lp api.LoadProgress) { p.Show(lp) }

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// modelLabel names a model directory for people.
func modelLabel(dir string) string { return human.ModelLabel(dir) }
