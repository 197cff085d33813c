package decide

import (
	"context"
	"sort"
	"time"

	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
)

// jobBase is what every request on its way through DecideBatch carries,
// whatever the checkpoint family.
type jobBase struct {
	req    *Request
	err    error
	cands  []*candidate // snapshots rows may start from (cachedPositions counts the pre ones)
	held   []*snapshot  // references to release at the end
	tokens int
	done   time.Time
	// bad is set, the first time, when a question's model outputs are not
	// finite; the request then fails with it.
	bad *NonFiniteError
}

func (b *jobBase) base() *jobBase { return b }

// batchJob is a job of one family (*job for jevfmt/1, *pjob for pointer/1).
type batchJob interface {
	base() *jobBase
	// answers returns a finished job's answers, in the request's order.
	answers() Answers
}

// family is what differs between the checkpoint families in DecideBatch.
type family[J batchJob] struct {
	// prepare validates and tokenises a request; a bad one gets err set.
	prepare func(*Request) J
	// plan prepares the prefix a good job's rows start from.
	plan func(context.Context, J) error
	// run answers every good job, setting done on each one it finishes.
	run func(context.Context, []J) error
}

// runBatch is DecideBatch's outline, shared by both families: prepare every
// request, plan their prefixes, run their rows together, and build the
// responses. A bad request fails alone; an error of the model fails every
// job it left unfinished. Snapshot references are released in any case.
func runBatch[J batchJob](ctx context.Context, e *Engine, reqs []*Request, f family[J]) ([]*Response, []error) {
	start := time.Now()
	resps := make([]*Response, len(reqs))
	errs := make([]error, len(reqs))
	jobs := make([]J, len(reqs))
	for i, r := range reqs {
		jobs[i] = f.prepare(r)
	}
	defer func() {
		for _, j := range jobs {
			for _, sn := range j.base().held {
				e.store.release(sn)
			}
		}
	}()
	for _, j := range jobs {
		if b := j.base(); b.err == nil {
			b.err = f.plan(ctx, j)
		}
	}
	if err := f.run(ctx, jobs); err != nil {
		for _, j := range jobs {
			if b := j.base(); b.err == nil && b.done.IsZero() {
				b.err = err
			}
		}
	}
	for i, j := range jobs {
		b := j.base()
		if b.err == nil && b.bad != nil {
			b.err = b.bad
		}
		if b.err != nil {
			errs[i] = b.err
			continue
		}
		as := j.answers()
		if err := checkAnswers(as); err != nil {
			errs[i] = err
			continue
		}
		resps[i] = &Response{
			Answers:      as,
			Tokens:       b.tokens,
			CachedTokens: cachedPositions(b.cands),
			ElapsedMS:    float64(b.done.Sub(start).Microseconds()) / 1000,
		}
	}
	return resps, errs
}

// forwardPasses runs rows longest first in passes of at most MaxPassTokens
// padded tokens, split where padding would cost more than a pass
// (planPasses), and hands each row's output to done with the row's index.
// It stops at the first error, or when ctx ends between passes.
func (e *Engine) forwardPasses(ctx context.Context, rows []model.Row, head *tensor.Weight, done func(i int, out []float32)) error {
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(rows[order[a]].IDs) > len(rows[order[b]].IDs) })
	lens := make([]int, len(rows))
	for k, i := range order {
		lens[k] = len(rows[i].IDs)
	}
	start := 0
	for _, end := range planPasses(lens, MaxPassTokens) {
		if err := ctx.Err(); err != nil {
			return err
		}
		pass := make([]model.Row, end-start)
		for k := range pass {
			pass[k] = rows[order[start+k]]
		}
		out, err := e.m.Forward(ctx, pass, head)
		if err != nil {
			return err
		}
		for k := range pass {
			done(order[start+k], out[k])
		}
		start = end
	}
	return nil
}
