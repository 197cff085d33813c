// Package daemon is StartLux's service: a model manager that loads a
// checkpoint in the background, warms it up and switches models atomically,
// a scheduler that queues decision requests from every connection and hands
// them to the engine in batches, and the protocol methods (decide,
// decide_batch, status, models, load, ping) served through package ipc.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/startlux/startlux/decide"
)

// Engine is what the daemon needs of a loaded decision engine;
// *decide.Engine provides it (see [DecideLoader]).
type Engine interface {
	// DecideBatch answers many requests at once; results and errors are
	// per request, in order.
	DecideBatch(ctx context.Context, reqs []*decide.Request) ([]*decide.Response, []error)
	// CacheStats returns the bytes held by kept prefix snapshots and their
	// bound.
	CacheStats() (used, limit int64)
	// Close releases the model.
	Close() error
}

// Loader opens the checkpoint in dir ("" for the embedded demo), with its
// large projections as int8 products when useInt8 is set (refusing when the
// backend has none), reporting bytes read (and converted) through
// progress, and describes it.
type Loader func(ctx context.Context, dir string, useInt8 bool, progress func(done, total int64)) (Engine, ModelStatus, error)

// Options configures a [Daemon].
type Options struct {
	// Load opens models (required).
	Load Loader
	// Model is the checkpoint served first: a directory, or "" for the
	// embedded demo.
	Model string
	// ModelsDir is the folder listed by the models method and searched by
	// the load method (default [ModelsDir]).
	ModelsDir string
	// QueueLimit is how many decisions may wait; beyond it requests fail
	// with overloaded (default 4096).
	QueueLimit int
	// MaxBatch is the most requests handed to the engine in one call
	// (default 64); the engine packs their rows into passes itself.
	MaxBatch int
	// NoWarmup skips the warm-up requests run after each load.
	NoWarmup bool
	// Int8 loads the first model with int8 projections; a load that does
	// not say (the load method without "int8") keeps the setting of the
	// last model put in service.
	Int8 bool
	// Progress, if set, is told about load progress (for terminals).
	Progress func(LoadProgress)
	// Logger receives events; nil discards them.
	Logger *slog.Logger
}

// Daemon serves decisions; it implements ipc.Handler. Create it with
// [New], start it with [Daemon.Start], stop it with [Daemon.Close].
type Daemon struct {
	opts    Options // read-only after New
	started time.Time
	ctx     context.Context // ends at Close: stops loads and batches
	cancel  context.CancelFunc
	wake    chan struct{} // nudges the worker (capacity 1)
	done    chan struct{} // closed when the worker has exited

	mu        sync.Mutex // guards state, loadErr, cur, progress, queue, lastBatch, stopping, int8
	state     string
	int8      bool // the int8 setting of the model in service (Options.Int8 before the first)
	loadErr   string
	cur       *loaded
	progress  *LoadProgress
	queue     []*job
	lastBatch int // size of the last batch handed to the engine
	stopping  bool

	loadMu sync.Mutex // one load at a time

	served, failed atomic.Uint64
	lat            latencies
}

// loaded is a model in service.
type loaded struct {
	eng  Engine
	info ModelStatus
	src  string // the directory it was loaded from; "" for the demo
	// refs counts batches running on it and retired says it has been
	// replaced; it is closed when both allow (guarded by Daemon.mu).
	refs    int
	retired bool
}

// New returns a daemon; nothing loads until [Daemon.Start].
func New(opts Options) *Daemon {
	if opts.QueueLimit <= 0 {
		opts.QueueLimit = 4096
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 64
	}
	if opts.ModelsDir == "" {
		opts.ModelsDir, _ = ModelsDir()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Daemon{
		opts:    opts,
		started: time.Now(),
		ctx:     ctx,
		cancel:  cancel,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		state:   StateLoading,
		int8:    opts.Int8,
	}
}

// Start begins loading the first model in the background and starts the
// scheduler. Requests are accepted at once: decisions wait in the queue
// until the model is ready.
func (d *Daemon) Start() {
	go d.worker()
	go func() {
		if err := d.load(d.opts.Model, d.opts.Int8); err != nil {
			d.opts.Logger.Error("loading the model failed", "model", d.opts.Model, "err", err)
		}
	}()
}

// Close stops the daemon: decisions already queued are answered, then the
// scheduler stops, loads under way are abandoned and the model is closed.
// New decisions fail with shutting_down. If ctx ends first, what is still
// queued fails.
func (d *Daemon) Close(ctx context.Context) error {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	d.nudge()
	var err error
	select {
	case <-d.done:
	case <-ctx.Done():
		err = fmt.Errorf("close: %w", ctx.Err())
	}
	d.cancel()
	<-d.done
	d.mu.Lock()
	m := d.cur
	d.cur = nil
	d.mu.Unlock()
	if m != nil {
		if cerr := m.eng.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close model: %w", cerr)
		}
	}
	return err
}

// nudge wakes the worker.
func (d *Daemon) nudge() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Status reports what the daemon is doing.
func (d *Daemon) Status() Status {
	d.mu.Lock()
	st := Status{
		State:  d.state,
		Error:  d.loadErr,
		Queued: len(d.queue),
		PID:    os.Getpid(),
	}
	if d.cur != nil {
		st.Model = d.cur.info
		st.SnapshotBytes, st.SnapshotLimit = d.cur.eng.CacheStats()
	} else {
		st.Model.Path = d.opts.Model
	}
	if d.progress != nil {
		p := *d.progress
		st.Progress = &p
	}
	d.mu.Unlock()
	st.RequestsServed = d.served.Load()
	st.RequestsFailed = d.failed.Load()
	st.LatencyP50MS, st.LatencyP99MS = d.lat.percentiles()
	st.UptimeS = time.Since(d.started).Seconds()
	return st
}
