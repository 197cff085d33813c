package decide

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
	"github.com/startlux/startlux/tokenizer"
)

// jevfmtFamily is the jevfmt/1 family (format.md): one row per question
// (or per group of a wide choice, or per cyclic shift), the options
// lettered, the answer read from the LM head's logits of the letters. It
// embeds the engine it belongs to.
type jevfmtFamily struct {
	*Engine
	cfg  *Config        // read-only after open
	head *tensor.Weight // the letter rows of the LM head

	// trace, when set (by tests), sees every row run: the request, the
	// question, the row's full ids and its letter logits.
	trace func(r *Request, q *Question, ids []int32, logits []float32)
}

// newJevfmtFamily reads a jevfmt/1 decision config.
func newJevfmtFamily(data []byte) (*jevfmtFamily, error) {
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, err
	}
	return &jevfmtFamily{cfg: cfg}, nil
}

func (e *jevfmtFamily) format() string   { return e.cfg.Format }
func (e *jevfmtFamily) modelDir() string { return "." }

// beforeLoad checks the letters against the tokenizer.
func (e *jevfmtFamily) beforeLoad(_ ckptSource, tok *tokenizer.Tokenizer, _ *model.LoadOptions) (func(), error) {
	return nil, e.cfg.checkLetters(tok, tok.VocabSize())
}

func (e *jevfmtFamily) warmUpRows(tok Encoder) [][]int32 { return e.cfg.warmUpRows(tok) }

// attach checks the letters against the model and takes their head rows.
func (e *jevfmtFamily) attach(_ ckptSource, eng *Engine) error {
	for i, id := range e.cfg.LetterTokenIDs {
		if id >= eng.m.Config.Vocab {
			return fmt.Errorf("%s: letter_token_ids[%d] = %d is outside the model's vocabulary (%d)", ConfigFile, i, id, eng.m.Config.Vocab)
		}
	}
	e.Engine, e.head = eng, eng.m.HeadRows(e.cfg.LetterTokenIDs)
	return nil
}

// probeRow is a row about evidence, as far as the evidence decides it.
func (e *jevfmtFamily) probeRow(evidence string) string {
	return e.cfg.renderRow(evidence, "?", []string{"a", "b"})
}

// decide plans each job's prefix and runs the stages of every job's rows.
func (e *jevfmtFamily) decide(ctx context.Context, r *runner, jobs []batchJob) ([]*Response, []error) {
	return runBatch(ctx, r, jobsOf[*job](jobs), e.planPrefix, e.runStages)
}

// job is one jevfmt/1 request on its way through DecideBatch.
type job struct {
	jobBase
	evidence string
	qs       []*qjob
}

// qjob is one question of a job.
type qjob struct {
	q    *Question
	opts []Option
	T    float64
	// shifts is the number of rows per group: the option count of a
	// permuted question (one row per cyclic shift; it has one group), else 1.
	shifts  int
	rank    *ranking
	first   [][]int32     // the first stage's row ids, tokenised by prepare: group g, shift s at g·shifts+s
	rows    [][][]float32 // the current stage's letter logits by group and shift
	scores  [][]float32   // the rows' letter logits of a question ranked in one row group (Answer.Scores)
	pending int
}

// task is one row to run: group g of its question's current stage, its
// options rotated by shift.
type task struct {
	j     *job
	qj    *qjob
	g     int
	shift int
	from  *candidate // nil: from the start
	rest  []int32
}

func (j *job) answers() Answers {
	var as Answers
	for _, qj := range j.qs {
		a := makeAnswer(qj.q, qj.opts, qj.rank.probs)
		a.Scores = qj.scores
		as = append(as, a)
	}
	return as
}

// prepare validates a request, renders and tokenises the first rows of each
// question and checks them against the model's and the request limits.
func (e *jevfmtFamily) prepare(r *Request) batchJob {
	j := &job{jobBase: jobBase{req: r}}
	j.err = e.prepareRows(j)
	return j
}

