package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/startlux/startlux/human"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/hub"
)

// runPull is "startlux pull REPO[@REVISION] [--name NAME]": download a
// checkpoint from the Hugging Face Hub into the models folder.
func runPull(ctx context.Context, env *cmdEnv, args []string) error {
	dir, err := api.ModelsDir()
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	fset := clientFlagSet("pull", "usage: startlux pull REPO[@REVISION] [--name NAME]\n\n"+
		"Downloads a checkpoint from the Hugging Face Hub into "+dir+"/NAME:\n"+
		"config.json, the tokenizer files, the safetensors weights (and their index),\n"+
		"decision_config.json and adapter files when there are any; nothing else.\n"+
		"REVISION is a branch, tag or commit (default main). HF_ENDPOINT and HF_TOKEN are\n"+
		"honoured. An interrupted pull resumes when run again.", env.stderr)
	name := fset.String("name", "", "the model's `NAME` in the models folder (default: the repository's name)")
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fset.Usage()
		return fmt.Errorf("pull: want exactly one repository, got %d arguments", len(pos))
	}
	ref, err := hub.ParseRef(pos[0])
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	dest, err := ref.Dir(dir, *name)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	*name = filepath.Base(dest)
	client, err := hub.NewClient(hub.EnvOptions(os.Getenv))
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	fmt.Fprintf(env.stderr, "resolving %s on %s\n", ref, client.Endpoint())
	plan, err := client.Resolve(ctx, ref)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	plan.Describe(env.stderr)
	pr := hub.NewPrinter(env.stderr, isTerminal(env.stderr), time.Now)
	src, fetched, err := client.Install(ctx, plan, dest, hub.PullOptions{Progress: pr.Show})
	pr.End()
	var exists *hub.ExistsError
	switch {
	case errors.As(err, &exists):
		return fmt.Errorf("pull: %w: choose another name with --name, or remove it with \"startlux rm %s\" first", err, *name)
	case errors.Is(err, hub.ErrResumable):
		return fmt.Errorf("pull: %w\n(run the same command again to resume; \"startlux rm %s\" discards what was fetched)", err, *name)
	case err != nil:
		return fmt.Errorf("pull: %w", err)
	case !fetched:
		fmt.Fprintf(env.stdout, "%s is already pulled: %s at commit %s, in %s\n", *name, src.Repo, human.Commit(src.Commit), dest)
		return nil
	}
	fmt.Fprintf(env.stdout, "pulled %s at commit %s into %s (%s)\n", src.Repo, human.Commit(src.Commit), dest, human.Size(src.Bytes()))
	if plan.Format == "" {
		fmt.Fprintf(env.stderr, "note: %s has no decision_config.json: it runs zero-shot with a derived config, and its "+
			"probabilities are the model's own, %s\n", *name, api.UncalibratedNote)
	}
	pullFitNote(ctx, env.stderr, dest, daemon.SystemMemory())
	return nil
}

// pullFitNote says what the pulled model will need at serve's default
// limits against what the machine has now: the fit check a load of it
// makes, told before anyone asks for the load.
func pullFitNote(ctx context.Context, w io.Writer, dir string, mem daemon.Memory) {
	fit, err := daemon.EstimateFit(ctx, dir, daemon.LoaderOptions{}, mem)
	if err != nil {
		fmt.Fprintf(w, "note: what the model needs in memory could not be told: %v\n", err)
		return
	}
	fit.Describe(w)
}

// parseInterspersed parses fs's flags wherever they stand among args and
// returns the other arguments ("--" ends the flags).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// runRm is "startlux rm NAME": delete a model from the models folder.
func runRm(ctx context.Context, env *cmdEnv, args []string) error {
	dir, err := api.ModelsDir()
	if err != nil {
		return fmt.Errorf("rm: %w", err)
	}
	fset := clientFlagSet("rm", "usage: startlux rm NAME\n\nDeletes the model NAME from "+dir+
		"\n(and what an interrupted pull of it left). It refuses the model the daemon serves.", env.stderr)
	socket := socketFlag(fset)
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fset.Usage()
		return fmt.Errorf("rm: want exactly one model name, got %d arguments", len(pos))
	}
	name := pos[0]
	r, err := hub.Remove(dir, name, func(p string) error { return refuseServed(ctx, *socket, p, name) })
	r.Describe(env.stdout, name, dir)
	if err != nil {
		return fmt.Errorf("rm: %w", err)
	}
	return nil
}

// refuseServed refuses to remove the model at path, called name, when the
// daemon serves it (and a daemon answers).
func refuseServed(ctx context.Context, socket, path, name string) error {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := dialDaemon(dctx, socket)
	if err != nil {
		return nil // no daemon: nothing serves it
	}
	defer c.Close()
	if st, err := c.Status(dctx); err == nil && st.Model.Path != "" && filepath.Clean(st.Model.Path) == filepath.Clean(path) {
		return fmt.Errorf("the daemon is serving %s: switch to another model first (\"startlux use demo\")", name)
	}
	return nil
}
