package decide

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"time"

	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tokenizer"
)

// PointerFormat is the checkpoint family read out by a pointer head over
// each option's own position (format.md, "The pointer/1 family").
const PointerFormat = "pointer/1"

// MaxPointerOptions bounds the options of one question for pointer/1
// checkpoints (there is no letter limit and no wide-choice rule).
const MaxPointerOptions = 256

// PointerConfig is a pointer/1 checkpoint's decision_config.json.
type PointerConfig struct {
	Format string `json:"format"`
	System string `json:"system"`
	// Base is the directory of the Qwen3.5 base checkpoint, Adapter that of
	// an optional PEFT LoRA adapter, both relative to the checkpoint.
	Base    string `json:"base"`
	Adapter string `json:"adapter"`
	// LoRAScale multiplies the adapter's update (1 when absent).
	LoRAScale *float64 `json:"lora_scale"`
	Head      struct {
		File        string  `json:"file"`
		DP          int     `json:"dp"`
		Temperature float64 `json:"temperature"`
	} `json:"head"`
}

// ConfigFormat returns the format field of a decision config ("" when it
// has none or does not parse: its parser reports that).
func ConfigFormat(data []byte) string {
	var f struct {
		Format string `json:"format"`
	}
	json.Unmarshal(data, &f) // a bad config is reported by its parser
	return f.Format
}

// ParsePointerConfig reads and checks a pointer/1 decision_config.json.
func ParsePointerConfig(data []byte) (*PointerConfig, error) {
	var c PointerConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	return &c, nil
}

func (c *PointerConfig) check() error {
	if c.Format != PointerFormat {
		return fmt.Errorf("format %q, want %s", c.Format, PointerFormat)
	}
	if c.System == "" {
		return fmt.Errorf("system is missing or empty")
	}
	for _, p := range []struct{ field, v string }{{"base", c.Base}, {"adapter", c.Adapter}, {"head.file", c.Head.File}} {
		if p.v == "" && p.field == "adapter" {
			continue
		}
		if p.v == "" {
			return fmt.Errorf("%s is missing", p.field)
		}
		if !fs.ValidPath(p.v) {
			return fmt.Errorf("%s %q: want a slash-separated path inside the checkpoint directory", p.field, p.v)
		}
	}
	if c.LoRAScale != nil {
		if c.Adapter == "" {
			return fmt.Errorf("lora_scale is set but there is no adapter")
		}
		if s := *c.LoRAScale; !(s > 0) || math.IsInf(s, 0) {
			return fmt.Errorf("lora_scale = %v: must be positive and finite", s)
		}
	}
	if c.Head.DP < 1 {
		return fmt.Errorf("head.dp = %d: must be a positive integer", c.Head.DP)
	}
	if T := c.Head.Temperature; !(T > 0) || math.IsInf(T, 0) {
		return fmt.Errorf("head.temperature = %v: must be positive and finite", T)
	}
	return nil
}

// pointerFamily is the pointer/1 family: each request's state (system
// turn and evidence) runs once, then each question's branch from it, and a
// pointer head reads the options' own positions. It embeds the engine it
// belongs to.
type pointerFamily struct {
	*Engine
	cfg    *PointerConfig
	wq, wk []float32 // the head's projections, [dp, H] row-major, float32
	dp     int
	factor float64 // 1/√dp/temperature
	row    bool    // Options.RowForm

	// trace, when set (by tests), sees every question's row: the state's
	// ids, the branch's ids, the decide and option positions in the branch,
	// and the head's logits.
	trace func(r *Request, q *Question, state, branch []int32, decide int, opts []int, logits []float32)
}

// headBytes implements headWeights: the head's projections, float32.
func (f *pointerFamily) headBytes() int64 { return 4 * int64(len(f.wq)+len(f.wk)) }

// newPointerFamily reads a pointer/1 decision config.
func newPointerFamily(data []byte, opts Options) (*pointerFamily, error) {
	cfg, err := ParsePointerConfig(data)
	if err != nil {
		return nil, err
	}
	return &pointerFamily{cfg: cfg, dp: cfg.Head.DP, factor: 1 / math.Sqrt(float64(cfg.Head.DP)) / cfg.Head.Temperature, row: opts.RowForm}, nil
}

