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
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/hub"
	"github.com/startlux/startlux/internal/sysmem"
	"github.com/startlux/startlux/value"
)

// Engine is what the daemon needs of a loaded decision engine;
// [DecideLoader]'s engines (over *decide.Engine) provide it.
type Engine interface {
	// Prepare validates and tokenises a request for this engine; a bad
	// request (one over a limit included) is a *decide.RequestError.
	Prepare(r *decide.Request) (Job, error)
	// Run answers jobs this engine prepared, together, asking turn (if not
	// nil) before each forward pass, no pass longer than passTokens where
	// the rows allow (0: the engine's bound); results and errors are per
	// job, in order.
	Run(ctx context.Context, jobs []Job, turn decide.Turn, passTokens int) ([]*decide.Response, []error)
	// Limits returns the limits each request is held to.
	Limits() decide.Limits
	// CacheStats returns the bytes held by kept prefix snapshots and their
	// bound.
	CacheStats() (used, limit int64)
	// Close releases the model.
	Close() error
}

// Job is a request an [Engine] prepared.
type Job interface {
	// Tokens is the request's cost: the tokens of every row it renders.
	Tokens() int
}

// Loader opens the checkpoint in dir ("" for the embedded demo), with its
// large projections as int8 products when useInt8 is set (refusing when the
// backend has none), reporting bytes read (and converted) through
// progress, and describes it.
type Loader func(ctx context.Context, dir string, useInt8 bool, progress func(done, total int64)) (Engine, api.ModelStatus, error)

// Options configures a [Daemon].
type Options struct {
	// Load opens models (required).
	Load Loader
	// Model is the checkpoint served first: a directory, or "" for the
	// embedded demo.
	Model string
	// ModelsDir is the folder listed by the models method and searched by
	// the load method (default [api.ModelsDir]).
	ModelsDir string
	// QueueLimit is how many decisions may wait; beyond it requests fail
	// with overloaded (default 4096).
	QueueLimit int
	// MaxTokensInFlight bounds the tokens (Job.Tokens) of the decisions
	// queued and running; a request that would pass it fails with
	// overloaded at once (default DefaultMaxTokensInFlight).
	MaxTokensInFlight int64
	// MaxBatch is the most requests handed to the engine in one call
	// (default 64); the engine packs their rows into passes itself.
	MaxBatch int
	// BatchTokens is the most tokens of the requests handed to the engine
	// together (default DefaultBatchTokens): a larger request runs in a
	// call of its own, its passes taking turns with those of the others.
	BatchTokens int
	// PassTokens bounds the forward passes of such a large request
	// (default DefaultPassTokens), so that a small request waits for at
	// most one short pass; batches of small requests run in the engine's
	// own passes.
	PassTokens int
	// NoWarmup skips the warm-up requests run after each load.
	NoWarmup bool
	// Estimate, if set, tells what a model will hold before it is loaded:
	// every load is then checked against the machine's memory first, and
	// refused when it cannot fit (docs/protocol.md, "Memory").
	Estimate Estimator
	// Memory reports the machine's memory for that check (nil:
	// SystemMemory); tests inject sizes.
	Memory func() Memory
	// IdleUnload unloads the model once no decision has come for this
	// long (0: never); the next decision loads it again.
	IdleUnload time.Duration
	// Hub makes the client a load with pull downloads through; nil means
	// one configured from HF_ENDPOINT and HF_TOKEN in the environment.
	Hub func() (*hub.Client, error)
	// PullOptions tune those downloads (tests set FreeSpace and Now).
	PullOptions hub.PullOptions
	// MaxDeviceFaults is how many batches in a row may fail on the GPU
	// (tensor.ErrDeviceFault) before the model is reloaded on the loader's
	// fallback backend (default DefaultMaxDeviceFaults).
	MaxDeviceFaults int
	// Int8 loads the first model with int8 projections; a load that does
	// not say (the load method without "int8") keeps the setting of the
	// last model put in service.
	Int8 bool
	// Progress, if set, is told about load progress (for terminals).
	Progress func(api.LoadProgress)
	// Logger receives events; nil discards them.
	Logger *slog.Logger
}

// Defaults of [Options].
const (
	// DefaultMaxTokensInFlight admits sixteen requests at the default
	// per-request limit at once.
	DefaultMaxTokensInFlight = 16 * decide.DefaultMaxRequestTokens
	// DefaultBatchTokens lets some tens of small requests share an engine
	// call.
	DefaultBatchTokens = 4096
	// DefaultPassTokens bounds a large request's forward passes: long
	// enough to keep a pass efficient (on the CPU a token costs about the
	// same in passes of 256 as of 16384), short enough that a small request
	// behind it waits about as long as it runs (docs/bench-serve.md).
	DefaultPassTokens = 256
)

