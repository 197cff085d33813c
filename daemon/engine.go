package daemon

import (
	"context"
	"fmt"
	"strings"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/gpucheck"
	"github.com/startlux/startlux/internal/bufpool"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
)

// DemoPath is the path the embedded demo checkpoint reports in status.
const DemoPath = "demo-decision (embedded)"

// engine is an [Engine] over a decide engine and the backend it runs on.
type engine struct {
	*decide.Engine
	// be is the engine's backend, closed with it; loader made it (for
	// FallBack).
	be     tensor.Backend
	loader *decideLoader
}

var _ Engine = engine{}
var _ memoryReporter = engine{}

// Memory implements memoryReporter: the model's weights, the prefix
// cache and the backend's pool.
func (e engine) Memory() EngineMemory {
	var m EngineMemory
	m.Weights = e.Info().WeightBytes
	m.Cache, m.CacheLimit = e.CacheStats()
	m.CacheLimit = max(m.CacheLimit, 0)
	if p, ok := e.be.(tensor.Pooler); ok {
		m.Scratch, m.ScratchLimit = p.PoolStats()
	}
	return m
}

// Close implements [Engine]: it closes the decide engine, then its backend
// (closeBackend: its pool of freed buffers is emptied, whoever still refers
// to the backend, and a GPU backend's device, library and buffers, which
// only Close releases, are released).
func (e engine) Close() error {
	err := e.Engine.Close()
	closeBackend(e.be)
	return err
}

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

// setPoolLimit bounds a backend's pool of freed buffers to limit bytes
// (0: none kept), when it keeps one.
func setPoolLimit(be tensor.Backend, limit int64) {
	if p, ok := be.(tensor.Pooler); ok {
		p.SetPoolLimit(limit)
	}
}

// LoaderOptions configures [DecideLoader].
type LoaderOptions struct {
	// CacheLimit bounds each engine's prefix snapshots in bytes (0:
	// decide's default, < 0: none kept).
	CacheLimit int64
	// Backend makes the compute backend of each load; nil means the CPU
	// backend.
	Backend func() (tensor.Backend, error)
	// Fallback, when set, makes the backend a load falls back to when
	// Backend's cannot serve: it does not open or warm up, faults while the
	// model opens, fails the GPU check before serving (package gpucheck),
	// or faults repeatedly at run time. The model then runs on Fallback's
	// backend and its status says why (ModelStatus.BackendNote). Without
	// it each of these fails the load. startlux serve sets it for
	// --backend auto, not for a backend named explicitly.
	Fallback func() (tensor.Backend, error)
	// Check tunes the GPU check (the zero value: all of it; tests leave
	// out the demo model's pass, which is slow under the emulator).
	Check gpucheck.Options
	// Limits bound each request (zero fields: decide's defaults).
	Limits decide.Limits
	// ScratchLimit bounds the freed activation and scratch buffers each
	// backend keeps for reuse (0: bufpool.DefaultLimit, 1 GiB; < 0: none).
	ScratchLimit int64
}

// scratchLimit returns the pool bound the options set.
func (lo LoaderOptions) scratchLimit() int64 {
	switch {
	case lo.ScratchLimit == 0:
		return bufpool.DefaultLimit
	case lo.ScratchLimit < 0:
		return 0
	}
	return lo.ScratchLimit
}

// decideOptions returns the engine options of a load, with int8
// projections when useInt8 is set.
func (lo LoaderOptions) decideOptions(useInt8 bool, progress func(done, total int64)) decide.Options {
	return decide.Options{CacheLimit: lo.CacheLimit, Progress: progress, Limits: lo.Limits, Int8: useInt8}
}

// DecideEstimator returns the [Estimator] of the models [DecideLoader]
// loads with the same options: their footprint read from the checkpoint's
// configuration and tensor headers (decide.Estimate), plus the scratch
// pool's limit. The daemon holds it against the machine's memory before
// every load (Options.Estimate), whichever backend the load then runs on.
func DecideEstimator(lo LoaderOptions) Estimator {
	l := &decideLoader{lo: lo}
	return l.estimate
}

