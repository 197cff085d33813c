package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/startlux/startlux/ipc"
	"github.com/vmihailenco/msgpack/v5"
)

// socketFlag registers --socket on fs.
func socketFlag(fs *flag.FlagSet) *string {
	return fs.String("socket", "", "the daemon's socket `PATH` (default: "+ipc.DefaultSocketPath()+")")
}

// dialDaemon connects to the daemon at socket (the default path when "").
func dialDaemon(ctx context.Context, socket string) (*ipc.Client, error) {
	if socket == "" {
		socket = ipc.DefaultSocketPath()
	}
	return ipc.Dial(ctx, socket)
}

// printJSON writes a msgpack result as indented JSON.
func printJSON(w io.Writer, raw msgpack.RawMessage) error {
	js, err := ipc.ToJSON(raw)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, js, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}

// parseFlags parses fs's flags from args and refuses any other argument,
// naming it and the command.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// clientFlagSet makes the flag set of a subcommand: usage is printed
// above its flags.
func clientFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nflags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}
