package decide

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
	"github.com/startlux/startlux/tokenizer"
)

// jobBase is what every request on its way through DecideBatch carries,
// whatever the checkpoint family.
type jobBase struct {
	req      *Request
	err      error
	rendered int          // tokens of every row the request renders (Prepared.Tokens)
	cands    []*candidate // snapshots rows may start from (cachedPositions counts the pre ones)
	held     []*snapshot  // references to release at the end
	tokens   int
	done     time.Time
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

// jobsOf returns jobs as jobs of one family.
func jobsOf[J batchJob](jobs []batchJob) []J {
	out := make([]J, len(jobs))
	for i, j := range jobs {
		out[i] = j.(J)
	}
	return out
}

// candidate is a snapshot a job's rows may start from. pre marks snapshots
// made before the request (they count as cached when used).
type candidate struct {
	sn   *snapshot
	pre  bool
	used bool
}

// family is what a checkpoint family adds to the engine: how it is opened
// over the base model ([open] does the rest), and how its requests are
// prepared and answered. There is one file per family: jevfmt.go (jevfmt/1)
// and pointer.go (pointer/1).
type family interface {
	// format names the family (Info.Format).
	format() string
	// modelDir is the base model's directory in the checkpoint ("." for
	// the checkpoint itself).
	modelDir() string
	// beforeLoad checks the tokenizer against the family's config and adds
	// what the family loads with the model (an adapter) to lo; release, if
	// not nil, is called once the model is loaded.
	beforeLoad(src ckptSource, tok *tokenizer.Tokenizer, lo *model.LoadOptions) (release func(), err error)
	// warmUpRows returns the rows of the warm-up requests (WarmUpRequests),
	// by which an int8 model is calibrated at load.
	warmUpRows(tok Encoder) [][]int32
	// attach binds the family to its engine, whose model is loaded, and
	// reads what else it needs (the letter rows of the LM head, a pointer
	// head).
	attach(src ckptSource, e *Engine) error
	// probeRow returns the text of a row about evidence, as far as the
	// evidence decides it: what rows share of it is the engine's preamble.
	probeRow(evidence string) string
	// prepare validates a request and tokenises its rows (the job's err
	// says what is wrong with it).
	prepare(r *Request) batchJob
	// decide answers prepared jobs of the family together (runBatch).
	decide(ctx context.Context, r *runner, jobs []batchJob) ([]*Response, []error)
}

// headWeights is implemented by families that hold weights besides the
// model's (the pointer head): Info.WeightBytes counts them.
type headWeights interface {
	headBytes() int64
}

// Prepared is a request validated and tokenised by [Engine.Prepare],
// waiting to be answered by [Engine.DecidePrepared] on the same engine. It
// holds the request's rows as token ids; it is answered once.
type Prepared struct {
	e   *Engine
	job batchJob
}

// Tokens returns the tokens of every row the request renders: what it costs
// to hold, and about what it costs to run before prefix sharing.
func (p *Prepared) Tokens() int { return p.job.base().rendered }

// Prepare validates r against the engine's limits and tokenises its rows:
// everything of answering it that needs no forward pass. A bad request (one
// over a limit included) is a *RequestError.
func (e *Engine) Prepare(r *Request) (*Prepared, error) {
	j := e.fam.prepare(r)
	if err := j.base().err; err != nil {
		return nil, err
	}
	return &Prepared{e: e, job: j}, nil
}

// Turn is asked for before each forward pass of [Engine.DecidePrepared],
// with the pass's padded tokens: it returns once the pass may run, and the
// pass calls done when it has run. A scheduler that hands turns to several
// calls in the order they asked interleaves their passes, so that a small
// request waits for at most one pass of a large one. It returns an error
// only when ctx ends.
type Turn func(ctx context.Context, tokens int) (done func(), err error)

// DecideBatch answers many requests at once: each is prepared, then their
// rows are packed into passes of at most Options.PassTokens padded tokens,
// longest rows first. The i-th response or error belongs to the i-th
// request; a bad request does not affect the others.
func (e *Engine) DecideBatch(ctx context.Context, reqs []*Request) ([]*Response, []error) {
	jobs := make([]batchJob, len(reqs))
	for i, r := range reqs {
		jobs[i] = e.fam.prepare(r)
	}
	return e.fam.decide(ctx, e.runner(nil, 0), jobs)
}

// DecidePrepared answers prepared requests together, as DecideBatch does,
// asking turn (if not nil) before each forward pass, no pass longer than
// passTokens padded tokens where the rows allow (0: Options.PassTokens).
// Each request must have been prepared by this engine and is answered once.
func (e *Engine) DecidePrepared(ctx context.Context, ps []*Prepared, turn Turn, passTokens int) ([]*Response, []error) {
	errs := make([]error, len(ps))
	var jobs []batchJob
	var at []int
	for i, p := range ps {
		if p.e != e {
			errs[i] = errors.New("decide: a request prepared by another engine")
			continue
		}
		jobs = append(jobs, p.job) // of e's family: e prepared it
		at = append(at, i)
	}
	rs, es := e.fam.decide(ctx, e.runner(turn, passTokens), jobs)
	resps := make([]*Response, len(ps))
	for k, i := range at {
		resps[i], errs[i] = rs[k], es[k]
	}
	return resps, errs
}

// runBatch is DecideBatch's outline, shared by both families: plan the
// prefix of each prepared job, run the rows of all together, and build the
// responses. A bad request fails alone; an error of the model fails every
// job it left unfinished. Snapshot references are released in any case.
func runBatch[J batchJob](ctx context.Context, r *runner, jobs []J, plan func(context.Context, *runner, J) error, run func(context.Context, *runner, []J) error) ([]*Response, []error) {
	start := time.Now()
	resps := make([]*Response, len(jobs))
	errs := make([]error, len(jobs))
	defer func() {
		for _, j := range jobs {
			for _, sn := range j.base().held {
				r.e.store.release(sn)
			}
		}
	}()
	for _, j := range jobs {
		if b := j.base(); b.err == nil {
			b.err = plan(ctx, r, j)
		}
	}
	if err := run(ctx, r, jobs); err != nil {
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

// runner runs one batch's forward passes: each in a turn of its own, none
// longer than maxTokens padded tokens where the rows allow.
type runner struct {
	e         *Engine
	turn      Turn // nil: every pass at once
	maxTokens int
}

// runner returns the runner of one batch on e, its passes at most
// maxTokens (0: the engine's bound).
func (e *Engine) runner(turn Turn, maxTokens int) *runner {
	if maxTokens <= 0 {
		maxTokens = e.passTokens
	}
	return &runner{e: e, turn: turn, maxTokens: maxTokens}
}

// pass runs f, a pass of the given padded tokens, in a turn of its own.
func (r *runner) pass(ctx context.Context, tokens int, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.turn == nil {
		return f()
	}
	done, err := r.turn(ctx, tokens)
	if err != nil {
		return err
	}
	defer done()
	return f()
}

// prefill runs ids (at least one) after prefix and returns the state after
// them: in pieces of at most maxTokens, each a pass in its own turn, freeing
// the states between them. prefix is not modified.
func (r *runner) prefill(ctx context.Context, prefix *model.State, ids []int32) (*model.State, error) {
	if len(ids) == 0 {
		return nil, errors.New("prefill: no tokens")
	}
	st := prefix
	for off := 0; off < len(ids); {
		n := min(r.maxTokens, len(ids)-off)
		var next *model.State
		err := r.pass(ctx, n, func() (err error) {
			next, err = r.e.m.Prefill(ctx, st, ids[off:off+n])
			return err
		})
		if st != prefix {
			st.Free()
		}
		if err != nil {
			return nil, err
		}
		st, off = next, off+n
	}
	return st, nil
}

// forwardPasses runs rows longest first in passes of at most maxTokens
// padded tokens and MaxPassRows rows, split where padding would cost more
// than a pass
// (planPasses), and hands each row's output to done with the row's index.
// A row longer than maxTokens has its head (up to its first gathered
// position) prefilled in pieces first, then runs its tail alone, so that no
// pass is longer than it must be. It stops at the first error, or when ctx
// ends between passes.
func (r *runner) forwardPasses(ctx context.Context, rows []model.Row, head *tensor.Weight, done func(i int, out []float32)) error {
	var short []int
	for i, row := range rows {
		cut := len(row.IDs) - r.maxTokens
		for _, g := range row.Gather {
			cut = min(cut, g)
		}
		if cut <= 0 {
			short = append(short, i)
			continue
		}
		if err := r.longRow(ctx, row, cut, head, func(out []float32) { done(i, out) }); err != nil {
			return err
		}
	}
	sort.SliceStable(short, func(a, b int) bool { return len(rows[short[a]].IDs) > len(rows[short[b]].IDs) })
	lens := make([]int, len(short))
	for k, i := range short {
		lens[k] = len(rows[i].IDs)
	}
	start := 0
	for _, end := range planPasses(lens, r.maxTokens, MaxPassRows) {
		pass := make([]model.Row, end-start)
		for k := range pass {
			pass[k] = rows[short[start+k]]
		}
		var out [][]float32
		if err := r.pass(ctx, len(pass)*len(pass[0].IDs), func() (err error) {
			out, err = r.e.m.Forward(ctx, pass, head)
			return err
		}); err != nil {
			return err
		}
		for k := range pass {
			done(short[start+k], out[k])
		}
		start = end
	}
	return nil
}

// longRow runs a row whose first cut tokens hold no gathered position: they
// are prefilled (in pieces), then the rest runs as a pass of its own.
func (r *runner) longRow(ctx context.Context, row model.Row, cut int, head *tensor.Weight, done func(out []float32)) error {
	st, err := r.prefill(ctx, row.Prefix, row.IDs[:cut])
	if err != nil {
		return fmt.Errorf("run a long row's head: %w", err)
	}
	defer st.Free()
	tail := model.Row{Prefix: st, IDs: row.IDs[cut:], Gather: make([]int, len(row.Gather))}
	for k, g := range row.Gather {
		tail.Gather[k] = g - cut
	}
	var out [][]float32
	if err := r.pass(ctx, len(tail.IDs), func() (err error) {
		out, err = r.e.m.Forward(ctx, []model.Row{tail}, head)
		return err
	}); err != nil {
		return err
	}
	done(out[0])
	return nil
}

var (
	_ family = (*jevfmtFamily)(nil)
	_ family = (*pointerFamily)(nil)
)
