package main

import (
	"context"
	"flag"
	"fmt"

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
	// The daemon runs elsewhere: send a path as an absolute one.
	if dir, ok, err := daemon.CheckpointPath(model); err != nil {
		return fmt.Errorf("use: %w", err)
	} else if ok {
		model = dir
	}
	c, err := dialDaemon(ctx, *socket)
	if err != nil {
		return fmt.Errorf("use: %w", err)
	}
	defer c.Close()

	var progress func(api.LoadProgress)
	if isTerminal(env.stderr) {
		progress = newProgressPrinter(env.stderr).show
	}
	params.Model = model
	st, err := c.Load(ctx, params, progress)
	if isTerminal(env.stderr) {
		fmt.Fprint(env.stderr, "\r\033[K")
	}
	if err != nil {
		return fmt.Errorf("use %s: %w", model, err)
	}
	fmt.Fprintf(env.stdout, "now serving %s (%s) on %s, int8 %s\n", st.Model.Name, st.Model.Path, st.Model.Backend, st.Model.Int8Summary())
	return nil
}
