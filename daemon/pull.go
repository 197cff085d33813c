package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/hub"
)

// This file is the load method's pull: download a checkpoint from the
// Hugging Face Hub into the models folder, then load it.

// pullTarget checks a load's pull params and returns the reference and the
// directory the model goes to.
func (d *Daemon) pullTarget(p api.LoadParams) (hub.Ref, string, error) {
	ref, err := hub.ParseRef(p.Pull)
	if err != nil {
		return hub.Ref{}, "", api.Errorf(api.CodeInvalidParams, "load: pull %q: %v", p.Pull, err)
	}
	dest, err := ref.Dir(d.opts.ModelsDir, p.Name)
	switch {
	case errors.Is(err, hub.ErrDemoName):
		return hub.Ref{}, "", api.Errorf(api.CodeInvalidParams, "load: pull %s: %v; give another name", ref, err)
	case err != nil:
		return hub.Ref{}, "", api.Errorf(api.CodeInvalidParams, "load: pull %s: %v", ref, err)
	}
	return ref, dest, nil
}

// Pull downloads ref into dest (a directory in the models folder) and then
// loads it as [Daemon.Switch] does (with int8 projections when useInt8 is
// set); status reports the download meanwhile.
// A model already in dest that was pulled from the same commit is loaded as
// it is. The pull and the load go on if ctx ends first.
func (d *Daemon) Pull(ctx context.Context, ref hub.Ref, dest string, useInt8 bool) error {
	done := make(chan error, 1)
	go func() {
		d.loadMu.Lock()
		defer d.loadMu.Unlock()
		if err := d.pull(ref, dest); err != nil {
			done <- err
			return
		}
		done <- d.loadLocked(dest, useInt8)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pull downloads ref into dest, with loadMu held, reporting its progress
// in status.
func (d *Daemon) pull(ref hub.Ref, dest string) error {
	d.setProgress(&api.LoadProgress{Model: dest, Phase: api.PhasePulling, Repo: ref.Repo}, api.StateLoading)
	newClient := d.opts.Hub
	if newClient == nil {
		newClient = func() (*hub.Client, error) { return hub.NewClient(hub.EnvOptions(os.Getenv)) }
	}
	c, err := newClient()
	if err != nil {
		return d.pullFailed(ref, dest, err)
	}
	plan, err := c.Resolve(d.ctx, ref)
	if err != nil {
		return d.pullFailed(ref, dest, err)
	}
	opts := d.opts.PullOptions
	opts.Progress = func(p hub.Progress) {
		d.mu.Lock()
		lp := d.progress
		if lp == nil || lp.Phase != api.PhasePulling || lp.Model != dest {
			d.mu.Unlock()
			return
		}
		lp.Done, lp.Total, lp.File, lp.Rate, lp.ETAS = p.Done, p.Total, p.File, p.Rate, p.ETA.Seconds()
		cp := *lp
		d.mu.Unlock()
		d.report(cp)
	}
	name := filepath.Base(dest)
	src, fetched, err := c.Install(d.ctx, plan, dest, opts)
	var exists *hub.ExistsError
	switch {
	case errors.As(err, &exists):
		return d.pullFailed(ref, dest, fmt.Errorf("%w: pull it under another name, or remove it first (startlux rm %s)", err, name))
	case errors.Is(err, hub.ErrResumable):
		return d.pullFailed(ref, dest, fmt.Errorf("%w (pulling it again resumes the download; \"startlux rm %s\" discards what was fetched)", err, name))
	case err != nil:
		return d.pullFailed(ref, dest, err)
	case !fetched:
		d.opts.Logger.Info("already pulled", "repo", plan.Repo, "commit", plan.Commit, "dir", dest)
		return nil
	}
	d.opts.Logger.Info("pulled", "repo", src.Repo, "commit", src.Commit, "dir", dest, "bytes", src.Bytes())
	return nil
}

// pullFailed records a failed pull and returns its protocol error.
func (d *Daemon) pullFailed(ref hub.Ref, dest string, err error) error {
	msg := fmt.Sprintf("pull %s into %s: %v", ref, dest, err)
	d.recordFailure(dest, msg)
	if d.ctx.Err() != nil {
		return api.Errorf(api.CodeShuttingDown, "%s", msg)
	}
	return api.Errorf(api.CodePullFailed, "%s", msg)
}
