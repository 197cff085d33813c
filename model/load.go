package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

// LoadOptions tunes Load and LoadFS.
type LoadOptions struct {
	Progress func(done, total int64) // optional: bytes of tensors checked so far, for terminals
	// Adapter, if set, is a LoRA adapter merged into the weights it targets
	// while they load: W + (B·A)·alpha/r·LoRAScale (alpha/√r with rsLoRA),
	// computed in float32 and rounded once to W's stored dtype. The caller
	// keeps ownership of the adapter.
	Adapter *Adapter
	// LoRAScale multiplies the adapter's update (below 1 interpolates
	// towards the base); 0 means 1.
	LoRAScale float64
	// Int8, if set, converts the large projections to int8 weights once
	// they are bound (and the adapter merged), so that the backend runs
	// them as int8 products; see Int8Options. A backend without int8
	// products (tensor.Int8Backend absent, or its error) refuses the load.
	// Progress then also counts the projections' bytes as they convert.
	Int8 *Int8Options
}

// Model is a loaded Qwen3.5 dense checkpoint bound to a backend. Its methods
// may be called from several goroutines; forward passes run one at a time.
type Model struct {
	// Config is the parsed text configuration.
	Config Config

	name  string
	be    tensor.Backend
	files []*safetensors.File

	embed, head, finalNorm *tensor.Weight
	layers                 []layer
	normShift              float32 // 1 for zero-centred norms as stored by HF, 0 when pre-shifted (MLX)
	lora                   int     // LoRA pairs merged at load
	int8                   string  // the int8 kernel when the projections are int8, else ""

	mu sync.Mutex // serialises forward passes; guards the fields below
	// layerHook, when set (by tests), sees the residual stream after each
	// layer: rows×Hidden floats.
	layerHook func(layer int, h tensor.Tensor, rows int)
	zeros     []float32 // a zero buffer for clearing recurrent state
}

// Load reads a checkpoint directory (config.json + safetensors, HF or VL-wrapper names) onto backend be.
// The safetensors files are mmap'd and weights stay views over them until Close.
func Load(dir string, be tensor.Backend, opts LoadOptions) (*Model, error) {
	src := dirSource{dir: dir}
	return load(src, dir, be, opts)
}

// LoadFS reads a checkpoint from a file system whose root is the checkpoint directory (the embedded demo model,
// startlux.DemoModel()); tensors are read into memory instead of mmap'd. name is shown in errors and status.
func LoadFS(fsys fs.FS, name string, be tensor.Backend, opts LoadOptions) (*Model, error) {
	return load(fsSource{fsys: fsys, name: name}, name, be, opts)
}

// ReadConfig reads the text configuration of the checkpoint at the root of
// fsys, without its weights; name is shown in errors.
func ReadConfig(fsys fs.FS, name string) (Config, error) {
	src := fsSource{fsys: fsys, name: name}
	data, err := src.readFile("config.json")
	if err != nil {
		return Config{}, fmt.Errorf("read config of %s: %w", name, err)
	}
	c, _, err := parseConfig(src.display("config.json"), data)
	if err != nil {
		return Config{}, fmt.Errorf("read config of %s: %w", name, err)
	}
	return c, nil
}

// source abstracts where checkpoint files come from.
type source interface {
	readFile(name string) ([]byte, error)
	openTensors(name string) (*safetensors.File, error)
	display(name string) string
}

type dirSource struct{ dir string }

func (s dirSource) readFile(name string) ([]byte, error) {
	if strings.HasSuffix(name, ".json") {
		return readJSONFile(filepath.Join(s.dir, name))
	}
	return os.ReadFile(filepath.Join(s.dir, name))
}
func (s dirSource) openTensors(name string) (*safetensors.File, error) {
	return safetensors.Open(filepath.Join(s.dir, name))
}
func (s dirSource) display(name string) string { return filepath.Join(s.dir, name) }

type fsSource struct {
	fsys fs.FS
	name string
}

func (s fsSource) readFile(name string) ([]byte, error) { return fs.ReadFile(s.fsys, name) }
func (s fsSource) openTensors(name string) (*safetensors.File, error) {
	b, err := fs.ReadFile(s.fsys, name)
	if err != nil {
		return nil, err
	}
	return safetensors.Parse(s.display(name), b)
}
func (s fsSource) display(name string) string { return path.Join(s.name, name) }

// stored is a tensor with the file it came from.
type stored struct {
	file string
	info *safetensors.Info
}

func load(src source, name string, be tensor.Backend, opts LoadOptions) (_ *Model, err error) {
	cfgData, err := src.readFile("config.json")
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	cfg, quant, err := parseConfig(src.display("config.json"), cfgData)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	var kernel string
	if opts.Int8 != nil {
		if kernel, err = Int8Kernel(be); err != nil {
			return nil, fmt.Errorf("load %s: %w", name, err)
		}
	}
	m := &Model{Config: cfg, name: name, be: be}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	all, index, err := m.openFiles(src)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	r, err := newResolver(all, quant, src.display(index))
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	if err := checkWeights(src.display("config.json"), &m.Config, r); err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	r.progress = opts.Progress
	if opts.Int8 != nil {
		r.total += r.projectionBytes(&cfg)
	}
	if opts.Adapter != nil {
		scale := opts.LoRAScale
		if scale == 0 {
			scale = 1
		}
		if err := r.attach(opts.Adapter, scale); err != nil {
			return nil, fmt.Errorf("load %s: %w", name, err)
		}
	}
	if err := m.bind(r); err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	if err := r.unusedLoRA(); err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	m.lora = r.merged
	if opts.Int8 != nil {
		if err := m.toInt8(context.Background(), kernel, opts.Int8, r.merged > 0, r.advance); err != nil {
			return nil, fmt.Errorf("load %s: %w", name, err)
		}
	}
	if r.progress != nil {
		r.progress(r.total, r.total)
	}
	return m, nil
}