func (e *pointerFamily) format() string   { return PointerFormat }
func (e *pointerFamily) modelDir() string { return e.cfg.Base }

// beforeLoad loads the adapter, if any, to be merged into the base's
// weights (copies: it is closed once the model is loaded).
func (e *pointerFamily) beforeLoad(src ckptSource, _ *tokenizer.Tokenizer, lo *model.LoadOptions) (func(), error) {
	if e.cfg.Adapter == "" {
		return nil, nil
	}
	ad, err := src.adapter(e.cfg.Adapter)
	if err != nil {
		return nil, err
	}
	lo.Adapter, lo.LoRAScale = ad, 1
	if e.cfg.LoRAScale != nil {
		lo.LoRAScale = *e.cfg.LoRAScale
	}
	return func() { ad.Close() }, nil
}

func (e *pointerFamily) warmUpRows(tok Encoder) [][]int32 { return e.cfg.warmUpRows(tok) }

// attach reads the head.
func (e *pointerFamily) attach(src ckptSource, eng *Engine) error {
	e.Engine = eng
	return e.readHead(src, eng.m.Config.Hidden)
}

// probeRow is a request's state.
func (e *pointerFamily) probeRow(evidence string) string { return pointerState(e.cfg.System, evidence) }

// decide runs each job's state (unless in the row form) and then every
// question's branches.
func (e *pointerFamily) decide(ctx context.Context, r *runner, jobs []batchJob) ([]*Response, []error) {
	plan := func(ctx context.Context, r *runner, j *pjob) error {
		if e.row {
			return nil
		}
		return e.pointerState(ctx, r, j)
	}
	return runBatch(ctx, r, jobsOf[*pjob](jobs), plan, e.runBranches)
}

// readHead reads the head's q_proj and k_proj, each [dp, hidden].
func (e *pointerFamily) readHead(src ckptSource, hidden int) error {
	name := e.cfg.Head.File
	data, err := src.read(name)
	if err != nil {
		return err
	}
	f, err := safetensors.Parse(name, data)
	if err != nil {
		return err
	}
	for _, t := range []struct {
		key string
		dst *[]float32
	}{{"q_proj.weight", &e.wq}, {"k_proj.weight", &e.wk}} {
		info := f.Tensor(t.key)
		if info == nil {
			return fmt.Errorf("%s: tensor %s is missing", name, t.key)
		}
		if !info.DType.IsFloat() || len(info.Shape) != 2 {
			return fmt.Errorf("%s: tensor %s is %s %v, want a float matrix [dp, hidden]", name, t.key, info.DType, info.Shape)
		}
		if info.Shape[0] != e.dp {
			return fmt.Errorf("%s: tensor %s has %d rows, but head.dp is %d", name, t.key, info.Shape[0], e.dp)
		}
		if info.Shape[1] != hidden {
			return fmt.Errorf("%s: tensor %s is %d wide, which does not match the base's hidden size %d", name, t.key, info.Shape[1], hidden)
		}
		*t.dst = info.Weight().Float32s()
	}
	return nil
}

// pointerState returns the text of a request's state: the system turn and
// the evidence.
func pointerState(system, evidence string) string {
	return "<|im_start|>system\n" + system + "<|im_end|>\n<|im_start|>user\nEvidence:\n" + evidence + "\n\n"
}

// pointerBranch returns the token ids of one question's branch, built piece
// by piece, with the positions the head reads: the last token of each
// option's piece and the last token of the branch (decide). A branch longer
// than max tokens comes back without ids, n being the least it has; n is its
// length otherwise.
func pointerBranch(tok Encoder, instructions string, opts []Option, max int) (ids []int32, decide int, pos []int, n int, err error) {
	piece := func(s string) bool {
		got, atLeast, err2 := encodeRow(tok, s, max-len(ids))
		if err2 != nil {
			err = err2
			return false
		}
		if got == nil && atLeast > 0 {
			n = len(ids) + atLeast
			return false
		}
		ids = append(ids, got...)
		return true
	}
	if !piece("Question: " + instructions + "\nOptions:\n") {
		return nil, 0, nil, n, err
	}
	nl := tok.Encode("\n")
	pos = make([]int, len(opts))
	for i, o := range opts {
		if !piece("- " + o.Label) {
			return nil, 0, nil, n, err
		}
		pos[i] = len(ids) - 1
		ids = append(ids, nl...)
	}
	ids = append(ids, tok.Encode("<|im_end|>\n<|im_start|>assistant\n")...)
	return ids, len(ids) - 1, pos, len(ids), nil
}

