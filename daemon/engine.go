package daemon

import (
	"context"
	"fmt"
	"strings"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
)

// DemoPath is the path the embedded demo checkpoint reports in status.
const DemoPath = "demo-decision (embedded)"

var _ Engine = (*decide.Engine)(nil)

// LoaderOptions configures [DecideLoader].
type LoaderOptions struct {
	// CacheLimit bounds each engine's prefix snapshots in bytes (0:
	// decide's default, < 0: none kept).
	CacheLimit int64
	// Backend makes the compute backend of each load; nil means the CPU
	// backend.
	Backend func() (tensor.Backend, error)
}

// DecideLoader returns the [Loader] of real models: decide engines, on the
// embedded demo checkpoint for dir "".
func DecideLoader(lo LoaderOptions) Loader {
	return func(ctx context.Context, dir string, useInt8 bool, progress func(done, total int64)) (Engine, ModelStatus, error) {
		if err := ctx.Err(); err != nil {
			return nil, ModelStatus{}, err
		}
		newBackend := lo.Backend
		if newBackend == nil {
			newBackend = func() (tensor.Backend, error) { return cpu.New(cpu.Options{}) }
		}
		be, err := newBackend()
		if err != nil {
			return nil, ModelStatus{}, fmt.Errorf("backend: %w", err)
		}
		if w, ok := be.(tensor.WarmUpper); ok {
			// Compile the backend's kernels before any decision waits on them.
			if err := w.WarmUp(ctx); err != nil {
				return nil, ModelStatus{}, fmt.Errorf("backend %s: warm up: %w", be.Name(), err)
			}
		}
		opts := decide.Options{CacheLimit: lo.CacheLimit, Progress: progress, Int8: useInt8}
		var e *decide.Engine
		if dir == "" {
			e, err = decide.OpenFS(startlux.DemoModel(), DemoPath, be, opts)
		} else {
			e, err = decide.Open(dir, be, opts)
		}
		if err != nil {
			return nil, ModelStatus{}, err
		}
		info := e.Info()
		st := ModelStatus{Name: info.Name, Path: info.Path, Backend: info.Backend,
			Int8: info.Int8 != "", Int8Kernel: info.Int8, WeightBytes: info.WeightBytes}
		if _, err := model.Int8Kernel(be); err != nil {
			st.Int8Unavailable = strings.TrimPrefix(err.Error(), "int8: ")
		}
		return e, st, nil
	}
}
