package eval

import (
	"context"
	"errors"
	"fmt"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
)

// Daemon is a [Decider] that sends batches of requests to the daemon
// (decide_batch): it measures the model the daemon serves.
type Daemon struct {
	// Client is the connection to the daemon.
	Client *ipc.Client
}

// DecideBatch asks the daemon; a failed call (or an answer that cannot be
// read) fails every request.
func (d Daemon) DecideBatch(ctx context.Context, reqs []*decide.Request) ([]*decide.Response, []error) {
	resps := make([]*decide.Response, len(reqs))
	errs := make([]error, len(reqs))
	params := struct {
		Requests []*decide.Request `msgpack:"requests"`
	}{reqs}
	wire, werrs, err := d.Client.DecideBatch(ctx, params)
	if err == nil && len(wire) != len(reqs) {
		err = fmt.Errorf("the daemon answered %d of %d requests", len(wire), len(reqs))
	}
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return resps, errs
	}
	for i, w := range wire {
		var perr *api.Error
		if errors.As(werrs[i], &perr) {
			errs[i] = errors.New(perr.Message)
			continue
		}
		resps[i] = fromWire(w)
	}
	return resps, errs
}

// fromWire is a decision response from the daemon as eval reads it (no
// letter logits: they do not travel).
func fromWire(w *api.Response) *decide.Response {
	r := &decide.Response{Answers: make(decide.Answers, len(w.Answers)), Tokens: w.Tokens, CachedTokens: w.CachedTokens, ElapsedMS: w.ElapsedMS}
	for i, a := range w.Answers {
		r.Answers[i] = decide.Answer{Name: a.Name, Options: a.Options, Probs: a.Probs, Answer: a.Answer, Expected: a.Expected}
	}
	return r
}

var _ Decider = Daemon{}
