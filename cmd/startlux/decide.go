package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/decide"
)

// decideFlags are the flags of "startlux decide". The in-process paths
// (--model, --local) are here; the daemon path adds its own flags to
// newDecideFlagSet and its branch to runDecide.
type decideFlags struct {
	model   string // run this checkpoint directory in-process
	local   bool   // run the embedded demo model in-process
	socket  string // the daemon's socket (default path when "")
	backend string // compute backend of the in-process paths
	int8    bool   // int8 projections on the in-process paths
}

func newDecideFlagSet(f *decideFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("decide", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: startlux decide [flags] < request.json\n\n"+
			"Reads one request (or a JSON array of requests) from stdin and prints the response JSON.\n\nflags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&f.model, "model", "", "run this checkpoint in-process (no daemon): a `NAME` in the models folder, \"demo\", or a directory")
	fs.BoolVar(&f.local, "local", false, "run the embedded demo model in-process (no daemon)")
	fs.StringVar(&f.socket, "socket", "", "ask the daemon on the socket at `PATH` (default: the default socket)")
	fs.StringVar(&f.backend, "backend", "auto", "compute backend of --model/--local: auto, cpu, cpu-go or metal")
	fs.BoolVar(&f.int8, "int8", false, "with --model/--local: run the large projections as int8 products (refused by a backend without them)")
	return fs
}

func runDecide(ctx context.Context, env *cmdEnv, args []string) error {
	var f decideFlags
	fs := newDecideFlagSet(&f, env.stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("decide: unexpected argument %q (the request is read from stdin)", fs.Arg(0))
	}
	if f.model != "" && f.local {
		return errors.New("decide: --model and --local exclude each other")
	}
	body, err := io.ReadAll(env.stdin)
	if err != nil {
		return fmt.Errorf("decide: read the request: %w", err)
	}
	if f.model != "" || f.local {
		return decideInProcess(ctx, env, &f, body)
	}
	if f.int8 {
		return errors.New("decide: --int8 runs the model in-process: it needs --model or --local (a daemon's setting is its own: startlux use --int8)")
	}
	return decideViaDaemon(ctx, env, f.socket, body)
}

// openDecideEngine opens the checkpoint the flags name on the backend they name.
func openDecideEngine(f *decideFlags) (*decide.Engine, error) {
	be, err := openBackend(f.backend)
	if err != nil {
		return nil, err
	}
	dir := ""
	if !f.local {
		// A name in the models folder, "demo" or a directory, as serve --model takes.
		modelsDir, err := api.ModelsDir()
		if err != nil {
			return nil, err
		}
		if dir, err = daemon.ResolveModel(f.model, modelsDir); err != nil {
			return nil, err
		}
	}
	opts := decide.Options{Int8: f.int8}
	if dir == "" {
		return decide.OpenFS(startlux.DemoModel(), daemon.DemoPath, be, opts)
	}
	return decide.Open(dir, be, opts)
}

// decideInProcess answers the request (or array of requests) in body with
// an engine of its own and prints the response JSON: one object, or an array
// with an {"error": ...} object in place of each failed request.
func decideInProcess(ctx context.Context, env *cmdEnv, f *decideFlags, body []byte) error {
	batch := bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("["))
	var reqs []*decide.Request
	var errs []error
	if batch {
		var err error
		if reqs, errs, err = decide.ParseJSONBatch(body); err != nil {
			return err
		}
	} else {
		r, err := decide.ParseJSON(body)
		if err != nil {
			return err
		}
		reqs, errs = []*decide.Request{r}, []error{nil}
	}
	e, err := openDecideEngine(f)
	if err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	defer e.Close()
	var todo []*decide.Request
	for i, r := range reqs {
		if errs[i] == nil {
			todo = append(todo, r)
		}
	}
	resps, runErrs := e.DecideBatch(ctx, todo)
	enc := json.NewEncoder(env.stdout)
	if !batch {
		if runErrs[0] != nil {
			return runErrs[0]
		}
		return enc.Encode(daemon.WireResponse(resps[0]))
	}
	out := make([]any, len(reqs))
	k := 0
	for i := range reqs {
		err := errs[i]
		if err == nil {
			if err = runErrs[k]; err == nil {
				out[i] = daemon.WireResponse(resps[k])
			}
			k++
		}
		if err != nil {
			out[i] = map[string]string{"error": err.Error()}
		}
	}
	return enc.Encode(out)
}
