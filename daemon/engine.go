package daemon

import (
	"context"
	"fmt"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
)

// DemoPath is the path the embedded demo checkpoint reports in status.
const DemoPath = "demo-decision (embedded)"

var _ Engine = (*decide.Engine)(nil)

// DecideLoader returns the [Loader] of real models: decide engines on the
// CPU backend, the embedded demo checkpoint for dir "". cacheLimit bounds
// each engine's prefix snapshots (0: decide's default, < 0: none kept).
func DecideLoader(cacheLimit int64) Loader {
	return func(ctx context.Context, dir string, progress func(done, total int64)) (Engine, ModelStatus, error) {
		if err := ctx.Err(); err != nil {
			return nil, ModelStatus{}, err
		}
		be, err := cpu.New(cpu.Options{})
		if err != nil {
			return nil, ModelStatus{}, fmt.Errorf("cpu backend: %w", err)
		}
		opts := decide.Options{CacheLimit: cacheLimit, Progress: progress}
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
		return e, ModelStatus{Name: info.Name, Path: info.Path, Backend: info.Backend}, nil
	}
}