func (e *jevfmtFamily) prepareRows(j *job) error {
	r := j.req
	ev, err := validatedEvidence(r, e.limits, e.maxEvidenceBytes())
	if err != nil {
		return err
	}
	evIDs, err := evidenceTokens(e.tok, ev, e.limits)
	if err != nil {
		return err
	}
	j.evidence = ev
	lim := rowLimit{limit: e.info.MaxPositions, evidence: len(evIDs)}
	total := requestTokens{max: e.limits.MaxRequestTokens}
	for i := range r.Questions {
		q := &r.Questions[i]
		opts, _ := q.Options() // validated above
		qj := &qjob{q: q, opts: opts, T: e.cfg.TemperatureByType[string(q.Type)], shifts: 1, rank: newRanking(len(opts), e.cfg.WideChoice)}
		if r.Permuted(q) {
			if len(opts) > e.cfg.WideChoice.Group {
				return &RequestError{Question: q.Name, Field: "permute",
					Message: fmt.Sprintf("%d options: a permuted question takes at most %d with this model (its wide_choice.group)", len(opts), e.cfg.WideChoice.Group)}
			}
			qj.shifts = len(opts)
		}
		j.qs = append(j.qs, qj)
		longest := 0
		for _, g := range qj.rank.groups {
			for sh := range qj.shifts {
				ids, n, err := encodeRow(e.tok, e.rowText(j, qj, g, sh), lim.limit)
				if err != nil {
					return questionError(q, err)
				}
				qj.first = append(qj.first, ids)
				longest = max(longest, n)
				if err := total.add(n); err != nil {
					return err
				}
			}
		}
		if len(opts) > e.cfg.WideChoice.Group {
			bound, err := e.wideBound(j, qj, lim.limit)
			if err != nil {
				return questionError(q, err)
			}
			longest = max(longest, bound)
			if err := total.add(laterRows(len(opts), e.cfg.WideChoice) * bound); err != nil {
				return err
			}
		}
		lim.add(q, longest)
	}
	j.rendered = total.n
	return lim.err(len(r.Questions))
}

// questionError puts a question's name on a request error that lacks one.
func questionError(q *Question, err error) error {
	if re, ok := err.(*RequestError); ok && re.Question == "" {
		re.Question = q.Name
	}
	return err
}

// laterRows counts the rows of a wide question's stages after the first:
// each stage keeps Keep options of each group, until one row holds them.
func laterRows(n int, w WideChoice) int {
	rows := 0
	for n > w.Group {
		k := (n + w.Group - 1) / w.Group
		n = min(n, k*w.Keep)
		if n > w.Group {
			rows += (n + w.Group - 1) / w.Group
		} else {
			rows++
		}
	}
	return rows
}

// rowText renders the row ranking options g of a question, rotated by
// shift: option g[(i+shift) mod len(g)] at letter i.
func (e *jevfmtFamily) rowText(j *job, qj *qjob, g []int, shift int) string {
	labels := make([]string, len(g))
	for i := range g {
		labels[i] = qj.opts[g[(i+shift)%len(g)]].Label
	}
	return e.cfg.renderRow(j.evidence, qj.q.Instructions, labels)
}

// wideBound bounds the length of any later row of a wide question. Such a
// row shows at most min(Group, groups × Keep) survivors; the bound is a row
// of that many options with the longest labels, plus a token per line for
// merges at the line edges. A bound over limit is reported as at least that.
func (e *jevfmtFamily) wideBound(j *job, qj *qjob, limit int) (int, error) {
	idx := make([]int, len(qj.opts))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return len(qj.opts[idx[a]].Label) > len(qj.opts[idx[b]].Label) })
	w := e.cfg.WideChoice
	g := idx[:min(w.Group, len(qj.rank.groups)*w.Keep, len(idx))]
	_, n, err := encodeRow(e.tok, e.rowText(j, qj, g, 0), limit)
	return n + len(g), err
}

// planPrefix chooses the snapshots a job's rows start from: the preamble, a
// kept snapshot of the rows' common prefix, and, when it saves at least
// minPrefixSaving tokens, the common prefix run once now (and offered to the
// store).
func (e *jevfmtFamily) planPrefix(ctx context.Context, r *runner, j *job) error {
	var rows [][]int32
	for _, qj := range j.qs {
		rows = append(rows, qj.first...)
	}
	c, minLen := len(rows[0]), len(rows[0])
	for _, r := range rows[1:] {
		c = min(c, commonPrefix(rows[0], r))
		minLen = min(minLen, len(r))
	}
	c = min(c, minLen-1) // every row keeps a token to run
	common := rows[0][:c]

	var base *candidate
	if isPrefix(e.preamble.ids, common) {
		base = &candidate{sn: e.preamble, pre: true}
		j.cands = append(j.cands, base)
	}
	if hit := e.store.lookup(common, c); hit != nil {
		j.held = append(j.held, hit)
		if base == nil || len(hit.ids) > len(base.sn.ids) {
			base = &candidate{sn: hit, pre: true}
			j.cands = append(j.cands, base)
		}
	}
	baseLen := 0
	var baseState *model.State
	if base != nil {
		baseLen, baseState = len(base.sn.ids), base.sn.state
	}
	if len(rows) < 2 || (len(rows)-1)*(c-baseLen) < minPrefixSaving {
		return nil
	}
	st, err := r.prefill(ctx, baseState, common[baseLen:])
	if err != nil {
		return fmt.Errorf("run the shared prefix: %w", err)
	}
	if base != nil {
		base.used = true
	}
	j.tokens += c - baseLen
	sn := newLocal(append([]int32(nil), common...), st)
	j.held = append(j.held, sn)
	e.store.keep(sn)
	j.cands = append(j.cands, &candidate{sn: sn})
	return nil
}

