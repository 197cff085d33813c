package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
//
// Before anything is read the fit check (fitCheck) holds what the model
// will need against the machine's memory: a model that cannot fit is
// refused; one that fits only without the current model has that model
// released first (decisions wait meanwhile), and should its load fail, the
// released model is loaded again.
func (d *Daemon) load(dir string, useInt8 bool) error {
	d.loadMu.Lock()
	defer d.loadMu.Unlock()
	return d.loadLocked(dir, useInt8)
}

// loadLocked is load with d.loadMu held: the fit check, then the load
// (loadModel). Every load goes through it: a switch, the reload of an
// unloaded model, and the reloads on the fallback backend after a device
// fault.
func (d *Daemon) loadLocked(dir string, useInt8 bool) error {
	d.setProgress(&api.LoadProgress{Model: dir, Phase: api.StateLoading}, api.StateLoading)
	plan, err := d.fitCheck(dir, useInt8)
	if err != nil {
		return d.loadFailed(dir, err)
	}
	if !plan.release {
		return d.loadModel(dir, useInt8, plan)
	}
	prev, err := d.releaseForLoad(d.ctx, plan.why)
	if err != nil {
		d.clearNote()
		return d.loadFailed(dir, err)
	}
	err = d.loadModel(dir, useInt8, plan)
	d.clearNote()
	if err == nil || d.ctx.Err() != nil {
		return err
	}
	// Put the released model back (it fitted, and its memory was just
	// handed back); status keeps saying why the switch failed.
	d.mu.Lock()
	why := d.loadErr
	d.mu.Unlock()
	ferr := d.loadModel(prev.src, prev.info.Int8, fitPlan{needs: prev.needs, warning: prev.warning})
	d.mu.Lock()
	d.loadErr = why
	if ferr != nil {
		d.loadErr = fmt.Sprintf("%s; the previous model, released for it, could not be loaded again: %s", why, strings.TrimPrefix(api.ErrorMessage(ferr), why+"; "))
	}
	d.mu.Unlock()
	return err
}

// clearNote clears status's memory note.
func (d *Daemon) clearNote() {
	d.mu.Lock()
	d.memNote = ""
	d.mu.Unlock()
}

// loadModel is loadLocked after the fit check: it reads the checkpoint,
// warms it up and puts it in service. A warm-up that faults on a GPU whose
// loader falls back starts over at loadLocked (its fit check included), on
// the fallback backend.
func (d *Daemon) loadModel(dir string, useInt8 bool, plan fitPlan) error {
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
				return d.loadLocked(dir, useInt8) // on the fallback backend, checked again
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
	if old == nil {
		old, d.unloaded = d.unloaded, nil // an unloaded model closes once its last jobs are done
	}
	d.cur = &loaded{eng: eng, info: info, src: dir, needs: plan.needs, warning: plan.warning, closed: make(chan struct{})}
	d.state, d.loadErr, d.progress = api.StateReady, "", nil
	d.int8 = useInt8
	d.lastActive = time.Now()
	d.changedLocked()
	d.mu.Unlock()
	d.nudge()
	if old != nil {
		d.retire(old)
	}
	d.report(api.LoadProgress{Model: dir, Phase: api.StateReady})
	d.opts.Logger.Info("model ready", "name", info.Name, "path", info.Path, "backend", info.Backend, "int8", info.Int8Summary())
	return nil
}

// retire takes m out of service: it is closed now, or when the last job
// prepared on it finishes.
func (d *Daemon) retire(m *loaded) {
	d.mu.Lock()
	closeNow := !m.retired && m.refs == 0
	m.retired = true
	d.mu.Unlock()
	if closeNow {
		if err := d.closeModel(m); err != nil {
			d.opts.Logger.Warn("closing the previous model", "err", err)
		}
	}
}

// closeModel closes m's engine, once, and tells those waiting for it.
func (d *Daemon) closeModel(m *loaded) error {
	d.mu.Lock()
	select {
	case <-m.closed:
		d.mu.Unlock()
		return nil
	default:
	}
	close(m.closed)
	d.mu.Unlock()
	return m.eng.Close()
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
		if err := d.closeModel(m); err != nil {
			d.opts.Logger.Warn("closing the previous model", "err", err)
		}
	}
}

// warmUpPages are the page sizes, in rows, warmed up after the short
// requests, each with one question and with three (a yes/no, a choice and
// a score): the shapes of real requests, so the first of each does not pay
// for the buffers and kernels its passes need.
var warmUpPages = []int{4, 40, 160}

// warmUpPage returns a request about a page of rows of an inventory table,
// with one question or with three.
func warmUpPage(rows int, three bool) string {
	var b strings.Builder
	b.WriteString(`{"evidence":{"page":"inventory","rows":[`)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"item":"part %d","bin":"%c","qty":%d}`, i*7%97, 'A'+rune(i%4), i*13%17)
	}
	b.WriteString(`]},"questions":{"a":{"type":"noul","instructions":"Is any item on this page out of stock?"}`)
	if three {
		b.WriteString(`,"b":{"type":"choice","instructions":"Which bin holds the most items?","criteria":{"A":"bin A","B":"bin B","C":"bin C","other":"another bin"}}`)
		b.WriteString(`,"c":{"type":"score","instructions":"How well stocked is this page?","criteria":["empty","low","normal","full"]}`)
	}
	b.WriteString(`}}`)
	return b.String()
}

// warmUp runs the short warm-up requests (decide.WarmUpRequests, which
// int8 calibrates on) one at a time, then all together,
// then the pages of warmUpPages with one question and with three, and
// drops the prefix states they left (no real request shares their
// evidence).
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
	for _, rows := range warmUpPages {
		for _, three := range []bool{false, true} {
			r, err := decide.ParseJSON([]byte(warmUpPage(rows, three)))
			if err != nil {
				return fmt.Errorf("warm-up page of %d rows: %w", rows, err)
			}
			errs, err := run([]*decide.Request{r})
			if err == nil && failed(errs[0]) {
				err = errs[0]
			}
			if err != nil {
				return fmt.Errorf("warm-up page of %d rows, %d questions: %w", rows, len(r.Questions), err)
			}
		}
	}
	if c, ok := eng.(interface{ ClearCache() }); ok {
		c.ClearCache()
	}
	return nil
}
