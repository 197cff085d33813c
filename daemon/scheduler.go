package daemon

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/decide"
)

// A decision travels like this: its handler waits for a model, prepares the
// request on it (validation and tokenisation, off the worker) and queues the
// job, its tokens counted against MaxTokensInFlight; the worker hands queued
// jobs of one model to the engine in batches (small requests together, a
// large one alone), each batch on a goroutine of its own; and the batches'
// forward passes take turns on the model in the order they ask, so that a
// small request waits for at most one pass of a large one.

// job is one decision on its way through the daemon.
type job struct {
	ctx     context.Context // the client's; a job whose client left is dropped
	m       *loaded         // the model it was prepared on (a reference held)
	prep    Job
	cost    int64 // prep.Tokens()
	arrived time.Time
	done    chan result // buffered: never blocks
}

// result is a job's outcome.
type result struct {
	resp *decide.Response
	err  error
}

// acquireModel waits until a model serves and returns it with a reference
// held, or fails when none can be loaded, the daemon stops or ctx ends.
func (d *Daemon) acquireModel(ctx context.Context) (*loaded, error) {
	counted := false
	defer func() {
		if counted {
			d.mu.Lock()
			d.waiting--
			d.mu.Unlock()
		}
	}()
	for {
		d.mu.Lock()
		switch {
		case d.stopping:
			d.mu.Unlock()
			return nil, api.Errorf(api.CodeShuttingDown, "the daemon is shutting down")
		case d.cur != nil:
			m := d.cur
			m.refs++
			d.mu.Unlock()
			return m, nil
		case d.state == api.StateFailed:
			msg := d.loadErr
			d.mu.Unlock()
			return nil, api.Errorf(api.CodeModelLoadFailed, "no model is loaded: %s", msg)
		case d.state == api.StateUnloaded:
			d.reloadLocked() // and wait for it, as during any load
		}
		if !counted {
			d.waiting++
			counted = true
		}
		changed := d.changed
		d.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// prepare waits for a model and prepares every request on it, no more at
// once than there are CPUs. It returns the model (one reference held per
// prepared request; none when there are none) and, per request, its job or
// its invalid_params error.
func (d *Daemon) prepare(ctx context.Context, reqs []*decide.Request) (*loaded, []Job, []error, error) {
	m, err := d.acquireModel(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	preps := make([]Job, len(reqs))
	errs := make([]error, len(reqs))
	good := 0
	select {
	case d.prepSem <- struct{}{}:
	case <-ctx.Done():
		d.release(m)
		return nil, nil, nil, ctx.Err()
	}
	for i, r := range reqs {
		if perr := safely("prepare", func() (err error) { preps[i], err = m.eng.Prepare(r); return err }); perr != nil {
			errs[i] = engineError(perr)
			continue
		}
		good++
	}
	<-d.prepSem
	if good == 0 {
		d.release(m)
		return m, preps, errs, nil
	}
	d.mu.Lock()
	m.refs += good - 1 // one per job; acquireModel took one
	d.mu.Unlock()
	return m, preps, errs, nil
}

// submit queues the prepared jobs of one request or batch as a group (so
// that they land in the same engine call when they can), within the queue
// and token limits, and returns them. On an error the jobs' model
// references are released.
func (d *Daemon) submit(ctx context.Context, m *loaded, preps []Job) ([]*job, error) {
	now := time.Now()
	var jobs []*job
	var cost int64
	for _, p := range preps {
		if p != nil {
			j := &job{ctx: ctx, m: m, prep: p, cost: int64(p.Tokens()), arrived: now, done: make(chan result, 1)}
			jobs = append(jobs, j)
			cost += j.cost
		}
	}
	fail := func(err error) ([]*job, error) {
		for range jobs {
			d.release(m)
		}
		return nil, err
	}
	d.mu.Lock()
	switch {
	case d.stopping:
		d.mu.Unlock()
		return fail(api.Errorf(api.CodeShuttingDown, "the daemon is shutting down"))
	case len(jobs) > d.opts.QueueLimit:
		d.mu.Unlock()
		return fail(api.Errorf(api.CodeInvalidParams, "a batch of %d requests is more than the queue holds (%d, max_queued); split it", len(jobs), d.opts.QueueLimit))
	case cost > d.opts.MaxTokensInFlight:
		d.mu.Unlock()
		return fail(api.Errorf(api.CodeInvalidParams, "the requests render %d tokens, more than the daemon holds at once (%d, max_tokens_in_flight); split them", cost, d.opts.MaxTokensInFlight))
	case len(d.queue)+len(jobs) > d.opts.QueueLimit:
		n := len(d.queue)
		d.mu.Unlock()
		return fail(api.Errorf(api.CodeOverloaded, "%d decisions are queued (limit %d, max_queued); retry later", n, d.opts.QueueLimit))
	case d.inFlight+cost > d.opts.MaxTokensInFlight:
		n := d.inFlight
		d.mu.Unlock()
		return fail(api.Errorf(api.CodeOverloaded, "%d tokens are queued and running; these %d would pass the daemon's limit of %d (max_tokens_in_flight); retry later", n, cost, d.opts.MaxTokensInFlight))
	}
	d.inFlight += cost
	d.queue = append(d.queue, jobs...)
	d.mu.Unlock()
	d.nudge()
	return jobs, nil
}

// finish delivers a job's result and gives back its tokens and its model
// reference.
func (d *Daemon) finish(j *job, r result) {
	d.mu.Lock()
	d.inFlight -= j.cost
	d.lastActive = time.Now()
	d.mu.Unlock()
	d.release(j.m)
	j.done <- r
}

// wait returns a job's result, or the client's context error.
func (d *Daemon) wait(ctx context.Context, j *job) (*decide.Response, error) {
	select {
	case r := <-j.done:
		if r.err != nil {
			d.failed.Add(1)
			return nil, r.err
		}
		d.served.Add(1)
		d.lat.add(time.Since(j.arrived))
		return r.resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// decide prepares one request, queues it and waits for its answer.
func (d *Daemon) decide(ctx context.Context, r *decide.Request) (*decide.Response, error) {
	m, preps, errs, err := d.prepare(ctx, []*decide.Request{r})
	if err != nil {
		return nil, err
	}
	if errs[0] != nil {
		return nil, errs[0]
	}
	jobs, err := d.submit(ctx, m, preps)
	if err != nil {
		return nil, err
	}
	return d.wait(ctx, jobs[0])
}

// worker runs the queue: it takes what is waiting and hands it to the
// engine as a batch on a goroutine of its own. Small requests from all
// connections that arrived while the previous batch of small ones ran are
// answered together, one such batch at a time; a large request runs alone,
// as soon as it comes, its passes taking turns with the other batches'.
func (d *Daemon) worker() {
	defer close(d.done)
	for {
		batch, failWith := d.next()
		if batch == nil {
			return
		}
		if failWith != nil {
			for _, j := range batch {
				d.finish(j, result{err: failWith})
			}
			continue
		}
		d.running.Add(1)
		go d.run(batch)
	}
}

// next waits for work and returns the next batch, or the error to fail it
// with; a nil batch means stop.
func (d *Daemon) next() ([]*job, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var gatherUntil time.Time // when gathering a batch stops; zero: not begun
	for {
		// Drop jobs whose clients left while they waited.
		kept := d.queue[:0]
		var gone []*job
		for _, j := range d.queue {
			if j.ctx.Err() != nil {
				gone = append(gone, j)
			} else {
				kept = append(kept, j)
			}
		}
		clear(d.queue[len(kept):])
		d.queue = kept
		if len(gone) > 0 {
			d.mu.Unlock()
			for _, j := range gone {
				d.finish(j, result{err: j.ctx.Err()})
			}
			d.mu.Lock()
			continue
		}

		switch {
		case len(d.queue) > 0 && d.ctx.Err() != nil:
			batch := d.queue
			d.queue = nil
			return batch, api.Errorf(api.CodeShuttingDown, "the daemon stopped before this request ran")
		case len(d.queue) > 0 && d.smallRunning == 0:
			// The clients answered by the last batch are likely to send
			// again at once: give them a moment to join this one rather
			// than splitting them over batches. A lone client never waits.
			want := min(d.lastBatch, d.opts.MaxBatch)
			if len(d.queue) < want && !d.stopping {
				if gatherUntil.IsZero() {
					gatherUntil = time.Now().Add(gatherWindow)
				}
				if time.Now().Before(gatherUntil) {
					d.sleepLocked(time.Until(gatherUntil))
					continue
				}
			}
			batch := d.take()
			d.lastBatch = len(batch)
			if small(batch, d.opts.BatchTokens) {
				d.smallRunning++
			}
			return batch, nil
		case len(d.queue) == 0 && d.stopping:
			return nil, nil
		}
		if len(d.queue) > 0 {
			// A batch of small requests runs: look again when it is done
			// (the nudge), and now and then for clients that left.
			d.sleepLocked(50 * time.Millisecond)
		} else {
			d.sleepLocked(0) // an idle daemon sleeps until nudged
		}
	}
}

// gatherWindow is the longest a batch waits for the clients of the previous
// batch to send their next requests.
const gatherWindow = 2 * time.Millisecond

// sleepLocked releases d.mu until the worker is nudged, the daemon stops,
// or (when d > 0) d has passed.
func (d *Daemon) sleepLocked(dur time.Duration) {
	d.mu.Unlock()
	var timeout <-chan time.Time
	if dur > 0 {
		t := time.NewTimer(dur)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-d.wake:
	case <-d.ctx.Done():
	case <-timeout:
	}
	d.mu.Lock()
}

// small reports whether a batch is of small requests (not one request over
// batchTokens alone).
func small(batch []*job, batchTokens int) bool {
	return len(batch) > 1 || batch[0].cost <= int64(batchTokens)
}

// take removes the next batch from the queue: the head job alone when it is
// larger than BatchTokens, else, in queue order, the jobs on the head's
// model that fit in BatchTokens together (up to MaxBatch), passing over
// larger ones and those of other models.
func (d *Daemon) take() []*job {
	head := d.queue[0]
	batch := []*job{head}
	rest := d.queue[1:]
	if head.cost <= int64(d.opts.BatchTokens) {
		sum := head.cost
		kept := rest[:0]
		for _, j := range rest {
			if len(batch) < d.opts.MaxBatch && j.m == head.m && sum+j.cost <= int64(d.opts.BatchTokens) {
				batch = append(batch, j)
				sum += j.cost
			} else {
				kept = append(kept, j)
			}
		}
		rest = kept
	}
	n := copy(d.queue, rest)
	clear(d.queue[n:])
	d.queue = d.queue[:n]
	return batch
}

// run answers a batch on the model its jobs were prepared on.
func (d *Daemon) run(batch []*job) {
	defer d.running.Done()
	if small(batch, d.opts.BatchTokens) {
		defer func() {
			d.mu.Lock()
			d.smallRunning--
			d.mu.Unlock()
			d.nudge()
		}()
	}
	turn := func(ctx context.Context, tokens int) (func(), error) { return d.passes.wait(ctx) }
	// The batch is abandoned, between passes, once every client it answers
	// has gone.
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	var left atomic.Int32
	left.Store(int32(len(batch)))
	for _, j := range batch {
		stop := context.AfterFunc(j.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	preps := make([]Job, len(batch))
	var cost int64
	for i, j := range batch {
		preps[i] = j.prep
		cost += j.cost
	}
	passTokens := 0 // a batch of small requests runs in the engine's passes
	if !small(batch, d.opts.BatchTokens) {
		passTokens = d.opts.PassTokens
	}
	resps, errs, err := d.callEngine(ctx, batch[0].m.eng, preps, turn, passTokens)
	d.noteFaults(batch[0].m, resps, err, errs)
	for i, j := range batch {
		switch {
		case err != nil:
			d.finish(j, result{err: err})
		case errs[i] != nil:
			d.finish(j, result{err: engineError(errs[i])})
		case resps[i] == nil:
			d.finish(j, result{err: api.Errorf(api.CodeInternal, "the engine returned no response")})
		default:
			d.finish(j, result{resp: resps[i]})
		}
	}
	if cost >= largeRequestTokens {
		d.freeMemory()
	}
}

// largeRequestTokens is the cost above which a batch's buffers are handed
// back to the system once it is answered (freeMemory), and largeParams the
// params size for the same.
const (
	largeRequestTokens = 65536
	largeParams        = 8 << 20
)

// freeMemory returns the heap that large requests left behind to the
// system (debug.FreeOSMemory), at most once a second so that a stream of
// them does not spend its time collecting: a call within a second of the
// last one schedules it for when the second is over.
func (d *Daemon) freeMemory() {
	d.mu.Lock()
	wait := time.Second - time.Since(d.lastFree)
	switch {
	case wait <= 0:
		d.lastFree = time.Now()
		d.mu.Unlock()
		debug.FreeOSMemory()
		return
	case !d.freeLater:
		d.freeLater = true
		time.AfterFunc(wait, func() {
			d.mu.Lock()
			d.freeLater = false
			d.mu.Unlock()
			d.freeMemory()
		})
	}
	d.mu.Unlock()
}

// callEngine runs the engine on a batch, turning a panic or a malformed
// answer into an error for the whole batch so the daemon keeps serving.
func (d *Daemon) callEngine(ctx context.Context, eng Engine, preps []Job, turn decide.Turn, passTokens int) (resps []*decide.Response, errs []error, err error) {
	defer func() {
		if p := recover(); p != nil {
			d.opts.Logger.Error("the engine panicked", "panic", p)
			err = api.Errorf(api.CodeInternal, "the engine panicked: %v", p)
		}
	}()
	resps, errs = eng.Run(ctx, preps, turn, passTokens)
	if len(resps) != len(preps) || len(errs) != len(preps) {
		return nil, nil, api.Errorf(api.CodeInternal, "the engine answered %d/%d of %d requests", len(resps), len(errs), len(preps))
	}
	return resps, errs, nil
}

// engineError maps an engine error to its protocol error.
func engineError(err error) error {
	var perr *api.Error
	switch {
	case errors.As(err, &perr):
		return err
	case decide.IsBadRequest(err):
		return api.Errorf(api.CodeInvalidParams, "%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return api.Errorf(api.CodeShuttingDown, "the daemon stopped while this request ran: %v", err)
	default:
		return api.Errorf(api.CodeInternal, "%v", fmt.Errorf("decide: %w", err))
	}
}

// turns hands the model to one forward pass at a time, in the order the
// passes asked for it: a batch that has just run a pass asks again behind
// those already waiting, so the passes of all batches interleave.
type turns struct {
	mu    sync.Mutex // guards busy and queue
	busy  bool
	queue []chan struct{} // the waiting passes, first come first
}

// wait returns once the caller's pass may run; done hands the model on.
func (t *turns) wait(ctx context.Context) (done func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	if !t.busy {
		t.busy = true
		t.mu.Unlock()
		return t.next, nil
	}
	ch := make(chan struct{})
	t.queue = append(t.queue, ch)
	t.mu.Unlock()
	select {
	case <-ch:
		return t.next, nil
	case <-ctx.Done():
		t.mu.Lock()
		for i, c := range t.queue {
			if c == ch {
				t.queue = append(t.queue[:i], t.queue[i+1:]...)
				t.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		t.mu.Unlock()
		t.next() // granted meanwhile: hand it on
		return nil, ctx.Err()
	}
}

// next gives the model to the first waiting pass, or frees it.
func (t *turns) next() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) == 0 {
		t.busy = false
		return
	}
	ch := t.queue[0]
	t.queue = t.queue[1:]
	close(ch)
}