// pjob is one pointer/1 request on its way through DecideBatch. Its cands
// are the snapshots made before the request that the state used.
type pjob struct {
	jobBase
	state []int32
	qs    []*pquestion
	from  *snapshot // the state's snapshot the branches start from (nil in the row form)
	left  int       // questions not yet answered
}

// pquestion is one question's branches and, once run, its probabilities.
// A question has one branch, or one per cyclic shift of its options when
// permuted (branch s lists option (i+s) mod n at place i).
type pquestion struct {
	q        *Question
	opts     []Option
	branches []pbranch
	logits   [][]float32 // the head's logits by branch, in the branch's order of options
	pending  int
	probs    []float64
}

// pbranch is one row of a question: its ids, the decide position and the
// option positions.
type pbranch struct {
	ids    []int32
	decide int
	pos    []int
}

// A pointer/1 batch: each request's state runs once into a prefix state (or
// comes from the snapshot store), then every question's branch runs as a
// right-padded row from it, rows of all requests packed into passes of at
// most Options.PassTokens padded tokens.

func (j *pjob) answers() Answers {
	var as Answers
	for _, pq := range j.qs {
		as = append(as, makeAnswer(pq.q, pq.opts, pq.probs))
	}
	return as
}

// prepare validates a request, tokenises its state and branches and checks
// them against the model's and the request limits.
func (e *pointerFamily) prepare(r *Request) batchJob {
	j := &pjob{jobBase: jobBase{req: r}}
	j.err = e.preparePointerRows(j)
	j.left = len(j.qs)
	return j
}

func (e *pointerFamily) preparePointerRows(j *pjob) error {
	r := j.req
	ev, err := validatedEvidence(r, e.limits, e.maxEvidenceBytes())
	if err != nil {
		return err
	}
	if j.state, err = evidenceTokens(e.tok, pointerState(e.cfg.System, ev), e.limits); err != nil {
		return err
	}
	limit := e.info.MaxPositions
	lim := rowLimit{limit: limit, evidence: len(j.state) - len(e.preamble.ids)}
	total := requestTokens{max: e.limits.MaxRequestTokens}
	if err := total.add(len(j.state)); err != nil {
		return err
	}
	for i := range r.Questions {
		q := &r.Questions[i]
		opts, _ := q.Options() // validated above
		if len(opts) > MaxPointerOptions {
			return &RequestError{Question: q.Name, Field: "criteria",
				Message: fmt.Sprintf("%d options: this model (%s) takes at most %d", len(opts), PointerFormat, MaxPointerOptions)}
		}
		pq := &pquestion{q: q, opts: opts}
		shifts := 1
		if r.Permuted(q) {
			shifts = len(opts)
		}
		longest := 0
		for sh := range shifts {
			shown := append(append([]Option(nil), opts[sh:]...), opts[:sh]...)
			var b pbranch
			var n int
			b.ids, b.decide, b.pos, n, err = pointerBranch(e.tok, q.Instructions, shown, limit-len(j.state))
			if err != nil {
				return questionError(q, err)
			}
			pq.branches = append(pq.branches, b)
			longest = max(longest, n)
			if err := total.add(n); err != nil {
				return err
			}
		}
		pq.logits = make([][]float32, shifts)
		pq.pending = shifts
		j.qs = append(j.qs, pq)
		lim.add(q, len(j.state)+longest)
	}
	j.rendered = total.n
	return lim.err(len(r.Questions))
}

