package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/gpucheck"
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/tensor"
)

// This file is how DecideLoader's loads choose their backend: the one asked
// for, checked against the CPU backend when it is a GPU (gpucheck), and the
// fallback (LoaderOptions.Fallback) when it cannot serve.

// decideLoader is the state behind a DecideLoader.
type decideLoader struct {
	lo LoaderOptions // read-only

	mu sync.Mutex // guards disabled
	// disabled is the note of repeated device faults at run time (set by
	// FallBack): from then on every load runs on the fallback backend.
	disabled string
}

// unfitError is a failure of the backend asked for, not of the checkpoint:
// with a fallback the load moves to it, without one it fails the load.
type unfitError struct {
	err  error
	note string // what status says when the load falls back
}

func (e *unfitError) Error() string { return e.err.Error() }
func (e *unfitError) Unwrap() error { return e.err }

// unfit wraps err, a failure of the backend asked for, with the note shown
// after a fallback ("Metal disabled: " and err's text).
func unfit(err error) *unfitError {
	return &unfitError{err: err, note: gpucheck.NotePrefix + err.Error()}
}

// load is the Loader: the model on the backend asked for, else on the
// fallback with the note.
func (l *decideLoader) load(ctx context.Context, dir string, useInt8 bool, progress func(done, total int64)) (Engine, api.ModelStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, api.ModelStatus{}, err
	}
	newBackend := l.lo.Backend
	if newBackend == nil {
		newBackend = func() (tensor.Backend, error) { return cpu.New(cpu.Options{}) }
	}
	note := l.disabledNote()
	if note == "" {
		eng, st, err := l.loadOn(ctx, dir, newBackend, useInt8, progress)
		var u *unfitError
		if err == nil || !errors.As(err, &u) || l.lo.Fallback == nil || ctx.Err() != nil {
			return eng, st, err
		}
		note = u.note
	}
	eng, st, err := l.loadOn(ctx, dir, l.lo.Fallback, useInt8, progress)
	if err != nil {
		return nil, api.ModelStatus{}, fmt.Errorf("%s; on the fallback backend: %w", note, err)
	}
	st.BackendNote = note
	return eng, st, nil
}

// disabledNote returns the note of run-time faults, "" while there were
// none.
func (l *decideLoader) disabledNote() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.disabled
}

// loadOn opens dir (with int8 projections when useInt8 is set) on a
// backend newBackend makes and, when that is a GPU,
// checks the backend in the checkpoint's weight forms. Failures of the
// backend are *unfitError.
func (l *decideLoader) loadOn(ctx context.Context, dir string, newBackend func() (tensor.Backend, error), useInt8 bool, progress func(done, total int64)) (_ Engine, _ api.ModelStatus, err error) {
	be, err := newBackend()
	if err != nil {
		return nil, api.ModelStatus{}, unfit(fmt.Errorf("backend: %w", err))
	}
	defer func() {
		if err != nil {
			closeBackend(be)
		}
	}()
	if w, ok := be.(tensor.WarmUpper); ok {
		// Compile the backend's kernels before any decision waits on them.
		if err := w.WarmUp(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, api.ModelStatus{}, err
			}
			return nil, api.ModelStatus{}, unfit(fmt.Errorf("backend %s: warm up: %w", be.Name(), err))
		}
	}
	setPoolLimit(be, l.lo.scratchLimit())
	e, err := l.openEngine(dir, be, useInt8, progress)
	if err != nil {
		if errors.Is(err, tensor.ErrDeviceFault) && ctx.Err() == nil {
			return nil, api.ModelStatus{}, unfit(err)
		}
		return nil, api.ModelStatus{}, err
	}
	if gpucheck.Applies(be) {
		if err := l.check(ctx, be, e.Weights()); err != nil {
			e.Close()
			return nil, api.ModelStatus{}, err
		}
	}
	return engine{Engine: e, be: be, loader: l}, modelStatus(e, be), nil
}

// check runs the GPU check on be in the forms of the weights ws.
func (l *decideLoader) check(ctx context.Context, be tensor.Backend, ws []*tensor.Weight) error {
	ref, err := cpu.New(cpu.Options{})
	if err != nil {
		return fmt.Errorf("the GPU check's reference backend: %w", err)
	}
	opts := l.lo.Check
	opts.Forms = metal.FormsOf(ws)
	res := gpucheck.Run(ctx, be, ref, opts)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := res.Err(); err != nil {
		return &unfitError{err: err, note: res.Note()}
	}
	return nil
}

// closeBackend empties a backend's pool of freed buffers and releases a
// backend that holds a device.
func closeBackend(be tensor.Backend) {
	setPoolLimit(be, 0)
	if c, ok := be.(interface{ Close() }); ok {
		c.Close()
	}
}

// FallBack implements [deviceFallback]: it turns the GPU off for every later
// load of the engine's loader, with note as the reason, and reports whether
// the loader has a backend to fall back to.
func (e engine) FallBack(note string) bool {
	if e.loader == nil || e.loader.lo.Fallback == nil || !gpucheck.Applies(e.be) {
		return false
	}
	e.loader.mu.Lock()
	defer e.loader.mu.Unlock()
	if e.loader.disabled == "" {
		e.loader.disabled = note
	}
	return true
}