// runStages runs the rows of every job, stage after stage of the wide-choice
// rule, until every question is answered. An error from the model ends it.
func (e *jevfmtFamily) runStages(ctx context.Context, r *runner, jobs []*job) error {
	first := true
	for {
		var tasks []task
		for _, j := range jobs {
			if j.err != nil || !j.done.IsZero() {
				continue
			}
			for _, qj := range j.qs {
				if qj.rank.done() || qj.pending > 0 {
					continue
				}
				qj.rows = make([][][]float32, len(qj.rank.groups))
				qj.pending = len(qj.rank.groups) * qj.shifts
				for g, opts := range qj.rank.groups {
					qj.rows[g] = make([][]float32, qj.shifts)
					for s := range qj.shifts {
						var ids []int32
						if first {
							ids = qj.first[g*qj.shifts+s]
						} else {
							// Within the limits: wideBound held every later row to them.
							ids = e.tok.Encode(e.rowText(j, qj, opts, s))
						}
						tasks = append(tasks, e.makeTask(j, qj, g, s, ids))
					}
				}
			}
		}
		first = false
		if len(tasks) == 0 {
			return nil
		}
		if err := e.runTasks(ctx, r, tasks); err != nil {
			return err
		}
		now := time.Now()
		for _, j := range jobs {
			if j.err != nil || !j.done.IsZero() {
				continue
			}
			all := true
			for _, qj := range j.qs {
				all = all && qj.rank.done()
			}
			if all {
				j.done = now
			}
		}
	}
}

// makeTask picks the longest snapshot a row starts with.
func (e *jevfmtFamily) makeTask(j *job, qj *qjob, g, shift int, ids []int32) task {
	t := task{j: j, qj: qj, g: g, shift: shift, rest: ids}
	for _, c := range j.cands {
		if len(c.sn.ids) < len(ids) && isPrefix(c.sn.ids, ids) && (t.from == nil || len(c.sn.ids) > len(t.from.sn.ids)) {
			t.from = c
		}
	}
	if t.from != nil {
		t.from.used = true
		t.rest = ids[len(t.from.sn.ids):]
	}
	return t
}

// runTasks runs the tasks' rows (forwardPasses) and, once a question's rows
// of the stage are all in, reads each group's probabilities (Config.Logits,
// Softmax) and advances its ranking.
func (e *jevfmtFamily) runTasks(ctx context.Context, r *runner, tasks []task) error {
	rows := make([]model.Row, len(tasks))
	for k, t := range tasks {
		rows[k] = model.Row{IDs: t.rest, Gather: []int{len(t.rest) - 1}}
		if t.from != nil {
			rows[k].Prefix = t.from.sn.state
		}
	}
	return r.forwardPasses(ctx, rows, e.head, func(k int, out []float32) {
		t := tasks[k]
		t.j.tokens += len(t.rest)
		if e.trace != nil {
			full := t.rest
			if t.from != nil {
				full = append(append([]int32(nil), t.from.sn.ids...), t.rest...)
			}
			e.trace(t.j.req, t.qj.q, full, out)
		}
		qj := t.qj
		n := len(qj.rank.groups[t.g])
		t.j.checkLogits(qj.q, out[:n])
		qj.rows[t.g][t.shift] = append([]float32(nil), out[:n]...)
		qj.pending--
		if qj.pending > 0 {
			return
		}
		probs := make([][]float64, len(qj.rows))
		for g, rows := range qj.rows {
			probs[g] = Softmax(e.cfg.Logits(qj.q.Type, rows), qj.T)
		}
		if qj.rank.final && len(qj.opts) <= e.cfg.WideChoice.Group {
			qj.scores = qj.rows[0]
		}
		qj.rank.advance(probs)
	})
}
