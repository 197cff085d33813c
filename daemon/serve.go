package daemon

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/backends"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/internal/settings"
	"github.com/startlux/startlux/metal"
)

// DefaultIdleUnload is how long a daemon set up by [ServeConfig] waits
// without a decision before it unloads the model, unless told otherwise.
const DefaultIdleUnload = 30 * time.Minute

// ServeConfig is a daemon as "startlux serve" sets it up, given as values
// (the command's flags, or what a launcher passes): [ServeConfig.RunOptions]
// resolves it into what [Run] takes.
type ServeConfig struct {
	// Socket is the socket path ("": ipc.DefaultSocketPath()).
	Socket string
	// Model is the checkpoint served first, as [ResolveModel] takes it: a
	// directory, a name in the models folder, or "" for the embedded demo.
	Model string
	// Backend names the compute backend as backends.PlanFor takes it:
	// auto tries Metal and falls back to the CPU backend; a backend named
	// explicitly serves or fails.
	Backend string
	// CacheLimit, ScratchLimit and MaxRequestTokens bound each load
	// ([LoaderOptions]: 0 for the defaults).
	CacheLimit       int64
	ScratchLimit     int64
	MaxRequestTokens int
	// MaxBatch, MaxTokensInFlight, PassTokens and Int8 are those of
	// [Options] (0 for the defaults).
	MaxBatch          int
	MaxTokensInFlight int64
	PassTokens        int
	Int8              bool
	// IdleUnload, when not nil, is the idle-unload time (0: never; < 0 is
	// refused); nil means the app's setting (internal/settings), or
	// [DefaultIdleUnload] when there is none.
	IdleUnload *time.Duration
	// Progress, Logger and Listening are those of [Options] and
	// [RunOptions].
	Progress  func(api.LoadProgress)
	Logger    *slog.Logger
	Listening func(path string)
}

// RunOptions resolves c: the models folder and the first model in it, the
// backend's plan (a backend named explicitly is opened and closed once
// here, so that one that cannot open fails now rather than in the
// background), the fit check's view of the machine (with the GPU's working
// set when the model may run on Metal), and the idle-unload time.
func (c ServeConfig) RunOptions() (RunOptions, error) {
	modelsDir, err := api.ModelsDir()
	if err != nil {
		return RunOptions{}, err
	}
	dir, err := ResolveModel(c.Model, modelsDir)
	if err != nil {
		return RunOptions{}, err
	}
	plan, err := backends.PlanFor(c.Backend, 0)
	if err != nil {
		return RunOptions{}, err
	}
	if plan.Fallback == nil {
		be, err := plan.Open()
		if err != nil {
			return RunOptions{}, err
		}
		closeBackend(be)
	}
	idle, err := idleUnload(c.IdleUnload)
	if err != nil {
		return RunOptions{}, err
	}
	lo := LoaderOptions{
		CacheLimit:   c.CacheLimit,
		ScratchLimit: c.ScratchLimit,
		Limits:       decide.Limits{MaxRequestTokens: c.MaxRequestTokens},
		Backend:      plan.Open,
		Fallback:     plan.Fallback,
	}
	return RunOptions{
		Socket: c.Socket,
		Daemon: Options{
			Load:     DecideLoader(lo),
			Estimate: DecideEstimator(lo),
			// The fit check holds a model on Metal to the GPU's working
			// set as well: for metal, and for auto where it tries Metal
			// first.
			Memory:            machineMemory(c.Backend == "metal" || plan.Fallback != nil),
			IdleUnload:        idle,
			Model:             dir,
			ModelsDir:         modelsDir,
			MaxBatch:          c.MaxBatch,
			MaxTokensInFlight: c.MaxTokensInFlight,
			PassTokens:        c.PassTokens,
			Int8:              c.Int8,
			Progress:          c.Progress,
			Logger:            c.Logger,
		},
		Listening: c.Listening,
	}, nil
}

// idleUnload returns the idle-unload time: given when not nil, else the
// app's setting (internal/settings), else [DefaultIdleUnload].
func idleUnload(given *time.Duration) (time.Duration, error) {
	if given != nil {
		if *given < 0 {
			return 0, fmt.Errorf("--idle-unload %v: want a duration, or 0 for never", *given)
		}
		return *given, nil
	}
	path, err := settings.Path()
	if err != nil {
		return DefaultIdleUnload, nil
	}
	s, err := settings.Load(path)
	if err != nil {
		return 0, fmt.Errorf("%w (fix or remove the file; --idle-unload overrides it)", err)
	}
	if d, ok, _ := s.IdleUnloadDuration(); ok {
		return d, nil
	}
	return DefaultIdleUnload, nil
}

// machineMemory returns the fit check's view of the machine: its memory,
// and when the model may run on Metal (onMetal) the GPU's recommended
// working set, read once.
func machineMemory(onMetal bool) func() Memory {
	var ws int64
	if onMetal {
		if n, err := metal.RecommendedWorkingSet(metal.Options{}); err == nil {
			ws = int64(n)
		}
	}
	return func() Memory {
		m := SystemMemory()
		m.GPUWorkingSet = ws
		return m
	}
}
