package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
)

// job is one decision waiting in the queue.
type job struct {
	ctx     context.Context // the client's; a job whose client left is dropped
	req     *decide.Request
	arrived time.Time
	done    chan result // buffered: the worker never blocks on it
}

// result is a job's outcome.
type result struct {
	resp *decide.Response
	err  error
}

// submit queues requests as one group (so they land in the same batch
// when the queue allows) and returns their jobs.
func (d *Daemon) submit(ctx context.Context, reqs []*decide.Request) ([]*job, error) {
	now := time.Now()
	jobs := make([]*job, len(reqs))
	for i, r := range reqs {
		jobs[i] = &job{ctx: ctx, req: r, arrived: now, done: make(chan result, 1)}
	}
	d.mu.Lock()
	switch {
	case d.stopping:
		d.mu.Unlock()
		return nil, ipc.Errorf(ipc.CodeShuttingDown, "the daemon is shutting down")
	case d.cur == nil && d.state == StateFailed:
		msg := d.loadErr
		d.mu.Unlock()
		return nil, ipc.Errorf(ipc.CodeModelLoadFailed, "no model is loaded: %s", msg)
	case len(jobs) > d.opts.QueueLimit:
		d.mu.Unlock()
		return nil, ipc.Errorf(ipc.CodeInvalidParams, "a batch of %d requests is more than the queue holds (%d); split it", len(jobs), d.opts.QueueLimit)
	case len(d.queue)+len(jobs) > d.opts.QueueLimit:
		n := len(d.queue)
		d.mu.Unlock()
		return nil, ipc.Errorf(ipc.CodeOverloaded, "%d decisions are queued (limit %d); retry later", n, d.opts.QueueLimit)
	}
	d.queue = append(d.queue, jobs...)
	d.mu.Unlock()
	d.nudge()
	return jobs, nil
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

// decide queues one request and waits for its answer.
func (d *Daemon) decide(ctx context.Context, r *decide.Request) (*decide.Response, error) {
	jobs, err := d.submit(ctx, []*decide.Request{r})
	if err != nil {
		return nil, err
	}
	return d.wait(ctx, jobs[0])
}

// worker runs the queue: it takes what is waiting (up to MaxBatch) and
// hands it to the model in service as one batch, so requests from all
// connections that arrived while the previous batch ran are answered
// together.
func (d *Daemon) worker() {
	defer close(d.done)
	for {
		batch, m, failWith := d.next()
		if batch == nil {
			return
		}
		if failWith != nil {
			for _, j := range batch {
				j.done <- result{err: failWith}
			}
			continue
		}
		d.run(m, batch)
		d.release(m)
	}
}

// next waits for work and returns the next batch with the model to run it
// on (a reference held), or the error to fail it with when no model can
// serve; a nil batch means stop.
func (d *Daemon) next() ([]*job, *loaded, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var gatherUntil time.Time // when gathering a batch stops; zero: not begun
	for {
		// Drop jobs whose clients left while they waited.
		kept := d.queue[:0]
		for _, j := range d.queue {
			if err := j.ctx.Err(); err != nil {
				j.done <- result{err: err}
			} else {
				kept = append(kept, j)
			}
		}
		clear(d.queue[len(kept):])
		d.queue = kept

		if len(d.queue) > 0 {
			if d.ctx.Err() != nil {
				return d.take(), nil, ipc.Errorf(ipc.CodeShuttingDown, "the daemon stopped before this request ran")
			}
			if d.cur != nil {
				// The clients answered by the last batch are likely to send
				// again at once: give them a moment to join this one rather
				// than splitting them over passes. A lone client never waits.
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
				return batch, d.acquireLocked(), nil
			}
			if d.state == StateFailed {
				return d.take(), nil, ipc.Errorf(ipc.CodeModelLoadFailed, "no model is loaded: %s", d.loadErr)
			}
		} else if d.stopping {
			return nil, nil, nil
		}
		if len(d.queue) > 0 {
			// Jobs wait for a model: look again now and then for clients
			// that left.
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

// take removes up to MaxBatch jobs from the head of the queue.
func (d *Daemon) take() []*job {
	n := min(len(d.queue), d.opts.MaxBatch)
	batch := make([]*job, n)
	copy(batch, d.queue)
	rest := copy(d.queue, d.queue[n:])
	clear(d.queue[rest:])
	d.queue = d.queue[:rest]
	return batch
}

// run answers a batch on model m.
func (d *Daemon) run(m *loaded, batch []*job) {
	reqs := make([]*decide.Request, len(batch))
	for i, j := range batch {
		reqs[i] = j.req
	}
	resps, errs, err := d.callEngine(m.eng, reqs)
	for i, j := range batch {
		switch {
		case err != nil:
			j.done <- result{err: err}
		case errs[i] != nil:
			j.done <- result{err: engineError(errs[i])}
		case resps[i] == nil:
			j.done <- result{err: ipc.Errorf(ipc.CodeInternal, "the engine returned no response")}
		default:
			j.done <- result{resp: resps[i]}
		}
	}
}

// callEngine runs DecideBatch, turning a panic or a malformed answer into an
// error for the whole batch so the daemon keeps serving.
func (d *Daemon) callEngine(eng Engine, reqs []*decide.Request) (resps []*decide.Response, errs []error, err error) {
	defer func() {
		if p := recover(); p != nil {
			d.opts.Logger.Error("the engine panicked", "panic", p)
			err = ipc.Errorf(ipc.CodeInternal, "the engine panicked: %v", p)
		}
	}()
	resps, errs = eng.DecideBatch(d.ctx, reqs)
	if len(resps) != len(reqs) || len(errs) != len(reqs) {
		return nil, nil, ipc.Errorf(ipc.CodeInternal, "the engine answered %d/%d of %d requests", len(resps), len(errs), len(reqs))
	}
	return resps, errs, nil
}

// engineError maps an engine error to its protocol error.
func engineError(err error) error {
	var perr *ipc.Error
	switch {
	case errors.As(err, &perr):
		return err
	case decide.IsBadRequest(err):
		return ipc.Errorf(ipc.CodeInvalidParams, "%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ipc.Errorf(ipc.CodeShuttingDown, "the daemon stopped while this request ran: %v", err)
	default:
		return ipc.Errorf(ipc.CodeInternal, "%v", fmt.Errorf("decide: %w", err))
	}
}