// openFiles opens model.safetensors, or the shards listed by
// model.safetensors.index.json, and returns every tensor by name and the file
// that lists them (the one a missing tensor is reported against).
func (m *Model) openFiles(src source) (all map[string]stored, index string, err error) {
	var shards []string
	index = "model.safetensors"
	idx, err := src.readFile("model.safetensors.index.json")
	switch {
	case err == nil:
		index = "model.safetensors.index.json"
		var ix struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(idx, &ix); err != nil {
			return nil, "", fmt.Errorf("%s: %w", src.display("model.safetensors.index.json"), err)
		}
		seen := map[string]bool{}
		for _, f := range ix.WeightMap {
			if !seen[f] {
				if strings.Contains(f, "/") || strings.Contains(f, `\`) || f == ".." {
					return nil, "", fmt.Errorf("%s: shard name %q is not a plain file name", src.display("model.safetensors.index.json"), f)
				}
				seen[f] = true
				shards = append(shards, f)
			}
		}
		sort.Strings(shards)
		if len(shards) == 0 {
			return nil, "", fmt.Errorf("%s: weight_map is empty", src.display("model.safetensors.index.json"))
		}
	case errors.Is(err, fs.ErrNotExist):
		shards = []string{"model.safetensors"}
	default:
		return nil, "", err
	}
	all = map[string]stored{}
	for _, s := range shards {
		f, err := src.openTensors(s)
		if err != nil {
			return nil, "", err
		}
		m.files = append(m.files, f)
		if rm, ok := m.be.(tensor.RegionMapper); ok && f.Mapped() {
			// A GPU backend wraps the mapping once so weights are used in
			// place. Only a mapping qualifies: bytes read into the Go heap
			// (LoadFS, the embedded demo model) are neither page-aligned
			// nor guaranteed to stay put as a region; their weights are
			// copied.
			if err := rm.MapRegion(f.Bytes()); err != nil {
				return nil, "", fmt.Errorf("%s: %w", f.Name, err)
			}
		}
		for _, n := range f.Names() {
			if prev, dup := all[n]; dup {
				return nil, "", fmt.Errorf("%s: tensor %s is also in %s", f.Name, n, prev.file)
			}
			all[n] = stored{file: f.Name, info: f.Tensor(n)}
		}
	}
	return all, index, nil
}

// bind resolves every weight the graph uses. A checkpoint without an LM
// head is tied whatever its config says.
func (m *Model) bind(r *resolver) error {
	c := &m.Config
	m.normShift = r.normShift
	if !r.hasHead() {
		c.Tied = true
	}
	m.layers = newLayers(c)
	for _, ref := range m.weights() {
		w, err := r.weight(ref.Name, ref.wanted())
		if err != nil {
			return err
		}
		*ref.w = w
	}
	if c.Tied {
		m.head = m.embed
	}
	return nil
}

// Name returns the name the model was loaded under (its directory, or the
// name given to LoadFS).
func (m *Model) Name() string { return m.name }

// Backend returns the backend the model runs on.
func (m *Model) Backend() tensor.Backend { return m.be }

// Close unmaps the checkpoint's files. The model and every weight taken from
// it must not be used afterwards.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var first error
	for _, f := range m.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	m.files = nil
	return first
}

// Head returns the full LM head [V, H] (the embedding when tied).
func (m *Model) Head() *tensor.Weight { return m.head }

// HeadRows returns just the given rows of the LM head, in that order (for
// the letter readout). Every index must be in [0, Vocab).
func (m *Model) HeadRows(vocab []int) *tensor.Weight {
	for _, v := range vocab {
		if v < 0 || v >= m.head.Rows() {
			panic(fmt.Sprintf("model: HeadRows: token %d outside the vocabulary of %d", v, m.head.Rows()))
		}
	}
	return m.head.SelectRows(m.head.Name+" (rows)", vocab)
}

// Embedding returns the token embedding [V, H].
func (m *Model) Embedding() *tensor.Weight { return m.embed }

// Weights returns every weight the graph reads, in the order of
// Config.Tensors (the LM head of a tied model is the embedding, listed
// once): what a backend's self-check needs to know of the stored forms.
func (m *Model) Weights() []*tensor.Weight {
	refs := m.weights()
	out := make([]*tensor.Weight, len(refs))
	for i, ref := range refs {
		out[i] = *ref.w
	}
	return out
}

// WeightBytes returns the stored bytes of every weight the model uses.
func (m *Model) WeightBytes() int64 {
	var n int64
	for _, ref := range m.weights() {
		n += (*ref.w).Bytes()
	}
	return n
}
