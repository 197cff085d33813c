package daemon

import (
	"context"
	"fmt"
	"strings"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
)

// DemoPath is the path the embedded demo checkpoint reports in status.
const DemoPath = "demo-decision (embedded)"

// engine is an [Engine] over a decide engine.
type engine struct {
	*decide.Engine
}

var _ Engine = engine{}

// Prepare implements [Engine].
func (e engine) Prepare(r *decide.Request) (Job, error) {
	p, err := e.Engine.Prepare(r)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Run implements [Engine].
func (e engine) Run(ctx context.Context, jobs []Job, turn decide.Turn, passTokens int) ([]*decide.Response, []error) {
	ps := make([]*decide.Prepared, len(jobs))
	for i, j := range jobs {
		p, ok := j.(*decide.Prepared)
		if !ok {
			panic(fmt.Sprintf("daemon: a %T handed to a decide engine", j))
		}
		ps[i] = p
	}
	return e.DecidePrepared(ctx, ps, turn, passTokens)
}

// LoaderOptions configures [DecideLoader].
type LoaderOptions struct {
	// CacheLimit bounds each engine's prefix snapshots in bytes (0:
	// decide's default, < 0: none kept).
	CacheLimit int64
	// Backend makes the compute backend of each load; nil means the CPU
	// backend.
	Backend func() (tensor.Backend, error)
	// Limits bound each request (zero fields: decide's defaults).
	Limits decide.Limits
}

// DecideLoader returns the [Loader] of real models: decide engines, on the
// embedded demo checkpoint for dir "".
func DecideLoader(lo LoaderOptions) Loader {
	return func(ctx context.Context, dir string, useInt8 bool, progress func(done, total int64)) (Engine, api.ModelStatus, error) {
		if err := ctx.Err(); err != nil {
			return nil, api.ModelStatus{}, err
		}
		newBackend := lo.Backend
		if newBackend == nil {
			newBackend = func() (tensor.Backend, error) { return cpu.New(cpu.Options{}) }
		}
		be, err := newBackend()
		if err != nil {
			return nil, api.ModelStatus{}, fmt.Errorf("backend: %w", err)
		}
		if w, ok := be.(tensor.WarmUpper); ok {
			// Compile the backend's kernels before any decision waits on them.
			if err := w.WarmUp(ctx); err != nil {
				return nil, api.ModelStatus{}, fmt.Errorf("backend %s: warm up: %w", be.Name(), err)
			}
		}
		opts := decide.Options{CacheLimit: lo.CacheLimit, Progress: progress, Limits: lo.Limits, Int8: useInt8}
		var e *decide.Engine
		if dir == "" {
			e, err = decide.OpenFS(startlux.DemoModel(), DemoPath, be, opts)
		} else {
			e, err = decide.Open(dir, be, opts)
		}
		if err != nil {
			return nil, api.ModelStatus{}, err
		}
		info := e.Info()
		st := api.ModelStatus{Name: info.Name, Path: info.Path, Backend: info.Backend,
			Int8: info.Int8 != "", Int8Kernel: info.Int8, WeightBytes: info.WeightBytes, Calibrated: !info.Derived}
		if _, err := model.Int8Kernel(be); err != nil {
			st.Int8Unavailable = strings.TrimPrefix(err.Error(), "int8: ")
		}
		return engine{e}, st, nil
	}
}