// pointerState makes the snapshot of a job's state that its branches start
// from: a kept one, or the state run from the longest snapshot that
// precedes it (the preamble, a kept shorter prefix) and offered to the store.
func (e *pointerFamily) pointerState(ctx context.Context, r *runner, j *pjob) error {
	S := j.state
	var base *snapshot
	if len(e.preamble.ids) > 0 && len(e.preamble.ids) < len(S) && isPrefix(e.preamble.ids, S) {
		base = e.preamble
	}
	if hit := e.store.lookup(S, len(S)); hit != nil {
		j.held = append(j.held, hit)
		if base == nil || len(hit.ids) > len(base.ids) {
			base = hit
		}
	}
	if base != nil {
		j.cands = append(j.cands, &candidate{sn: base, pre: true, used: true})
		if len(base.ids) == len(S) {
			j.from = base
			return nil
		}
	}
	var baseState *model.State
	baseLen := 0
	if base != nil {
		baseState, baseLen = base.state, len(base.ids)
	}
	st, err := r.prefill(ctx, baseState, S[baseLen:])
	if err != nil {
		return fmt.Errorf("run the state: %w", err)
	}
	j.tokens += len(S) - baseLen
	sn := newLocal(append([]int32(nil), S...), st)
	j.held = append(j.held, sn)
	e.store.keep(sn)
	j.from = sn
	return nil
}

// ptask is one branch row to run.
type ptask struct {
	j     *pjob
	pq    *pquestion
	shift int
	row   model.Row
}

// runBranches runs every question's row (forwardPasses) and reads the head
// out.
func (e *pointerFamily) runBranches(ctx context.Context, r *runner, jobs []*pjob) error {
	var tasks []ptask
	for _, j := range jobs {
		if j.err != nil {
			continue
		}
		for _, pq := range j.qs {
			for s, b := range pq.branches {
				t := ptask{j: j, pq: pq, shift: s}
				gather := append(append(make([]int, 0, len(b.pos)+1), b.pos...), b.decide)
				if j.from != nil {
					t.row = model.Row{Prefix: j.from.state, IDs: b.ids, Gather: gather}
				} else { // the row form: the state recomputed in the row
					ids := append(append(make([]int32, 0, len(j.state)+len(b.ids)), j.state...), b.ids...)
					for i := range gather {
						gather[i] += len(j.state)
					}
					t.row = model.Row{IDs: ids, Gather: gather}
				}
				tasks = append(tasks, t)
			}
		}
	}
	H := e.m.Config.Hidden
	rows := make([]model.Row, len(tasks))
	for k, t := range tasks {
		rows[k] = t.row
	}
	return r.forwardPasses(ctx, rows, nil, func(k int, out []float32) {
		t := tasks[k]
		pq := t.pq
		b := &pq.branches[t.shift]
		z := e.logits(out, len(b.pos), H)
		if e.trace != nil {
			e.trace(t.j.req, pq.q, t.j.state, b.ids, b.decide, b.pos, z)
		}
		t.j.checkLogits(pq.q, z)
		pq.logits[t.shift] = z
		t.j.tokens += len(t.row.IDs)
		if pq.pending--; pq.pending > 0 {
			return
		}
		// The head's temperature is in its logits already.
		pq.probs = Softmax(rotatedMean(pq.logits, nil), 1)
		t.j.left--
		if t.j.left == 0 {
			t.j.done = time.Now()
		}
	})
}

// logits applies the head to a row's gathered hidden states (n options,
// then decide, each H wide): logit_i = (Wq·h_decide)·(Wk·h_i)/√dp/T, in
// float32 inputs with float64 sums.
func (e *pointerFamily) logits(h []float32, n, H int) []float32 {
	proj := func(w, x []float32, dst []float64) {
		for d := range e.dp {
			row := w[d*H : (d+1)*H]
			var s float64
			for c, v := range row {
				s += float64(v) * float64(x[c])
			}
			dst[d] = s
		}
	}
	q := make([]float64, e.dp)
	k := make([]float64, e.dp)
	proj(e.wq, h[n*H:(n+1)*H], q)
	z := make([]float32, n)
	for i := range n {
		proj(e.wk, h[i*H:(i+1)*H], k)
		var s float64
		for d, v := range q {
			s += v * k[d]
		}
		z[i] = float32(s * e.factor)
	}
	return z
}
