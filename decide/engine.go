package decide

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
	"github.com/startlux/startlux/tokenizer"
)

// Engine limits and defaults.
const (
	// DefaultCacheLimit is the snapshot store's size when Options.CacheLimit is 0.
	DefaultCacheLimit = 512 << 20
	// MaxPassTokens bounds the padded tokens (rows × longest row) of one pass.
	MaxPassTokens = 16384
	// minPrefixSaving is the number of tokens a shared prefix must save,
	// (rows − 1) × (prefix − base), before it runs once on its own.
	minPrefixSaving = 192
)

// Options configures an [Engine].
type Options struct {
	// CacheLimit bounds the bytes of kept evidence snapshots: 0 means
	// DefaultCacheLimit, < 0 keeps none.
	CacheLimit int64
	// Progress, if set, is called while the checkpoint's tensors are read.
	Progress func(done, total int64)
	// Limits bound each request (zero fields: the defaults).
	Limits Limits
	// PassTokens bounds the padded tokens of one forward pass (0:
	// MaxPassTokens; DecidePrepared may ask for less). Longer rows run their
	// heads in pieces.
	PassTokens int
	// RowForm, for comparisons and tests, makes a pointer/1 engine run each
	// question as one row that recomputes the state (system turn and
	// evidence) from the first token, using and keeping no snapshots. It is
	// slower and gives the same probabilities; jevfmt/1 engines ignore it.
	RowForm bool
	// Int8 runs the model's large projections as int8 products (see
	// model.Int8Options), with SmoothQuant (α = 0.5) on down_proj's input,
	// calibrated on the rows of WarmUpRequests; a backend without int8
	// products refuses the open.
	Int8 bool

	// int8Tune, when set (by tests), adjusts the model's int8 options.
	int8Tune func(*model.Int8Options)
}

// Info describes an open engine.
type Info struct {
	Name           string `json:"name"`            // the checkpoint's name
	Path           string `json:"path"`            // its directory, or the name given to OpenFS
	Format         string `json:"format"`          // the checkpoint family: jevfmt/1 or pointer/1
	Backend        string `json:"backend"`         // the compute backend's name
	MaxPositions   int    `json:"max_positions"`   // the longest row the model takes (0: no limit)
	PreambleTokens int    `json:"preamble_tokens"` // positions every row shares, run once at open
	// Int8 names the backend's int8 kernel when the large projections run
	// as int8 products (Options.Int8), "" when they are float.
	Int8 string `json:"int8,omitempty"`
	// WeightBytes is the bytes of the model's weights as held (int8
	// projections count their int8 bytes and scales).
	WeightBytes int64 `json:"weight_bytes"`
	// Derived is true when the checkpoint has no decision_config.json and
	// runs with the config [DeriveConfig] made: zero-shot, its
	// probabilities not calibrated.
	Derived bool `json:"derived"`
}

// Engine answers decision requests with one checkpoint of either family. It
// is safe for concurrent use; the model runs one pass at a time.
type Engine struct {
	cfg      *Config        // read-only after open; nil for pointer/1
	ptr      *pointerEngine // the pointer/1 readout; nil for jevfmt/1
	tok      Encoder        // read-only after open
	m        *model.Model   // read-only after open
	head     *tensor.Weight // the letter rows of the LM head
	info     Info
	preamble *snapshot // never released
	store    *snapshotStore
	limits   Limits // read-only after open
	// passTokens bounds a pass (Options.PassTokens); read-only after open.
	passTokens int

	// trace, when set (by tests), sees every row run: the request, the
	// question, the row's full ids and its letter logits.
	trace func(r *Request, q *Question, ids []int32, logits []float32)
}

