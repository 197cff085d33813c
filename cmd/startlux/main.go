// Command startlux is StartLux's one command-line program: the daemon
// (serve), its clients (decide, status, models, use), the models folder
// (pull, rm), evaluation and calibration (eval, calibrate), the engine's
// tools (tokenize, forward, bench) and doctor.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand: run gets the arguments after its name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *cmdEnv, args []string) error
}

// cmdEnv carries what a subcommand reads and writes, so tests can run
// subcommands in-process.
type cmdEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func commands() []command {
	return []command{
		{"serve", "run the daemon: load a checkpoint, warm up, serve decisions on the socket", runServe},
		{"decide", "answer a request read from stdin (through the daemon, or in-process with --model/--local)", runDecide},
		{"status", "show what the daemon is doing", runStatus},
		{"models", "list the checkpoints in the models folder", runModels},
		{"use", "switch the daemon to a model (a name in the models folder, or a directory)", runUse},
		{"unload", "unload the daemon's model now (the next decision loads it again)", runUnload},
		{"pull", "download a checkpoint from the Hugging Face Hub into the models folder", runPull},
		{"rm", "delete a model from the models folder", runRm},
		{"tokenize", "tokenise JSON strings read from stdin, one per line", runTokenize},
		{"eval", "measure a model's accuracy and calibration on labelled requests", runEval},
		{"calibrate", "fit per-type temperatures (and a position prior) to labelled requests", runCalibrate},
		{"forward", "run a checkpoint on token ids and write its outputs as safetensors", runForward},
		{"bench", "benchmarks: prefill, decide, pointer, serve, tokenize", runBench},
		{"doctor", "check this machine for StartLux and print what a bug report needs", runDoctor},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, &cmdEnv{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "startlux:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, env *cmdEnv, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(env.stderr)
		if len(args) == 0 {
			return errors.New("no command given")
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	usage(env.stderr)
	return fmt.Errorf("unknown command %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: startlux <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nstartlux <command> -h shows a command's flags.")
}