// Daemon serves decisions; it implements ipc.Handler. Create it with
// [New], start it with [Daemon.Start], stop it with [Daemon.Close].
type Daemon struct {
	opts    Options // read-only after New
	started time.Time
	ctx     context.Context // ends at Close: stops loads and batches
	cancel  context.CancelFunc
	wake    chan struct{} // nudges the worker (capacity 1)
	done    chan struct{} // closed when the worker has exited

	mu       sync.Mutex // guards the fields below, and loaded.refs and retired
	state    string
	loadErr  string
	cur      *loaded
	progress *api.LoadProgress
	queue    []*job
	// changed is closed, and replaced, when cur, state or stopping change:
	// requests waiting for a model watch it.
	changed  chan struct{}
	waiting  int   // requests waiting for a model to be prepared on
	inFlight int64 // tokens of the jobs queued and running
	// smallRunning counts the batches of small requests being answered
	// (at most one): while one runs, small requests gather in the queue.
	smallRunning int
	lastBatch    int // size of the last batch handed to the engine
	stopping     bool
	lastFree     time.Time // the last debug.FreeOSMemory
	freeLater    bool      // one is scheduled
	// memNote is status's memory note (a release before a load).
	memNote string
	// idleUnload is the IdleUnload option, changed by configure;
	// lastActive is when a decision last came or was answered, or a model
	// became ready.
	idleUnload time.Duration
	lastActive time.Time
	// unloaded is the model taken out of service by an unload (nil when
	// none); idleSince is lastActive then. reloading is set while the
	// decision that found it unloaded has its load under way.
	unloaded  *loaded
	idleSince time.Time
	reloading bool
	idleWake  chan struct{} // nudges the idle watcher (capacity 1)
	faults    faultCount
	int8      bool // the int8 setting of the model in service (Options.Int8 before the first)

	loadMu  sync.Mutex     // one load at a time
	running sync.WaitGroup // batches being answered
	passes  turns          // hands the model to the batches' passes in turn
	prepSem chan struct{}  // bounds the requests being prepared at once

	served, failed atomic.Uint64
	lat            latencies
}

// loaded is a model in service.
type loaded struct {
	eng  Engine
	info api.ModelStatus
	src  string // the directory it was loaded from; "" for the demo
	// needs and warning are what the fit check found before its load.
	needs   int64
	warning string
	// refs counts the jobs prepared on it that are not finished, and
	// retired says it has been replaced; it is closed when both allow
	// (guarded by Daemon.mu), and then closed is closed.
	refs    int
	retired bool
	closed  chan struct{}
}

// New returns a daemon; nothing loads until [Daemon.Start].
func New(opts Options) *Daemon {
	if opts.QueueLimit <= 0 {
		opts.QueueLimit = 4096
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 64
	}
	if opts.MaxTokensInFlight <= 0 {
		opts.MaxTokensInFlight = DefaultMaxTokensInFlight
	}
	if opts.BatchTokens <= 0 {
		opts.BatchTokens = DefaultBatchTokens
	}
	if opts.PassTokens <= 0 {
		opts.PassTokens = DefaultPassTokens
	}
	if opts.MaxDeviceFaults <= 0 {
		opts.MaxDeviceFaults = DefaultMaxDeviceFaults
	}
	if opts.ModelsDir == "" {
		opts.ModelsDir, _ = api.ModelsDir()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Daemon{
		opts:       opts,
		started:    time.Now(),
		ctx:        ctx,
		cancel:     cancel,
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		state:      api.StateLoading,
		changed:    make(chan struct{}),
		idleUnload: opts.IdleUnload,
		lastActive: time.Now(),
		idleWake:   make(chan struct{}, 1),
		prepSem:    make(chan struct{}, runtime.GOMAXPROCS(0)),
		int8:       opts.Int8,
	}
}

// Start begins loading the first model in the background and starts the
// scheduler. Requests are accepted at once: decisions wait in the queue
// until the model is ready.
func (d *Daemon) Start() {
	go d.worker()
	go d.watchIdle()
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
	d.changedLocked()
	d.mu.Unlock()
	d.nudge()
	var err error
	finished := make(chan struct{})
	go func() {
		<-d.done
		d.running.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		err = fmt.Errorf("close: %w", ctx.Err())
	}
	d.cancel()
	<-finished
	d.mu.Lock()
	m := d.cur
	d.cur = nil
	d.mu.Unlock()
	if m != nil {
		if cerr := d.closeModel(m); cerr != nil && err == nil {
			err = fmt.Errorf("close model: %w", cerr)
		}
	}
	return err
}

// changedLocked tells the requests waiting for a model that cur, state or
// stopping changed.
func (d *Daemon) changedLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// nudge wakes the worker.
func (d *Daemon) nudge() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Status reports what the daemon is doing.
func (d *Daemon) Status() api.Status {
	d.mu.Lock()
	st := api.Status{
		State:          d.state,
		Error:          d.loadErr,
		Queued:         len(d.queue) + d.waiting,
		TokensInFlight: d.inFlight,
		PID:            os.Getpid(),
		Limits: api.Limits{
			MaxValues:         value.MaxValues,
			MaxTokensInFlight: d.opts.MaxTokensInFlight,
			MaxQueued:         d.opts.QueueLimit,
		},
	}
	if d.cur != nil {
		st.Model = d.cur.info
		st.SnapshotBytes, st.SnapshotLimit = d.cur.eng.CacheStats()
		l := d.cur.eng.Limits()
		st.Limits.MaxQuestions, st.Limits.MaxEvidenceTokens, st.Limits.MaxRequestTokens = l.MaxQuestions, l.MaxEvidenceTokens, l.MaxRequestTokens
	} else if d.unloaded != nil {
		st.Model = d.unloaded.info
	} else {
		st.Model.Path = d.opts.Model
	}
	if d.state == api.StateUnloaded {
		st.IdleSince = d.idleSince.Format(time.RFC3339)
	}
	st.IdleUnloadS = d.idleUnload.Seconds()
	st.Memory = d.memoryStatus(d.cur)
	if d.progress != nil {
		p := *d.progress
		st.Progress = &p
	}
	d.mu.Unlock()
	st.RequestsServed = d.served.Load()
	st.RequestsFailed = d.failed.Load()
	st.LatencyP50MS, st.LatencyP99MS = d.lat.percentiles()
	st.UptimeS = time.Since(d.started).Seconds()
	st.Memory.Resident, _ = sysmem.Resident()
	mem := d.machine()
	if mem.Known {
		st.Memory.Available = mem.Available
	}
	st.Memory.GPUWorkingSet = mem.GPUWorkingSet
	return st
}
