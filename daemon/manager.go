package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/decide"
)

// errStopping is returned by loads that finish after Close began.
var errStopping = errors.New("the daemon is shutting down")

// load reads the checkpoint in dir ("" for the embedded demo), with int8
// projections when useInt8 is set, warms it up and puts it in service in
// place of the current model, which finishes the batches running on it and
// is then closed; useInt8 becomes the setting of later loads that do not say.
// While the first model loads, status says loading, then warming; during a
// switch the old model keeps serving. A failed switch leaves the old model
// (and its setting) in service.
func (d *Daemon) load(dir string, useInt8 bool) error {
	d.loadMu.Lock()
	defer d.loadMu.Unlock()
	return d.loadLocked(dir, useInt8)
}

// loadLocked is load with d.loadMu held.
func (d *Daemon) loadLocked(dir string, useInt8 bool) error {
	d.setProgress(&api.LoadProgress{Model: dir, Phase: api.StateLoading}, api.StateLoading)
	var eng Engine
	var info api.ModelStatus
	err := safely("the loader", func() (err error) {
		eng, info, err = d.opts.Load(d.ctx, dir, useInt8, d.progressFunc())
		return err
	})
	if err == nil && d.ctx.Err() != nil {
		eng.Close()
		err = errStopping
	}
	if err != nil {
		return d.loadFailed(dir, err)
	}
	d.setProgress(&api.LoadProgress{Model: dir, Phase: api.StateWarming}, api.StateWarming)
	if !d.opts.NoWarmup {
		if werr := safely("warm-up", func() error { return warmUp(d.ctx, eng) }); werr != nil {
			eng.Close()
			if warmUpFault(eng, werr) {
				return d.loadLocked(dir, useInt8) // on the fallback backend
			}
			return d.loadFailed(dir, fmt.Errorf("warm-up: %w", werr))
		}
	}

	d.mu.Lock()
	if d.stopping || d.ctx.Err() != nil {
		d.progress = nil
		d.mu.Unlock()
		eng.Close()
		return d.loadFailed(dir, errStopping)
	}
	old := d.cur
	d.cur = &loaded{eng: eng, info: info, src: dir}
	d.state, d.loadErr, d.progress = api.StateReady, "", nil
	d.int8 = useInt8
	d.changedLocked()
	closeOld := old != nil && old.refs == 0
	if old != nil {
		old.retired = true
	}
	d.mu.Unlock()
	d.nudge()
	if closeOld {
		if err := old.eng.Close(); err != nil {
			d.opts.Logger.Warn("closing the previous model", "err", err)
		}
	}
	d.report(api.LoadProgress{Model: dir, Phase: api.StateReady})
	d.opts.Logger.Info("model ready", "name", info.Name, "path", info.Path, "backend", info.Backend, "int8", info.Int8Summary())
	return nil
}

// progressFunc returns the load's progress callback: it records bytes read
// and passes them on to the Progress option.
func (d *Daemon) progressFunc() func(done, total int64) {
	return func(done, total int64) {
		d.mu.Lock()
		if d.progress != nil {
			d.progress.Done, d.progress.Total = done, total
			p := *d.progress
			d.mu.Unlock()
			d.report(p)
			return
		}
		d.mu.Unlock()
	}
}

// safely runs f, turning a panic into an error naming what panicked: a
// load that fails in any way leaves the model in service serving.
func safely(what string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s panicked: %v", what, p)
		}
	}()
	return f()
}

// setProgress records a load phase; the daemon's state follows it only
// while no model serves yet.
func (d *Daemon) setProgress(p *api.LoadProgress, state string) {
	d.mu.Lock()
	d.progress = p
	if d.cur == nil && d.state != state {
		d.state = state
		d.changedLocked()
	}
	cp := *p
	d.mu.Unlock()
	d.report(cp)
}

// report passes progress to the Progress option.
func (d *Daemon) report(p api.LoadProgress) {
	if d.opts.Progress != nil {
		d.opts.Progress(p)
	}
}

// loadFailed records a failed load and returns its protocol error.
func (d *Daemon) loadFailed(dir string, err error) error {
	what := dir
	if what == "" {
		what = "the embedded demo model"
	}
	d.recordFailure(dir, fmt.Sprintf("load %s: %v", what, err))
	if errors.Is(err, errStopping) {
		return api.Errorf(api.CodeShuttingDown, "load %s: %v", what, err)
	}
	return api.Errorf(api.CodeModelLoadFailed, "load %s: %v", what, err)
}

// recordFailure puts msg in status as the last load's error, ends the
// load's progress and fails the waiting decisions when no model serves.
func (d *Daemon) recordFailure(dir, msg string) {
	d.mu.Lock()
	d.progress = nil
	d.loadErr = msg
	if d.cur == nil {
		d.state = api.StateFailed
		d.changedLocked()
	}
	d.mu.Unlock()
	d.nudge() // queued decisions fail now if there is no model at all
	d.report(api.LoadProgress{Model: dir, Phase: api.StateFailed})
}

// release drops a reference; a retired model is closed with its last one.
func (d *Daemon) release(m *loaded) {
	d.mu.Lock()
	m.refs--
	closeIt := m.retired && m.refs == 0
	d.mu.Unlock()
	if closeIt {
		if err := m.eng.Close(); err != nil {
			d.opts.Logger.Warn("closing the previous model", "err", err)
		}
	}
}

// warmUp runs the warm-up requests (decide.WarmUpRequests: common request
// shapes, so that the first real requests do not pay for first-use costs)
// one at a time and then all together.
func warmUp(ctx context.Context, eng Engine) error {
	reqs := decide.WarmUpRequests()
	// A model may refuse a shape (rows too long for it): that is no reason
	// to refuse the model. Any other failure is.
	failed := func(err error) bool { return err != nil && !decide.IsBadRequest(err) }
	run := func(rs []*decide.Request) ([]error, error) {
		var preps []Job
		errs := make([]error, len(rs))
		var at []int
		for i, r := range rs {
			p, err := eng.Prepare(r)
			if err != nil {
				errs[i] = err
				continue
			}
			preps = append(preps, p)
			at = append(at, i)
		}
		_, rerrs := eng.Run(ctx, preps, nil, 0)
		if len(rerrs) != len(preps) {
			return nil, fmt.Errorf("%d results for %d requests", len(rerrs), len(preps))
		}
		for k, i := range at {
			errs[i] = rerrs[k]
		}
		return errs, nil
	}
	for i, r := range reqs {
		errs, err := run([]*decide.Request{r})
		if err != nil {
			return fmt.Errorf("warm-up request %d: %w", i, err)
		}
		if failed(errs[0]) {
			return fmt.Errorf("warm-up request %d: %w", i, errs[0])
		}
	}
	errs, err := run(reqs)
	if err != nil {
		return fmt.Errorf("warm-up batch: %w", err)
	}
	for i, err := range errs {
		if failed(err) {
			return fmt.Errorf("warm-up batch, request %d: %w", i, err)
		}
	}
	return nil
}