// Open opens the checkpoint in dir on backend be: a jevfmt/1 checkpoint, or
// a pointer/1 one (a base, an optional LoRA adapter and a pointer head; see
// [PointerConfig]). The decision config's format picks the family; both
// answer the same requests with the same responses.
func Open(dir string, be tensor.Backend, opts Options) (*Engine, error) {
	src := ckptSource{
		read: func(name string) ([]byte, error) {
			return readCheckpointFile(filepath.Join(dir, filepath.FromSlash(name)))
		},
		load: func(sub string, lo model.LoadOptions) (*model.Model, error) {
			return model.Load(filepath.Join(dir, filepath.FromSlash(sub)), be, lo)
		},
		adapter: func(sub string) (*model.Adapter, error) {
			return model.LoadAdapter(filepath.Join(dir, filepath.FromSlash(sub)))
		},
	}
	e, err := open(src, Info{Name: filepath.Base(filepath.Clean(dir)), Path: dir}, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return e, nil
}

// OpenFS opens a checkpoint (either family, as [Open]) from a file system
// whose root is the checkpoint directory (the embedded demo model); name is
// shown in errors and in Info.
func OpenFS(fsys fs.FS, name string, be tensor.Backend, opts Options) (*Engine, error) {
	sub := func(dir string) (fs.FS, error) {
		if dir == "." {
			return fsys, nil
		}
		return fs.Sub(fsys, dir)
	}
	src := ckptSource{
		read: func(file string) ([]byte, error) { return fs.ReadFile(fsys, file) },
		load: func(dir string, lo model.LoadOptions) (*model.Model, error) {
			f, err := sub(dir)
			if err != nil {
				return nil, err
			}
			return model.LoadFS(f, path.Join(name, dir), be, lo)
		},
		adapter: func(dir string) (*model.Adapter, error) {
			f, err := sub(dir)
			if err != nil {
				return nil, err
			}
			return model.LoadAdapterFS(f, path.Join(name, dir))
		},
	}
	e, err := open(src, Info{Name: path.Base(name), Path: name}, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	return e, nil
}

// maxReadFile bounds the checkpoint files the engine reads whole (the
// decision config, tokenizer.json, a pointer head): a real tokenizer.json is
// about 11 MB.
const maxReadFile = 256 << 20

// readCheckpointFile reads a checkpoint file whole, refusing one over
// maxReadFile before reading it.
func readCheckpointFile(path string) ([]byte, error) { return model.ReadFileMax(path, maxReadFile) }

// ckptSource reads a checkpoint's files; paths are slash-separated and
// relative to the checkpoint directory ("." for itself).
type ckptSource struct {
	read    func(name string) ([]byte, error)
	load    func(dir string, lo model.LoadOptions) (*model.Model, error)
	adapter func(dir string) (*model.Adapter, error)
}

func open(src ckptSource, info Info, opts Options) (*Engine, error) {
	data, err := src.read(ConfigFile)
	derived := errors.Is(err, fs.ErrNotExist) // zero-shot: the config is derived below
	if err != nil && !derived {
		return nil, err
	}
	if !derived && configFormat(data) == PointerFormat {
		return openPointer(src, data, info, opts)
	}
	var cfg *Config
	if !derived {
		if cfg, err = ParseConfig(data); err != nil {
			return nil, err
		}
	}
	data, err = src.read("tokenizer.json")
	if err != nil && derived {
		return nil, fmt.Errorf("no %s, and no tokenizer.json to derive one from: %w", ConfigFile, err)
	}
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if derived {
		if cfg, err = DeriveConfig(tok, src.read); err != nil {
			return nil, err
		}
		info.Derived = true
	}
	if err := cfg.checkLetters(tok, tok.VocabSize()); err != nil {
		return nil, err
	}
	rows := func() [][]int32 { return cfg.warmUpRows(tok) }
	m, err := src.load(".", model.LoadOptions{Progress: opts.Progress, Int8: opts.int8Options(rows)})
	if err != nil {
		return nil, err
	}
	e, err := newEngine(cfg, tok, m, info, opts)
	if err != nil {
		m.Close()
		return nil, err
	}
	return e, nil
}

func newEngine(cfg *Config, tok Encoder, m *model.Model, info Info, opts Options) (*Engine, error) {
	for i, id := range cfg.LetterTokenIDs {
		if id >= m.Config.Vocab {
			return nil, fmt.Errorf("%s: letter_token_ids[%d] = %d is outside the model's vocabulary (%d)", ConfigFile, i, id, m.Config.Vocab)
		}
	}
	limit := opts.CacheLimit
	if limit == 0 {
		limit = DefaultCacheLimit
	}
	e := &Engine{cfg: cfg, tok: tok, m: m, head: m.HeadRows(cfg.LetterTokenIDs), store: newSnapshotStore(limit)}
	e.setLimits(opts)
	info.Format = cfg.Format
	info.Backend = m.Backend().Name()
	info.Int8, info.WeightBytes = m.Int8(), m.WeightBytes()
	info.MaxPositions = m.Config.MaxPositions
	pre := e.computePreamble()
	e.preamble = &snapshot{refs: 1}
	if len(pre) > 0 {
		st, err := m.Prefill(context.Background(), nil, pre)
		if err != nil {
			return nil, fmt.Errorf("preamble: %w", err)
		}
		e.preamble = &snapshot{ids: pre, state: st, bytes: st.Bytes(), refs: 1}
	}
	info.PreambleTokens = len(pre)
	e.info = info
	return e, nil
}

// setLimits fills the engine's limits and pass bound from opts and the
// model.
func (e *Engine) setLimits(opts Options) {
	e.limits = opts.Limits.withDefaults(e.m.Config.MaxPositions)
	e.passTokens = opts.PassTokens
	if e.passTokens <= 0 {
		e.passTokens = MaxPassTokens
	}
}

// Limits returns the limits the engine holds each request to.
func (e *Engine) Limits() Limits { return e.limits }

// maxEvidenceBytes bounds the rendered evidence a request may have before
// it is tokenised: a token covers at most MaxTokenBytes bytes, of text that
// normalization may have shortened fourfold (0: no bound known).
func (e *Engine) maxEvidenceBytes() int {
	return e.limits.MaxEvidenceTokens * e.tok.MaxTokenBytes() * 4
}

// computePreamble returns the longest token prefix shared by rows about
// evidence of every JSON kind: the system turn and the start of the user
// turn. (Rows are still checked one by one before the preamble is used.)
func (e *Engine) computePreamble() []int32 {
	probes := []string{`{}`, `{"a": 1}`, `[]`, `[1]`, `""`, `"a"`, `" "`, `0`, `-1`, `1.5`, `true`, `false`, `null`}
	var pre []int32
	for i, p := range probes {
		ids := e.tok.Encode(e.cfg.renderRow(p, "?", []string{"a", "b"}))
		if i == 0 {
			pre = ids
			continue
		}
		pre = pre[:commonPrefix(pre, ids)]
	}
	return pre[:len(pre):len(pre)]
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Info describes the engine.
func (e *Engine) Info() Info { return e.info }

// Config returns a jevfmt/1 checkpoint's decision config (nil for pointer/1);
// it must not be modified.
func (e *Engine) Config() *Config { return e.cfg }

// Weights returns every weight the engine's model reads (model.Model.Weights).
func (e *Engine) Weights() []*tensor.Weight { return e.m.Weights() }

// CacheStats returns the bytes held by kept evidence snapshots and the limit
// (negative when the store is disabled).
func (e *Engine) CacheStats() (used, limit int64) { return e.store.stats() }

// ClearCache drops every kept evidence snapshot (those in use by a request
// are freed when it finishes).
func (e *Engine) ClearCache() { e.store.clear() }

// Close frees the engine's snapshots and closes the model. No request may be
// running or start afterwards.
func (e *Engine) Close() error {
	e.store.clear()
	e.preamble.state.Free()
	return e.m.Close()
}

// Decide answers one request.
func (e *Engine) Decide(ctx context.Context, r *Request) (*Response, error) {
	resps, errs := e.DecideBatch(ctx, []*Request{r})
	return resps[0], errs[0]
}

// job is one jevfmt/1 request on its way through DecideBatch.
type job struct {
	jobBase
	evidence string
	qs       []*qjob
}

// candidate is a snapshot a job's rows may start from. pre marks snapshots
// made before the request (they count as cached when used).
type candidate struct {
	sn   *snapshot
	pre  bool
	used bool
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

// jevfmtFamily is DecideBatch's plan and run for jevfmt/1 checkpoints.
func (e *Engine) jevfmtFamily() family[*job] {
	return family[*job]{plan: e.planPrefix, run: e.runStages}
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
func (e *Engine) prepare(r *Request) *job {
	j := &job{jobBase: jobBase{req: r}}
	j.err = e.prepareRows(j)
	return j
}

func (e *Engine) prepareRows(j *job) error {
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
func (e *Engine) rowText(j *job, qj *qjob, g []int, shift int) string {
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
func (e *Engine) wideBound(j *job, qj *qjob, limit int) (int, error) {
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
func (e *Engine) planPrefix(ctx context.Context, r *runner, j *job) error {
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
func (e *Engine) runStages(ctx context.Context, r *runner, jobs []*job) error {
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
func (e *Engine) makeTask(j *job, qj *qjob, g, shift int, ids []int32) task {
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
func (e *Engine) runTasks(ctx context.Context, r *runner, tasks []task) error {
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

// cachedPositions counts the positions of the used snapshots made before
// the request, each position once (the union of their prefixes).
func cachedPositions(cands []*candidate) int {
	var seqs [][]int32
	for _, c := range cands {
		if c.pre && c.used {
			seqs = append(seqs, c.sn.ids)
		}
	}
	sort.Slice(seqs, func(a, b int) bool { return lessIDs(seqs[a], seqs[b]) })
	n := 0
	for i, s := range seqs {
		n += len(s)
		if i > 0 {
			n -= commonPrefix(seqs[i-1], s)
		}
	}
	return n
}

func lessIDs(a, b []int32) bool {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

// IsBadRequest reports whether err is a problem with the request (a
// *RequestError) rather than with the engine.
func IsBadRequest(err error) bool {
	var re *RequestError
	return errors.As(err, &re)
}
