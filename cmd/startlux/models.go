package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/human"
)

// runModels is "startlux models": the checkpoints in the models folder,
// the current one marked when a daemon answers.
func runModels(ctx context.Context, env *cmdEnv, args []string) error {
	dir, err := api.ModelsDir()
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	fs := clientFlagSet("models", "usage: startlux models [flags]\n\nLists the models in "+dir+
		"\n(a checkpoint is a directory with config.json and tokenizer.json, and a decision_config.json unless\n"+
		"it is a chat checkpoint run zero-shot: those are listed as "+api.UncalibratedNote+").", env.stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print the list as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("models: unexpected argument %q", fs.Arg(0))
	}
	list, err := daemon.ListModels(dir)
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	// Ask the daemon which one it serves; without a daemon, just list.
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if c, err := dialDaemon(dctx, *socket); err == nil {
		if served, err := c.Models(dctx); err == nil {
			list = served
		}
		c.Close()
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	if err := human.Models(env.stdout, list); err != nil {
		return err
	}
	if len(list) == 1 {
		fmt.Fprintf(env.stderr, "no models in %s yet (\"startlux pull REPO\" downloads one from the Hugging Face Hub)\n", dir)
	}
	return nil
}