// estimate is the Estimator of the loader's models: what openEngine would
// hold for dir, with int8 projections when useInt8 is set.
func (l *decideLoader) estimate(ctx context.Context, dir string, useInt8 bool) (Footprint, error) {
	if err := ctx.Err(); err != nil {
		return Footprint{}, err
	}
	opts := l.lo.decideOptions(useInt8, nil)
	var f decide.Footprint
	var err error
	if dir == "" {
		f, err = decide.EstimateFS(startlux.DemoModel(), DemoPath, opts, useInt8)
	} else {
		f, err = decide.Estimate(dir, opts, useInt8)
	}
	if err != nil {
		return Footprint{}, err
	}
	return Footprint{Weights: f.Weights, Pass: f.Pass, Cache: f.Cache, Scratch: l.lo.scratchLimit()}, nil
}

// DecideLoader returns the [Loader] of real models: decide engines, on the
// embedded demo checkpoint for dir "". A GPU backend is checked against the
// CPU backend before each model serves on it (see LoaderOptions.Fallback
// for what a failure does).
func DecideLoader(lo LoaderOptions) Loader {
	l := &decideLoader{lo: lo}
	return l.load
}

// OpenEngine opens the decision engine of the checkpoint in dir (as
// [ResolveModel] gives it) on be, the embedded demo checkpoint for dir ""
// (its path being [DemoPath]): what the daemon loads, and what the CLI
// runs in-process.
func OpenEngine(dir string, be tensor.Backend, opts decide.Options) (*decide.Engine, error) {
	if dir == "" {
		return decide.OpenFS(startlux.DemoModel(), DemoPath, be, opts)
	}
	return decide.Open(dir, be, opts)
}

// OpenModel opens the decision engine of the checkpoint a model argument
// names on be: a name in the models folder, [api.DemoName] or "" for the
// embedded demo, or a directory ([ResolveModel] says which). It is what
// startlux decide, eval and calibrate run in-process.
func OpenModel(model string, be tensor.Backend, opts decide.Options) (*decide.Engine, error) {
	dir := ""
	if model != "" && model != api.DemoName {
		modelsDir, err := api.ModelsDir()
		if err != nil {
			return nil, err
		}
		if dir, err = ResolveModel(model, modelsDir); err != nil {
			return nil, err
		}
	}
	return OpenEngine(dir, be, opts)
}

// DecideDocument answers a decision document on e in-process
// ([decide.Engine.DecideDocument]) with the responses as they travel
// ([WireResponse]): what the daemon would answer, nil where errs holds the
// request's error.
func DecideDocument(ctx context.Context, e *decide.Engine, d *decide.Document) ([]*api.Response, []error) {
	resps, errs := e.DecideDocument(ctx, d)
	wire := make([]*api.Response, len(resps))
	for i, r := range resps {
		if r != nil {
			wire[i] = WireResponse(r)
		}
	}
	return wire, errs
}

// openEngine opens the checkpoint in dir ("" for the embedded demo) on be
// with the loader's options, with int8 projections when useInt8 is set.
func (l *decideLoader) openEngine(dir string, be tensor.Backend, useInt8 bool, progress func(done, total int64)) (*decide.Engine, error) {
	return OpenEngine(dir, be, l.lo.decideOptions(useInt8, progress))
}

// modelStatus is the status of e, open on be.
func modelStatus(e *decide.Engine, be tensor.Backend) api.ModelStatus {
	info := e.Info()
	st := api.ModelStatus{Name: info.Name, Path: info.Path, Backend: info.Backend,
		Int8: info.Int8 != "", Int8Kernel: info.Int8, Calibrated: !info.Derived}
	if _, err := model.Int8Kernel(be); err != nil {
		st.Int8Unavailable = strings.TrimPrefix(err.Error(), "int8: ")
	}
	return st
}
