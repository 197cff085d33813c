package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/daemon"
)

// runUse is "startlux use NAME|DIR": switch the daemon's model. The old
// model answers meanwhile; a terminal shows the load's progress.
func runUse(ctx context.Context, env *cmdEnv, args []string) error {
	fs := clientFlagSet("use", "usage: startlux use [flags] NAME|DIR\n\n"+
		"Switches the daemon to a checkpoint: a name in the models folder (\"startlux models\"),\n"+
		"\"demo\" for the embedded model, or a checkpoint directory.", env.stderr)
	socket := socketFlag(fs)
	useInt8 := fs.Bool("int8", false, "--int8 or --int8=false: load it with int8 (or float) projections, and keep that for later loads\n(default: the daemon's current setting)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	params := api.LoadParams{}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "int8" {
			params.Int8 = useInt8
		}
	})
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("use: want exactly one model, got %d arguments", fs.NArg())
	}
	model := fs.Arg(0)
	if strings.ContainsRune(model, filepath.Separator) || model == "." {
		// The daemon runs elsewhere: send an absolute path.
		abs, err := filepath.Abs(model)
		if err != nil {
			return fmt.Errorf("use: %w", err)
		}
		if !daemon.IsCheckpoint(abs) {
			return fmt.Errorf("use: %s is not a checkpoint (a directory with config.json and tokenizer.json, and a decision_config.json unless it runs zero-shot)", abs)
		}
		model = abs
	}
	c, err := dialDaemon(ctx, *socket)
	if err != nil {
		return fmt.Errorf("use: %w", err)
	}
	defer c.Close()

	stop := make(chan struct{})
	watched := make(chan struct{})
	if isTerminal(env.stderr) {
		go func() {
			defer close(watched)
			pr := newProgressPrinter(env.stderr)
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				var st api.Status
				if err := c.Call(ctx, api.MethodStatus, nil, &st); err == nil && st.Progress != nil {
					pr.show(*st.Progress)
				}
			}
		}()
	} else {
		close(watched)
	}
	var st api.Status
	params.Model = model
	err = c.Call(ctx, api.MethodLoad, params, &st)
	close(stop)
	<-watched
	if isTerminal(env.stderr) {
		fmt.Fprint(env.stderr, "\r\033[K")
	}
	if err != nil {
		return fmt.Errorf("use %s: %w", model, err)
	}
	fmt.Fprintf(env.stdout, "now serving %s (%s) on %s, int8 %s\n", st.Model.Name, st.Model.Path, st.Model.Backend, st.Model.Int8Summary())
	return nil
}
