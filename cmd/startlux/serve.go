package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/backends"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/human"
	"github.com/startlux/startlux/internal/settings"
	"github.com/startlux/startlux/ipc"
	"github.com/startlux/startlux/metal"
)

// runServe is "startlux serve": the daemon. It listens at once, loads the
// model in the background (progress on a terminal), and stops gracefully on
// SIGTERM or SIGINT (main ties ctx to them).
func runServe(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: startlux serve [flags]\n\nRuns the daemon: serves decisions on the socket until SIGTERM or SIGINT.\n\nflags:")
		fs.PrintDefaults()
	}
	model := fs.String("model", "", "checkpoint `DIR` or a name in the models folder (default: the embedded demo model)")
	socket := fs.String("socket", "", "socket `PATH` (default: "+ipc.DefaultSocketPath()+")")
	cacheLimit := fs.Int64("cache-limit", 0, "`BYTES` of prefix snapshots kept (0: the engine's default, -1: none)")
	maxBatch := fs.Int("max-batch", 0, "most requests answered in one engine call (0: 64); 1 turns batching across clients off")
	useInt8 := fs.Bool("int8", false, "run the large projections as int8 products (the load method's \"int8\" changes it); refused by a backend without them")
	passTokens := fs.Int("pass-tokens", 0, "longest forward pass of a large request in `TOKENS` (0: 256); passes of concurrent requests take turns")
	inFlight := fs.Int64("max-tokens-in-flight", 0, "`TOKENS` of the decisions queued and running beyond which requests get overloaded (0: 4194304)")
	maxRequest := fs.Int("max-request-tokens", 0, "most `TOKENS` of all the rows one request renders (0: 262144); with the model's shapes it sets the memory the largest pass may take, which the fit check counts")
	scratchLimit := fs.Int64("scratch-limit", 0, "`BYTES` of freed activation and scratch buffers the backend keeps for reuse, least recently used dropped first (0: 1 GiB, -1: none)")
	idleUnload := fs.Duration("idle-unload", defaultIdleUnload, "unload the model after this `DURATION` without a decision (0: never; when not given, the app's setting, else 30m); the next decision loads it again")
	backend := backendFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	modelsDir, err := api.ModelsDir()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	dir, err := daemon.ResolveModel(*model, modelsDir)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	plan, err := backends.PlanFor(*backend, 0)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if plan.Fallback == nil { // a backend named explicitly: fail now, not in the background
		be, err := plan.Open()
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if c, ok := be.(interface{ Close() }); ok {
			c.Close()
		}
	}
	// The fit check holds a model on Metal to the GPU's working set as
	// well: for metal, and for auto where it tries Metal first.
	machine := machineMemory(*backend == "metal" || plan.Fallback != nil)
	idle, err := idleUnloadSetting(fs, *idleUnload)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	lo := daemon.LoaderOptions{
		CacheLimit:   *cacheLimit,
		ScratchLimit: *scratchLimit,
		Limits:       decide.Limits{MaxRequestTokens: *maxRequest},
		Backend:      plan.Open,
		Fallback:     plan.Fallback,
	}
	logger := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pr := newProgressPrinter(env.stderr)
	err = daemon.Run(ctx, daemon.RunOptions{
		Socket: *socket,
		Daemon: daemon.Options{
			Load:              daemon.DecideLoader(lo),
			Estimate:          daemon.DecideEstimator(lo),
			Memory:            machine,
			IdleUnload:        idle,
			Model:             dir,
			ModelsDir:         modelsDir,
			MaxBatch:          *maxBatch,
			MaxTokensInFlight: *inFlight,
			PassTokens:        *passTokens,
			Int8:              *useInt8,
			Progress:          pr.show,
			Logger:            logger,
		},
		Listening: func(path string) { fmt.Fprintf(env.stderr, "startlux: listening on %s\n", path) },
	})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintln(env.stderr, "startlux: stopped")
	return nil
}

// defaultIdleUnload is how long serve waits without a decision before it
// unloads the model, unless told otherwise.
const defaultIdleUnload = 30 * time.Minute

// idleUnloadSetting returns the idle-unload time: the flag when given, else
// the app's setting (internal/settings), else the default.
func idleUnloadSetting(fs *flag.FlagSet, flagValue time.Duration) (time.Duration, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "idle-unload" })
	if given {
		if flagValue < 0 {
			return 0, fmt.Errorf("--idle-unload %v: want a duration, or 0 for never", flagValue)
		}
		return flagValue, nil
	}
	path, err := settings.Path()
	if err != nil {
		return defaultIdleUnload, nil
	}
	s, err := settings.Load(path)
	if err != nil {
		return 0, fmt.Errorf("%w (fix or remove the file; --idle-unload overrides it)", err)
	}
	if d, ok, _ := s.IdleUnloadDuration(); ok {
		return d, nil
	}
	return defaultIdleUnload, nil
}

// machineMemory returns the fit check's view of the machine: its memory,
// and when the model may run on Metal (onMetal) the GPU's recommended
// working set, read once.
func machineMemory(onMetal bool) func() daemon.Memory {
	var ws int64
	if onMetal {
		if n, err := metal.RecommendedWorkingSet(metal.Options{}); err == nil {
			ws = int64(n)
		}
	}
	return func() daemon.Memory {
		m := daemon.SystemMemory()
		m.GPUWorkingSet = ws
		return m
	}
}

// progressPrinter shows load progress: a line redrawn in place on a
// terminal, one line per phase otherwise (a log file).
type progressPrinter struct {
	w        io.Writer
	terminal bool

	mu    sync.Mutex // guards last and phase
	last  time.Time
	phase string
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	return &progressPrinter{w: w, terminal: isTerminal(w)}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// modelLabel names a model directory for people.
func modelLabel(dir string) string { return human.ModelLabel(dir) }

func (p *progressPrinter) show(lp api.LoadProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	newPhase := lp.Phase != p.phase
	p.phase = lp.Phase
	switch lp.Phase {
	case api.PhasePulling:
		if newPhase {
			if p.terminal {
				fmt.Fprint(p.w, "\r\033[K")
			}
			fmt.Fprintf(p.w, "startlux: pulling %s into %s (\"startlux status\" shows the progress)\n", lp.Repo, lp.Model)
		}
	case api.StateLoading:
		if p.terminal {
			if !newPhase && time.Since(p.last) < 100*time.Millisecond && lp.Done != lp.Total {
				return
			}
			p.last = time.Now()
			pct := 0.0
			if lp.Total > 0 {
				pct = 100 * float64(lp.Done) / float64(lp.Total)
			}
			fmt.Fprintf(p.w, "\r\033[Kloading %s: %3.0f%% of %.1f MB", modelLabel(lp.Model), pct, float64(lp.Total)/1e6)
		} else if newPhase {
			fmt.Fprintf(p.w, "startlux: loading %s\n", modelLabel(lp.Model))
		}
	case api.StateWarming:
		if p.terminal {
			fmt.Fprintf(p.w, "\r\033[Kwarming up %s", modelLabel(lp.Model))
		} else {
			fmt.Fprintf(p.w, "startlux: warming up %s\n", modelLabel(lp.Model))
		}
	case api.StateReady, api.StateFailed:
		if p.terminal {
			fmt.Fprint(p.w, "\r\033[K")
		}
		if lp.Phase == api.StateReady {
			fmt.Fprintf(p.w, "startlux: ready: %s\n", modelLabel(lp.Model))
		} else {
			fmt.Fprintf(p.w, "startlux: loading %s failed (\"startlux status\" says why)\n", modelLabel(lp.Model))
		}
	}
}
