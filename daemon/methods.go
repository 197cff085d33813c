package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
	"github.com/vmihailenco/msgpack/v5"
)

// ServeIPC answers one request; it implements ipc.Handler.
func (d *Daemon) ServeIPC(ctx context.Context, req *ipc.Request) (any, error) {
	switch req.Method {
	case api.MethodConfigure:
		return d.serveConfigure(req.Params)
	case api.MethodDecide:
		return d.serveDecide(ctx, req)
	case api.MethodDecideBatch:
		return d.serveDecideBatch(ctx, req)
	case api.MethodLoad:
		return d.serveLoad(ctx, req.Params)
	case api.MethodModels:
		return d.Models()
	case api.MethodPing:
		return "pong", nil
	case api.MethodStatus:
		return d.Status(), nil
	case api.MethodUnload:
		return d.serveUnload(ctx)
	}
	return nil, api.Errorf(api.CodeUnknownMethod, "no method %q (methods: %s)", req.Method, strings.Join(api.Methods[:], ", "))
}

func (d *Daemon) serveDecide(ctx context.Context, req *ipc.Request) (any, error) {
	if len(req.Params) == 0 {
		return nil, api.Errorf(api.CodeInvalidParams, "decide: params must be a request map {evidence, questions}")
	}
	if len(req.Params) >= largeParams {
		defer d.freeMemory()
	}
	r, err := decide.Read(&req.Value, req.ValueErr)
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidParams, "decide: %v", err)
	}
	resp, err := d.decide(ctx, r)
	if err != nil {
		if api.ErrorCode(err) == api.CodeInvalidParams {
			err = api.Errorf(api.CodeInvalidParams, "decide: %s", api.ErrorMessage(err))
		}
		return nil, err
	}
	return WireResponse(resp), nil
}

func (d *Daemon) serveDecideBatch(ctx context.Context, req *ipc.Request) (any, error) {
	if len(req.Params) == 0 {
		return nil, api.Errorf(api.CodeInvalidParams, "decide_batch: params must be an array of requests or {requests: [...]}")
	}
	if len(req.Params) >= largeParams {
		defer d.freeMemory()
	}
	reqs, perrs, err := decide.ReadBatch(&req.Value, req.ValueErr)
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidParams, "decide_batch: %v", err)
	}
	items := make([]msgpack.RawMessage, len(reqs))
	var good []*decide.Request
	var at []int
	for i, r := range reqs {
		if perrs[i] != nil {
			items[i] = errorItem(api.Errorf(api.CodeInvalidParams, "request %d: %v", i, perrs[i]))
			continue
		}
		good = append(good, r)
		at = append(at, i)
	}
	if len(good) > 0 {
		m, preps, errs, err := d.prepare(ctx, good)
		if err != nil {
			return nil, err
		}
		var where []int
		for k, e := range errs {
			if e != nil {
				items[at[k]] = errorItem(api.Errorf(api.ErrorCode(e), "request %d: %s", at[k], api.ErrorMessage(e)))
			} else {
				where = append(where, at[k])
			}
		}
		jobs, err := d.submit(ctx, m, preps)
		if err != nil {
			return nil, err
		}
		for k, j := range jobs {
			resp, err := d.wait(ctx, j)
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				items[where[k]] = errorItem(err)
				continue
			}
			raw, err := ipc.Marshal(WireResponse(resp))
			if err != nil {
				return nil, fmt.Errorf("decide_batch: encode response %d: %w", where[k], err)
			}
			items[where[k]] = raw
		}
	}
	return api.BatchResult{Responses: items}, nil
}

// errorItem encodes {"error": {code, message}} for one batch item.
func errorItem(err error) msgpack.RawMessage {
	raw, _ := ipc.Marshal(api.BatchError{Error: &api.Error{Code: api.ErrorCode(err), Message: api.ErrorMessage(err)}})
	return raw
}

