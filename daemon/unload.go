package daemon

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/ipc"
)

// An unloaded daemon keeps its socket and answers status, models and the
// rest at once; only the model is gone. The first decision to come loads
// the same model again (a load in the background, as at start: the
// decision waits in the queue, state says loading, then warming), so
// unloading costs a client nothing but that wait.

// Unload takes the model out of service and returns once its memory is
// handed back to the system: decisions already queued or running finish on
// it first, later ones load it again. It does nothing when no model is in
// service (unloaded already, or none loaded yet); it waits for a load under
// way to end first.
func (d *Daemon) Unload(ctx context.Context) error {
	d.loadMu.Lock()
	defer d.loadMu.Unlock()
	d.mu.Lock()
	m := d.cur
	if m == nil || d.stopping {
		d.mu.Unlock()
		return nil
	}
	d.cur, d.unloaded = nil, m
	d.state, d.idleSince = api.StateUnloaded, d.lastActive
	d.changedLocked()
	d.mu.Unlock()
	d.retire(m)
	select {
	case <-m.closed:
	case <-ctx.Done():
		return ctx.Err()
	}
	debug.FreeOSMemory()
	d.opts.Logger.Info("model unloaded", "name", m.info.Name, "idle_since", d.idleSince)
	return nil
}

// reloadLocked starts loading the unloaded model again, once, for the
// decisions that found it gone; d.mu is held.
func (d *Daemon) reloadLocked() {
	if d.reloading || d.unloaded == nil {
		return
	}
	d.reloading = true
	d.state = api.StateLoading
	d.changedLocked()
	dir, useInt8 := d.unloaded.src, d.int8
	go func() {
		if err := d.load(dir, useInt8); err != nil {
			d.opts.Logger.Error("loading the model again failed", "model", dir, "err", err)
		}
		d.mu.Lock()
		d.reloading = false
		d.mu.Unlock()
	}()
}

// SetIdleUnload changes how long the daemon waits without a decision before
// it unloads the model (0: never).
func (d *Daemon) SetIdleUnload(dur time.Duration) {
	d.mu.Lock()
	d.idleUnload = max(dur, 0)
	d.mu.Unlock()
	select {
	case d.idleWake <- struct{}{}:
	default:
	}
}

// watchIdle unloads the model once it has been idle for IdleUnload: no
// decision queued, waiting or running, none answered for that long, no load
// under way. It looks every eighth of the duration (between 10 ms and a
// minute), and again when the duration changes.
func (d *Daemon) watchIdle() {
	for {
		d.mu.Lock()
		dur := d.idleUnload
		d.mu.Unlock()
		period := time.Minute
		if dur > 0 {
			period = min(max(dur/8, 10*time.Millisecond), time.Minute)
		}
		t := time.NewTimer(period)
		select {
		case <-d.ctx.Done():
			t.Stop()
			return
		case <-d.idleWake:
			t.Stop()
			continue
		case <-t.C:
		}
		if d.idleDue() {
			if err := d.Unload(d.ctx); err != nil && d.ctx.Err() == nil {
				d.opts.Logger.Warn("unloading the idle model", "err", err)
			}
		}
	}
}

// idleDue reports whether the model has been idle for IdleUnload.
func (d *Daemon) idleDue() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.idleUnload > 0 && d.cur != nil && !d.stopping && d.progress == nil &&
		len(d.queue) == 0 && d.waiting == 0 && d.inFlight == 0 &&
		time.Since(d.lastActive) >= d.idleUnload
}

func (d *Daemon) serveConfigure(params []byte) (any, error) {
	var p api.ConfigureParams
	if len(params) > 0 {
		if err := ipc.Unmarshal(params, &p); err != nil {
			return nil, api.Errorf(api.CodeInvalidParams, "configure: params must be {idle_unload_s: seconds}: %v", err)
		}
	}
	if p.IdleUnloadS != nil {
		s := *p.IdleUnloadS
		if !(s >= 0) || s > maxIdleUnload.Seconds() {
			return nil, api.Errorf(api.CodeInvalidParams, "configure: idle_unload_s is %v; want 0 (never) to %v seconds", s, maxIdleUnload.Seconds())
		}
		d.SetIdleUnload(time.Duration(s * float64(time.Second)))
	}
	return d.Status(), nil
}

// maxIdleUnload bounds the idle-unload setting.
const maxIdleUnload = api.MaxIdleUnloadS * time.Second

func (d *Daemon) serveUnload(ctx context.Context) (any, error) {
	if err := d.Unload(ctx); err != nil {
		return nil, fmt.Errorf("unload: %w", err)
	}
	return d.Status(), nil
}
