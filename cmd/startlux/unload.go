package main

import (
	"context"
	"fmt"

	"github.com/startlux/startlux/api"
)

// runUnload is "startlux unload": the daemon unloads its model now (the
// menu's Unload Model); the next decision loads it again.
func runUnload(ctx context.Context, env *cmdEnv, args []string) error {
	fs := clientFlagSet("unload", "usage: startlux unload [flags]\n\n"+
		"Unloads the daemon's model, handing its memory back; the daemon keeps serving\n"+
		"its socket, and the next decision loads the model again.", env.stderr)
	socket := socketFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unload: unexpected argument %q", fs.Arg(0))
	}
	c, err := dialDaemon(ctx, *socket)
	if err != nil {
		return fmt.Errorf("unload: %w", err)
	}
	defer c.Close()
	st, err := c.Unload(ctx)
	if err != nil {
		return fmt.Errorf("unload: %w", err)
	}
	if st.State != api.StateUnloaded {
		fmt.Fprintf(env.stdout, "no model to unload (the daemon is %s)\n", st.State)
		return nil
	}
	fmt.Fprintf(env.stdout, "unloaded %s; %s resident now\n", st.Model.Name, mb(st.Memory.Resident))
	return nil
}
