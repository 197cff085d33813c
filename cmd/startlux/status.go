package main

import (
	"context"
	"fmt"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/human"
	"github.com/startlux/startlux/ipc"
	"github.com/vmihailenco/msgpack/v5"
)

// runStatus is "startlux status [--json]": what the daemon is doing.
func runStatus(ctx context.Context, env *cmdEnv, args []string) error {
	fs := clientFlagSet("status", "usage: startlux status [flags]\n\nShows what the daemon is doing.", env.stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("status: unexpected argument %q", fs.Arg(0))
	}
	c, err := dialDaemon(ctx, *socket)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	defer c.Close()
	var raw msgpack.RawMessage
	if err := c.Call(ctx, api.MethodStatus, nil, &raw); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if *asJSON {
		return printJSON(env.stdout, raw)
	}
	var st api.Status
	if err := ipc.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	human.Status(env.stdout, &st)
	return nil
}

// mb writes a byte count in megabytes, or gigabytes from 1 GB (human.MB).
func mb(n int64) string { return human.MB(n) }
