package decide

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"

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
	// MaxPassRows bounds the rows of one pass: each holds a copy of its
	// prefix's recurrent state (NV·DK·DV floats per DeltaNet layer's pass,
	// 1 MiB for Qwen3.5-0.8B), so that what a pass holds is bounded by
	// the model's shapes (model.Config.PassBytes).
	MaxPassRows = 256
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
	// WeightBytes is the bytes of the weights the engine holds: the
	// model's as they are bound (mapped or in memory, quantised or int8:
	// int8 projections count their int8 bytes and scales) and a pointer
	// head's.
	WeightBytes int64 `json:"weight_bytes"`
	// Derived is true when the checkpoint has no decision_config.json and
	// runs with the config [DeriveConfig] made: zero-shot, its
	// probabilities not calibrated.
	Derived bool `json:"derived"`
}

// Engine answers decision requests with one checkpoint of either family. It
// is safe for concurrent use; the model runs one pass at a time.
//
// What every family shares is here: the tokenizer, the model, the preamble
// run once at open, the snapshot store and the limits. What differs (the
// decision config, how rows are built and read out) is the engine's
// [family]: jevfmt.go for jevfmt/1, pointer.go for pointer/1.
type Engine struct {
	fam      family       // read-only after open
	tok      Encoder      // read-only after open
	m        *model.Model // read-only after open
	info     Info
	preamble *snapshot // never released
	store    *snapshotStore
	limits   Limits // read-only after open
	// passTokens bounds a pass (Options.PassTokens); read-only after open.
	passTokens int
}

// Open opens the checkpoint in dir on backend be: a jevfmt/1 checkpoint, or
// a pointer/1 one (a base, an optional LoRA adapter and a pointer head; see
// [PointerConfig]). The decision config's format picks the family; both
// answer the same requests with the same responses.
func Open(dir string, be tensor.Backend, opts Options) (*Engine, error) {
	e, err := open(dirSource(dir, be), Info{Name: filepath.Base(filepath.Clean(dir)), Path: dir}, opts)
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

// dirSource is the source of the checkpoint in dir, its models read onto be.
func dirSource(dir string, be tensor.Backend) ckptSource {
	return ckptSource{
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
}

// ckptSource reads a checkpoint's files; paths are slash-separated and
// relative to the checkpoint directory ("." for itself).
type ckptSource struct {
	read    func(name string) ([]byte, error)
	load    func(dir string, lo model.LoadOptions) (*model.Model, error)
	adapter func(dir string) (*model.Adapter, error)
}

// decisionConfig reads a checkpoint's decision config through read: its
// bytes, or derived true when the checkpoint has none (it then runs
// zero-shot, on the config [DeriveConfig] makes at load). Open, the
// estimate and CheckCheckpoint all read it here.
func decisionConfig(read func(name string) ([]byte, error)) (data []byte, derived bool, err error) {
	data, err = read(ConfigFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true, nil
	}
	return data, false, err
}

// openFamily makes the family of a checkpoint from its decision config: the
// format field picks it (jevfmt/1 when there is none).
func openFamily(data []byte, opts Options) (family, error) {
	if ConfigFormat(data) == PointerFormat {
		return newPointerFamily(data, opts)
	}
	return newJevfmtFamily(data)
}

// open opens a checkpoint of either family: its family from the decision
// config (or, with none, jevfmt/1 run zero-shot on a config derived from
// the tokenizer and chat template: [DeriveConfig]), then what every family
// does: the base model's tokenizer, the model (with what the family loads
// with it), the family's own parts, the limits and the preamble.
func open(src ckptSource, info Info, opts Options) (_ *Engine, err error) {
	data, derived, err := decisionConfig(src.read)
	if err != nil {
		return nil, err
	}
	var fam family
	tokFile := "tokenizer.json"
	if !derived {
		if fam, err = openFamily(data, opts); err != nil {
			return nil, err
		}
		tokFile = path.Join(fam.modelDir(), "tokenizer.json")
	}
	data, err = src.read(tokFile)
	if err != nil && derived {
		return nil, fmt.Errorf("no %s, and no tokenizer.json to derive one from: %w", ConfigFile, err)
	}
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tokFile, err)
	}
	if derived {
		cfg, err := DeriveConfig(tok, src.read)
		if err != nil {
			return nil, err
		}
		fam, info.Derived = &jevfmtFamily{cfg: cfg}, true
	}
	rows := func() [][]int32 { return fam.warmUpRows(tok) }
	lo := model.LoadOptions{Progress: opts.Progress, Int8: opts.int8Options(rows)}
	release, err := fam.beforeLoad(src, tok, &lo)
	if err != nil {
		return nil, err
	}
	m, err := src.load(fam.modelDir(), lo)
	if release != nil {
		release()
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	limit := opts.CacheLimit
	if limit == 0 {
		limit = DefaultCacheLimit
	}
	e := &Engine{fam: fam, tok: tok, m: m, store: newSnapshotStore(limit), preamble: &snapshot{refs: 1}}
	e.setLimits(opts)
	if err := fam.attach(src, e); err != nil {
		return nil, err
	}
	pre := preambleOf(tok, fam.probeRow)
	if len(pre) > 0 {
		st, err := m.Prefill(context.Background(), nil, pre)
		if err != nil {
			return nil, fmt.Errorf("preamble: %w", err)
		}
		e.preamble = &snapshot{ids: pre, state: st, bytes: st.Bytes(), refs: 1}
	}
	info.Format = fam.format()
	info.Backend = m.Backend().Name()
	info.Int8, info.WeightBytes = m.Int8(), m.WeightBytes()
	if h, ok := fam.(headWeights); ok {
		info.WeightBytes += h.headBytes()
	}
	info.MaxPositions = m.Config.MaxPositions
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

// preambleOf returns the longest token prefix shared by the rows (row
// gives the text that starts one) about evidence of every JSON kind: the
// system turn and the start of the user turn. (Rows are still checked one
// by one before the preamble is used.)
func preambleOf(tok Encoder, row func(evidence string) string) []int32 {
	probes := []string{`{}`, `{"a": 1}`, `[]`, `[1]`, `""`, `"a"`, `" "`, `0`, `-1`, `1.5`, `true`, `false`, `null`}
	var pre []int32
	for i, p := range probes {
		ids := tok.Encode(row(p))
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
func (e *Engine) Config() *Config {
	if f, ok := e.fam.(*jevfmtFamily); ok {
		return f.cfg
	}
	return nil
}

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
