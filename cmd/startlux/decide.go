package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/backends"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/decide"
	"github.com/vmihailenco/msgpack/v5"
)

// runDecide is "startlux decide": in-process, or through the daemon.
func runDecide(ctx context.Context, env *cmdEnv, args []string) error {
	fs := clientFlagSet("decide", "usage: startlux decide [flags] < request.json\n\n"+
		"Reads one request (or a JSON array of requests) from stdin and prints the response JSON.", env.stderr)
	model := fs.String("model", "", "run this checkpoint in-process (no daemon): a `NAME` in the models folder, \"demo\", or a directory")
	local := fs.Bool("local", false, "run the embedded demo model in-process (no daemon)")
	socket := fs.String("socket", "", "ask the daemon on the socket at `PATH` (default: the default socket)")
	backend := fs.String("backend", "auto", backends.Usage+"; used with --model or --local")
	useInt8 := fs.Bool("int8", false, "with --model/--local: run the large projections as int8 products (refused by a backend without them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("decide: unexpected argument %q (the request is read from stdin)", fs.Arg(0))
	}
	if *model != "" && *local {
		return errors.New("decide: --model and --local exclude each other")
	}
	body, err := io.ReadAll(env.stdin)
	if err != nil {
		return fmt.Errorf("decide: read the request: %w", err)
	}
	if *model != "" || *local {
		// --local is the embedded demo: the model "".
		return decideInProcess(ctx, env, body, *model, *backend, *useInt8)
	}
	if *useInt8 {
		return errors.New("decide: --int8 runs the model in-process: it needs --model or --local (a daemon's setting is its own: startlux use --int8)")
	}
	return decideViaDaemon(ctx, env, *socket, body)
}

// openDecideEngine opens the checkpoint a --model argument names (""
// being the embedded demo) on the backend named, with int8 projections
// when useInt8 is set.
func openDecideEngine(model, backend string, useInt8 bool) (*decide.Engine, error) {
	be, err := openBackend(backend)
	if err != nil {
		return nil, err
	}
	return daemon.OpenModel(model, be, decide.Options{Int8: useInt8})
}

// decideInProcess answers the request (or array of requests) in body with
// an engine of its own, opened once the request is read, and prints the
// response JSON: one object, or an array with an {"error": ...} object in
// place of each failed request.
func decideInProcess(ctx context.Context, env *cmdEnv, body []byte, model, backend string, useInt8 bool) error {
	doc, err := decide.ParseDocument(body)
	if err != nil {
		return err
	}
	e, err := openDecideEngine(model, backend, useInt8)
	if err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	defer e.Close()
	resps, errs := daemon.DecideDocument(ctx, e, doc)
	return printDecisions(env.stdout, doc.Batch, resps, errs)
}

// decideViaDaemon sends the request (or JSON array of requests) in body to
// the daemon and prints what "startlux decide --local" would: the response
// JSON, or an array with an {"error": ...} object per failed request. Key
// order is kept: the JSON is converted to msgpack as written, once, and
// what is wrong with it is said as --local says it.
func decideViaDaemon(ctx context.Context, env *cmdEnv, socket string, body []byte) error {
	params, err := decide.DocumentMsgpack(body)
	if err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	c, err := dialDaemon(ctx, socket)
	if err != nil {
		return fmt.Errorf("decide: %w (or use --local to run the embedded model in-process)", err)
	}
	defer c.Close()
	if !decide.IsBatchJSON(body) {
		resp, err := c.Decide(ctx, msgpack.RawMessage(params))
		if err != nil {
			return fmt.Errorf("decide: %w", err)
		}
		return json.NewEncoder(env.stdout).Encode(resp)
	}
	resps, errs, err := c.DecideBatch(ctx, msgpack.RawMessage(params))
	if err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	return printDecisions(env.stdout, true, resps, errs)
}

// printDecisions prints the responses as "startlux decide" does: for one
// request its response (or returns its error), for a batch one JSON array
// with an {"error": message} object in place of each failed request.
func printDecisions(w io.Writer, batch bool, resps []*api.Response, errs []error) error {
	if !batch {
		if errs[0] != nil {
			return errs[0]
		}
		return json.NewEncoder(w).Encode(resps[0])
	}
	out := make([]any, len(resps))
	for i, r := range resps {
		out[i] = r
		if errs[i] != nil {
			// A daemon's refusal is its message, without its code.
			out[i] = map[string]string{"error": api.ErrorMessage(errs[i])}
		}
	}
	return json.NewEncoder(w).Encode(out)
}
