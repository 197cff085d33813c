package eval

import (
	"context"
	"fmt"

	"github.com/startlux/startlux/decide"
)

// DefaultBatch is the number of requests Run hands the decider at once.
const DefaultBatch = 32

// Decider answers decision requests: a *decide.Engine in-process, or a
// client of the daemon.
type Decider interface {
	DecideBatch(ctx context.Context, reqs []*decide.Request) ([]*decide.Response, []error)
}

// RunOptions configures [Run].
type RunOptions struct {
	// Batch is the number of requests per DecideBatch call (0: DefaultBatch).
	Batch int
	// Permute sends every request with "permute": true.
	Permute bool
	// PermuteQuestion, if set, says which questions to send permuted
	// (example index, question index); it wins over Permute.
	PermuteQuestion func(ex, q int) bool
	// Progress, if set, is called after each batch with the examples done.
	Progress func(done, total int)
}

// Result is what a run gives: one record per labelled question, in the
// examples' order, and the work the decider reported.
type Result struct {
	Records []Record
	// Tokens and CachedTokens add up the responses' tokens and
	// cached_tokens.
	Tokens, CachedTokens int
}

// Run asks d every example's request. A request the decider refuses ends
// the run with an error naming its line.
func Run(ctx context.Context, d Decider, exs []Example, opts RunOptions) (*Result, error) {
	batch := opts.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	res := &Result{}
	for start := 0; start < len(exs); start += batch {
		end := min(start+batch, len(exs))
		reqs := make([]*decide.Request, end-start)
		for k := range reqs {
			reqs[k] = requestFor(&exs[start+k], start+k, &opts)
		}
		resps, errs := d.DecideBatch(ctx, reqs)
		if len(resps) != len(reqs) || len(errs) != len(reqs) {
			return nil, fmt.Errorf("the decider answered %d of %d requests", min(len(resps), len(errs)), len(reqs))
		}
		for k, resp := range resps {
			ex := &exs[start+k]
			if errs[k] != nil {
				return nil, fmt.Errorf("line %d: %w", ex.Line, errs[k])
			}
			res.Tokens += resp.Tokens
			res.CachedTokens += resp.CachedTokens
			for qi, label := range ex.Labels {
				if label < 0 {
					continue
				}
				q := &ex.Request.Questions[qi]
				a := resp.Answers.Get(q.Name)
				if a == nil || len(a.Probs) <= label {
					return nil, fmt.Errorf("line %d: question %q: no answer over its options in the response", ex.Line, q.Name)
				}
				res.Records = append(res.Records, Record{Line: ex.Line, Question: q.Name, Type: q.Type, Probs: a.Probs, Label: label, Scores: a.Scores})
			}
		}
		if opts.Progress != nil {
			opts.Progress(end, len(exs))
		}
	}
	return res, nil
}

// requestFor returns the request to send for example i: the example's own,
// or a copy with permute set as the options say.
func requestFor(ex *Example, i int, opts *RunOptions) *decide.Request {
	if !opts.Permute && opts.PermuteQuestion == nil {
		return ex.Request
	}
	r := *ex.Request
	r.Permute = opts.Permute
	if opts.PermuteQuestion != nil {
		r.Questions = append([]decide.Question(nil), r.Questions...)
		for qi := range r.Questions {
			p := opts.PermuteQuestion(i, qi)
			r.Questions[qi].Permute = &p
		}
	}
	return &r
}
