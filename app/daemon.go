package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/ipc"
)

// Daemon is what the controller asks of the daemon.
type Daemon interface {
	// Status returns the daemon's status; an error means it could not be
	// reached.
	Status(ctx context.Context) (api.Status, error)
	// Models lists the checkpoints the daemon can load.
	Models(ctx context.Context) ([]api.ModelEntry, error)
	// Load switches the daemon to the named model, with int8 projections
	// when useInt8 is set, and returns once it serves it (or the switch
	// failed).
	Load(ctx context.Context, name string, useInt8 bool) error
	// Unload unloads the daemon's model, handing its memory back; the
	// next decision loads it again.
	Unload(ctx context.Context) error
	// SetIdleUnload sets how long the daemon waits without a decision
	// before it unloads the model (0: never).
	SetIdleUnload(ctx context.Context, d time.Duration) error
	// Pull has the daemon download a Hub repository ("owner/name" or
	// "owner/name@revision") into the models folder and switch to it (with
	// int8 projections when useInt8 is set), and returns once it serves it
	// (or the pull or the switch failed).
	Pull(ctx context.Context, repo string, useInt8 bool) error
}

// IPCDaemon talks to the daemon over its Unix socket. It keeps one
// connection and dials again after a failure. It is safe for concurrent use.
type IPCDaemon struct {
	// Socket is the daemon's socket path.
	Socket string

	mu sync.Mutex  // guards cl
	cl *ipc.Client // nil until dialled, or after a failure
}

// NewIPCDaemon returns a Daemon that dials socket (ipc.DefaultSocketPath()
// when empty).
func NewIPCDaemon(socket string) *IPCDaemon {
	if socket == "" {
		socket = ipc.DefaultSocketPath()
	}
	return &IPCDaemon{Socket: socket}
}

// do runs fn on the connection, dialling first when there is none.
func (d *IPCDaemon) do(ctx context.Context, fn func(cl *ipc.Client) error) error {
	d.mu.Lock()
	cl := d.cl
	d.mu.Unlock()
	if cl == nil {
		var err error
		if cl, err = ipc.Dial(ctx, d.Socket); err != nil {
			return err
		}
		d.mu.Lock()
		if d.cl != nil {
			cl.Close()
			cl = d.cl
		} else {
			d.cl = cl
		}
		d.mu.Unlock()
	}
	err := fn(cl)
	var perr *api.Error
	if err != nil && !errors.As(err, &perr) && ctx.Err() == nil {
		// The connection failed (the daemon went away): drop it so the
		// next call dials again.
		d.mu.Lock()
		if d.cl == cl {
			d.cl = nil
		}
		d.mu.Unlock()
		cl.Close()
	}
	return err
}

// Status implements [Daemon].
func (d *IPCDaemon) Status(ctx context.Context) (api.Status, error) {
	var s api.Status
	err := d.do(ctx, func(cl *ipc.Client) (err error) {
		s, err = cl.Status(ctx)
		return err
	})
	if err != nil {
		return api.Status{}, fmt.Errorf("daemon status: %w", err)
	}
	return s, nil
}

// Models implements [Daemon].
func (d *IPCDaemon) Models(ctx context.Context) ([]api.ModelEntry, error) {
	var list []api.ModelEntry
	err := d.do(ctx, func(cl *ipc.Client) (err error) {
		list, err = cl.Models(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("daemon models: %w", err)
	}
	return list, nil
}

// load runs the load method with p.
func (d *IPCDaemon) load(ctx context.Context, p api.LoadParams) error {
	return d.do(ctx, func(cl *ipc.Client) error {
		_, err := cl.Load(ctx, p, nil)
		return err
	})
}

// Load implements [Daemon].
func (d *IPCDaemon) Load(ctx context.Context, name string, useInt8 bool) error {
	if err := d.load(ctx, api.LoadParams{Model: name, Int8: &useInt8}); err != nil {
		return fmt.Errorf("switch to model %s: %w", name, err)
	}
	return nil
}

// Unload implements [Daemon].
func (d *IPCDaemon) Unload(ctx context.Context) error {
	err := d.do(ctx, func(cl *ipc.Client) error {
		_, err := cl.Unload(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("unload the model: %w", err)
	}
	return nil
}

// SetIdleUnload implements [Daemon].
func (d *IPCDaemon) SetIdleUnload(ctx context.Context, dur time.Duration) error {
	s := dur.Seconds()
	err := d.do(ctx, func(cl *ipc.Client) error {
		_, err := cl.Configure(ctx, api.ConfigureParams{IdleUnloadS: &s})
		return err
	})
	if err != nil {
		return fmt.Errorf("set idle unload to %v: %w", dur, err)
	}
	return nil
}

// Pull implements [Daemon] with load {"pull": repo}.
func (d *IPCDaemon) Pull(ctx context.Context, repo string, useInt8 bool) error {
	if err := d.load(ctx, api.LoadParams{Pull: repo, Int8: &useInt8}); err != nil {
		return fmt.Errorf("pull %s: %w", repo, err)
	}
	return nil
}

// Close drops the connection.
func (d *IPCDaemon) Close() error {
	d.mu.Lock()
	cl := d.cl
	d.cl = nil
	d.mu.Unlock()
	if cl != nil {
		return cl.Close()
	}
	return nil
}