// WireResponse is a decision response as it travels: r without what only
// in-process callers see (the letter logits).
func WireResponse(r *decide.Response) *api.Response {
	w := &api.Response{Answers: make(api.Answers, len(r.Answers)), Tokens: r.Tokens, CachedTokens: r.CachedTokens, ElapsedMS: r.ElapsedMS}
	for i, a := range r.Answers {
		w.Answers[i] = api.Answer{Name: a.Name, Options: a.Options, Probs: a.Probs, Answer: a.Answer, Expected: a.Expected}
	}
	return w
}

func (d *Daemon) serveLoad(ctx context.Context, params msgpack.RawMessage) (any, error) {
	var p struct {
		Model *string `json:"model"`
		Pull  string  `json:"pull"`
		Name  string  `json:"name"`
		Int8  *bool   `json:"int8"`
	}
	if len(params) > 0 {
		if err := ipc.Unmarshal(params, &p); err != nil {
			return nil, api.Errorf(api.CodeInvalidParams, "load: params must be {model: string, int8: bool} or {pull: string, name: string, int8: bool}: %v", err)
		}
	}
	switch {
	case p.Pull != "" && p.Model != nil && *p.Model != "":
		return nil, api.Errorf(api.CodeInvalidParams, "load: model and pull exclude each other: give the model to load, or the repository to pull")
	case p.Pull == "" && p.Name != "":
		return nil, api.Errorf(api.CodeInvalidParams, "load: name is only for pull (the name a pulled model gets)")
	}
	useInt8 := d.Int8()
	if p.Int8 != nil {
		useInt8 = *p.Int8
	}
	if p.Pull != "" {
		ref, dest, err := d.pullTarget(api.LoadParams{Pull: p.Pull, Name: p.Name})
		if err != nil {
			return nil, err
		}
		if err := d.Pull(ctx, ref, dest, useInt8); err != nil {
			return nil, err
		}
		return d.Status(), nil
	}
	if p.Model == nil {
		return nil, api.Errorf(api.CodeInvalidParams, "load: params must be {model: NAME_OR_DIR} (\"demo\" for the embedded model) or {pull: REPO}; none given")
	}
	model := *p.Model
	if (strings.ContainsRune(model, filepath.Separator) || model == "." || model == "..") && !filepath.IsAbs(model) {
		return nil, api.Errorf(api.CodeInvalidParams, "load: %q is a relative path, and the daemon's working directory is not the client's: send an absolute path", model)
	}
	dir, err := ResolveModel(model, d.opts.ModelsDir)
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidParams, "load: %v", err)
	}
	if err := d.Switch(ctx, dir, useInt8); err != nil {
		return nil, err
	}
	return d.Status(), nil
}

// Int8 reports the int8 setting of the model in service (Options.Int8
// until one is): what a load that does not say uses.
func (d *Daemon) Int8() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.int8
}

// Switch loads the checkpoint in dir ("" for the embedded demo), with int8
// projections when useInt8 is set, and puts it in service once warmed up;
// requests keep being answered by the current model meanwhile, and those
// running on it when the switch happens finish on it. The load goes on if
// ctx ends first.
func (d *Daemon) Switch(ctx context.Context, dir string, useInt8 bool) error {
	done := make(chan error, 1)
	go func() { done <- d.load(dir, useInt8) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Models lists the checkpoints the daemon can load, marking the current one.
func (d *Daemon) Models() ([]api.ModelEntry, error) {
	list, err := ListModels(d.opts.ModelsDir)
	if err != nil {
		return nil, api.Errorf(api.CodeInternal, "%v", err)
	}
	d.mu.Lock()
	cur := d.cur
	d.mu.Unlock()
	if cur == nil {
		return list, nil
	}
	for i := range list {
		if list[i].Path == cur.src {
			list[i].Current = true
			return list, nil
		}
	}
	// Loaded from a directory outside the models folder.
	m := api.ModelEntry{Name: cur.info.Name, Path: cur.src, Current: true}
	describeModel(os.DirFS(cur.src), cur.src, &m)
	return append(list, m), nil
}
