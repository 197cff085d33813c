package decide

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"

	"github.com/startlux/startlux/model"
)

// Footprint is what an engine holds while it serves, told before it is
// opened: what a caller checks against the machine's memory before a load.
type Footprint struct {
	// Weights is the bytes of the weights as they will be resident: the
	// checkpoint's tensors the graph reads as stored (mapped, or read into
	// memory for an embedded checkpoint), the projections converted when
	// int8, a LoRA adapter's merged copies, a pointer head.
	Weights int64 `json:"weights"`
	// Pass is the most the largest forward pass or prefill at the limits
	// holds: its activations and scratch, each row's recurrent state, and
	// the prefix state it runs after (or the one it extends).
	Pass int64 `json:"pass"`
	// Cache is the prefix cache's limit.
	Cache int64 `json:"cache"`
}

// Total returns the bytes of the footprint in all.
func (f Footprint) Total() int64 { return f.Weights + f.Pass + f.Cache }

// Estimate tells what the checkpoint in dir will hold once opened with opts
// (int8: with its projections converted to int8), reading only its
// configuration files and tensor headers.
func Estimate(dir string, opts Options, int8 bool) (Footprint, error) {
	src := estimateSource{
		read: func(name string) ([]byte, error) {
			return readCheckpointFile(filepath.Join(dir, filepath.FromSlash(name)))
		},
		weights: func(sub string) (model.WeightInfo, error) {
			return model.ReadWeightInfo(filepath.Join(dir, filepath.FromSlash(sub)))
		},
	}
	f, err := estimate(src, opts, int8)
	if err != nil {
		return Footprint{}, fmt.Errorf("estimate %s: %w", dir, err)
	}
	return f, nil
}

// EstimateFS is Estimate for a checkpoint at the root of fsys (the
// embedded demo model); name is shown in errors.
func EstimateFS(fsys fs.FS, name string, opts Options, int8 bool) (Footprint, error) {
	src := estimateSource{
		read: func(file string) ([]byte, error) { return fs.ReadFile(fsys, file) },
		weights: func(sub string) (model.WeightInfo, error) {
			f := fsys
			if sub != "." {
				var err error
				if f, err = fs.Sub(fsys, sub); err != nil {
					return model.WeightInfo{}, err
				}
			}
			return model.ReadWeightInfoFS(f, path.Join(name, sub))
		},
	}
	f, err := estimate(src, opts, int8)
	if err != nil {
		return Footprint{}, fmt.Errorf("estimate %s: %w", name, err)
	}
	return f, nil
}

// estimateSource reads what an estimate needs of a checkpoint.
type estimateSource struct {
	read    func(name string) ([]byte, error)
	weights func(dir string) (model.WeightInfo, error)
}

func estimate(src estimateSource, opts Options, int8 bool) (Footprint, error) {
	data, derived, err := decisionConfig(src.read)
	if err != nil {
		return Footprint{}, err
	}
	var f Footprint
	var w model.WeightInfo
	headRows, pointer := 0, false
	switch {
	case derived:
		if w, err = src.weights("."); err != nil {
			return Footprint{}, err
		}
		f.Weights = w.Resident(int8)
		headRows = len(DefaultLetters) // the derived config's letters
	case ConfigFormat(data) == PointerFormat:
		cfg, err := ParsePointerConfig(data)
		if err != nil {
			return Footprint{}, err
		}
		if w, err = src.weights(cfg.Base); err != nil {
			return Footprint{}, err
		}
		f.Weights = w.Resident(int8) + 4*2*int64(cfg.Head.DP)*int64(w.Config.Hidden) // the head's q and k, float32
		if cfg.Adapter != "" {
			// The merged weights are copies; the mapped originals are read
			// once. Every projection may be a target.
			f.Weights += w.Projections
		}
		pointer = true
	default:
		cfg, err := ParseConfig(data)
		if err != nil {
			return Footprint{}, err
		}
		if w, err = src.weights("."); err != nil {
			return Footprint{}, err
		}
		f.Weights = w.Resident(int8)
		headRows = len(cfg.LetterTokenIDs)
	}
	f.Pass = largestPass(&w.Config, opts, headRows, pointer)
	switch {
	case opts.CacheLimit == 0:
		f.Cache = DefaultCacheLimit
	case opts.CacheLimit > 0:
		f.Cache = opts.CacheLimit
	}
	return f, nil
}

// largestPass is the most a pass holds at the limits opts sets for a model
// of configuration c: a forward pass of the engine's largest size
// (Options.PassTokens, MaxPassRows rows) whose rows run after a prefix
// state of the longest evidence, or the last piece of the prefill that makes
// that state (with the state it extends). Together the gathered rows of a
// pass attend over at most max_request_tokens positions (they are rows of
// one request, or of a batch of small ones).
func largestPass(c *model.Config, opts Options, headRows int, pointer bool) int64 {
	lim := opts.Limits.withDefaults(c.MaxPositions)
	tokens := opts.PassTokens
	if tokens <= 0 {
		tokens = MaxPassTokens
	}
	longest := min(lim.MaxEvidenceTokens, lim.MaxRequestTokens)
	if longest <= 0 {
		longest = lim.MaxRequestTokens
	}
	rows := min(MaxPassRows, tokens)
	s := model.PassShape{Tokens: tokens, Rows: rows, HeadRows: headRows,
		Context: int(min(int64(lim.MaxRequestTokens), int64(rows)*int64(longest)))}
	if pointer {
		s.Gathered = tokens // a pointer row reads every option's position
	}
	forward := c.StateBytes(longest) + c.PassBytes(s)
	piece := min(tokens, longest)
	prefill := c.StateBytes(longest-piece) + c.PrefillBytes(longest-piece, piece)
	return max(forward, prefill)
}
