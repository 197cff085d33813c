package daemon

import (
	"errors"
	"fmt"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/gpucheck"
	"github.com/startlux/startlux/tensor"
)

// This file is what the daemon does about device faults at run time (a GPU
// command buffer that failed or did not finish, tensor.ErrDeviceFault):
// each fails its batch's requests with internal, and after
// Options.MaxDeviceFaults batches in a row the model is reloaded on the
// loader's fallback backend, with the note in status.

// DefaultMaxDeviceFaults is how many batches in a row may fail on the
// device before the model moves to the fallback backend.
const DefaultMaxDeviceFaults = 3

// deviceFallback is implemented by engines whose loader can move them off
// their device ([DecideLoader]'s with LoaderOptions.Fallback, on a GPU).
type deviceFallback interface {
	// FallBack turns the device off for every later load, with note as
	// the reason, and reports whether there is a backend to fall back to
	// (false: the model stays where it is).
	FallBack(note string) bool
}

// faultCount counts the device faults of the model in service (guarded by
// Daemon.mu).
type faultCount struct {
	m *loaded // the model counted
	n int     // its batches in a row that had a device fault
	// reloading: a reload on the fallback backend is under way.
	reloading bool
}

// deviceFault returns the first device fault among a batch's errors.
func deviceFault(err error, errs []error) error {
	for _, e := range append([]error{err}, errs...) {
		if e != nil && errors.Is(e, tensor.ErrDeviceFault) {
			return e
		}
	}
	return nil
}

// noteFaults counts a batch answered on m: a device fault among its errors
// counts one, an answer resets the count; the count reaching
// MaxDeviceFaults moves m to the fallback backend (or, where there is none,
// puts the note in its status).
func (d *Daemon) noteFaults(m *loaded, resps []*decide.Response, err error, errs []error) {
	fault := deviceFault(err, errs)
	answered := false
	for i := range resps {
		answered = answered || (resps[i] != nil && errs[i] == nil)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.faults.m != m {
		d.faults = faultCount{m: m}
	}
	switch {
	case fault == nil && answered:
		d.faults.n = 0
		return
	case fault == nil:
		return
	}
	d.faults.n++
	n := d.faults.n
	d.opts.Logger.Warn("a batch failed on the device", "model", m.info.Name, "backend", m.info.Backend, "in a row", n, "err", fault)
	if n < d.opts.MaxDeviceFaults || d.faults.reloading || m.retired || d.stopping {
		return
	}
	reason := fmt.Sprintf("%d batches in a row failed on the GPU; the last: %v", n, fault)
	if fb, ok := m.eng.(deviceFallback); !ok || !fb.FallBack(gpucheck.NotePrefix+reason) {
		// Nowhere to go (a backend named explicitly): the model keeps
		// serving, and status says what goes wrong.
		m.info.BackendNote = reason
		return
	}
	d.faults.reloading = true
	d.opts.Logger.Error("moving the model off the GPU", "model", m.info.Name, "reason", reason)
	go d.reloadOffDevice(m)
}

// reloadOffDevice reloads m's checkpoint (now on the fallback backend: the
// loader was told so) unless another model has replaced it meanwhile.
func (d *Daemon) reloadOffDevice(m *loaded) {
	d.loadMu.Lock()
	defer d.loadMu.Unlock()
	d.mu.Lock()
	current := d.cur == m && !d.stopping
	useInt8 := d.int8 // m's setting, while m is in service
	d.mu.Unlock()
	if current {
		if err := d.loadLocked(m.src, useInt8); err != nil {
			d.opts.Logger.Error("reloading the model off the GPU failed", "model", m.src, "err", err)
		}
	}
	d.mu.Lock()
	if d.faults.m == m {
		d.faults.reloading = false
	}
	d.mu.Unlock()
}

// warmUpFault reports whether a warm-up failed with a device fault on an
// engine whose loader then falls back: the load is then tried again (on the
// fallback backend).
func warmUpFault(eng Engine, err error) bool {
	if !errors.Is(err, tensor.ErrDeviceFault) {
		return false
	}
	fb, ok := eng.(deviceFallback)
	return ok && fb.FallBack(gpucheck.NotePrefix+"warm-up: "+err.Error())
}
