package ipc

import (
	"context"
	"time"

	"github.com/startlux/startlux/api"
)

// This file is the typed side of [Client]: the protocol's methods that the
// app and the command line call, with their params and results as package
// api declares them.

// progressEvery is how often [Client.Load] asks for the status while a
// load runs.
const progressEvery = 200 * time.Millisecond

// Status returns the daemon's [api.Status] (the status method).
func (cl *Client) Status(ctx context.Context) (api.Status, error) {
	var st api.Status
	err := cl.Call(ctx, api.MethodStatus, nil, &st)
	return st, err
}

// Models lists the checkpoints the daemon can load, the one it serves
// marked (the models method).
func (cl *Client) Models(ctx context.Context) ([]api.ModelEntry, error) {
	var list []api.ModelEntry
	err := cl.Call(ctx, api.MethodModels, nil, &list)
	return list, err
}

// Load switches the daemon to the model p names, or pulls and loads the
// repository it names (the load method), and returns the daemon's status
// once the model serves. When progress is set, the status is asked every
// 200 ms meanwhile and each [api.LoadProgress] it holds is passed to
// progress, from another goroutine; Load returns after the last call.
func (cl *Client) Load(ctx context.Context, p api.LoadParams, progress func(api.LoadProgress)) (api.Status, error) {
	stop := make(chan struct{})
	watched := make(chan struct{})
	if progress != nil {
		go func() {
			defer close(watched)
			tick := time.NewTicker(progressEvery)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if st, err := cl.Status(ctx); err == nil && st.Progress != nil {
					progress(*st.Progress)
				}
			}
		}()
	} else {
		close(watched)
	}
	var st api.Status
	err := cl.Call(ctx, api.MethodLoad, p, &st)
	close(stop)
	<-watched
	return st, err
}

// Unload has the daemon unload its model and returns its status once it
// has (the unload method).
func (cl *Client) Unload(ctx context.Context) (api.Status, error) {
	var st api.Status
	err := cl.Call(ctx, api.MethodUnload, nil, &st)
	return st, err
}

// Configure changes the daemon's settings that p holds and returns its
// status (the configure method).
func (cl *Client) Configure(ctx context.Context, p api.ConfigureParams) (api.Status, error) {
	var st api.Status
	err := cl.Call(ctx, api.MethodConfigure, p, &st)
	return st, err
}
