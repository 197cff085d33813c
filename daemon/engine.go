package daemon

import (
	"context"
	"fmt"
	"strings"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/internal/bufpool"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
)

// DemoPath is the path the embedded demo checkpoint reports in status.
const DemoPath = "demo-decision (embedded)"

// engine is an [Engine] over a decide engine and the backend it runs on.
type engine struct {
	*decide.Engine
	be tensor.Backend
}

var _ Engine = engine{}
var _ memoryReporter = engine{}

// Memory implements memoryReporter: the model's weights, the prefix
// cache and the backend's pool.
func (e engine) Memory() EngineMemory {
	var m EngineMemory
	m.Weights = e.Engine.WeightBytes()
	m.Cache, m.CacheLimit = e.CacheStats()
	m.CacheLimit = max(m.CacheLimit, 0)
	if p, ok := e.be.(tensor.Pooler); ok {
		m.Scratch, m.ScratchLimit = p.PoolStats()
	}
	return m
}

// Close closes the engine and then the backend: its pool of freed buffers
// is emptied (whoever still refers to the backend), and a backend holding
// device resources (Metal's buffers and pipelines), which only Close
// releases, is closed.
func (e engine) Close() error {
	err := e.Engine.Close()
	setPoolLimit(e.be, 0)
	if c, ok := e.be.(interface{ Close() }); ok {
		c.Close()
	}
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

// decideOptions returns the engine options of a load.
func (lo LoaderOptions) decideOptions(progress func(done, total int64)) decide.Options {
	return decide.Options{CacheLimit: lo.CacheLimit, Progress: progress, Limits: lo.Limits}
}

// DecideEstimator returns the [Estimator] of the models [DecideLoader]
// loads with the same options: their footprint read from the checkpoint's
// configuration and tensor headers (decide.Estimate), plus the scratch
// pool's limit.
func DecideEstimator(lo LoaderOptions) Estimator {
	return func(ctx context.Context, dir string, useInt8 bool) (Footprint, error) {
		if err := ctx.Err(); err != nil {
			return Footprint{}, err
		}
		opts := lo.decideOptions(nil)
		opts.Int8 = useInt8
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
		return Footprint{Weights: f.Weights, Pass: f.Pass, Cache: f.Cache, Scratch: lo.scratchLimit()}, nil
	}
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
		setPoolLimit(be, lo.scratchLimit())
		opts := lo.decideOptions(progress)
		opts.Int8 = useInt8
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
			Int8: info.Int8 != "", Int8Kernel: info.Int8, WeightBytes: info.WeightBytes}
		if _, err := model.Int8Kernel(be); err != nil {
			st.Int8Unavailable = strings.TrimPrefix(err.Error(), "int8: ")
		}
		return engine{e, be}, st, nil
	}
}
