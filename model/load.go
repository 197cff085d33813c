package model

import (
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

	mu sync.Mutex // serialises forward passes; guards the fields below
	// layerHook, when set (by tests), sees the residual stream after each
	// layer: rows×Hidden floats.
	layerHook func(layer int, h tensor.Tensor, rows int)
	zeros     []float32 // a zero buffer for clearing recurrent state
}

// layer holds one decoder layer's weights. Full-attention layers use q..kNorm,
// DeltaNet layers qkv..out.
type layer struct {
	linear             bool
	inNorm, postNorm   *tensor.Weight
	gate, up, down     *tensor.Weight
	q, k, v, o         *tensor.Weight
	qNorm, kNorm       *tensor.Weight
	qkv, z, b, a, conv *tensor.Weight
	dtBias, aLog, norm *tensor.Weight
	out                *tensor.Weight
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
		if rm, ok := m.be.(tensor.RegionMapper); ok {
			// A GPU backend wraps the mapping once so weights are used in place.
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

// bind resolves every weight the graph uses.
func (m *Model) bind(r *resolver) error {
	c := &m.Config
	H, I := c.Hidden, c.Intermediate
	var err error
	get := func(name string, shape ...int) *tensor.Weight {
		if err != nil {
			return nil
		}
		var w *tensor.Weight
		w, err = r.weight(name, shape)
		return w
	}
	m.normShift = r.normShift
	m.embed = get("embed_tokens.weight", c.Vocab, H)
	m.finalNorm = get("norm.weight", H)
	if err != nil {
		return err
	}
	if !r.hasHead() {
		c.Tied = true
	}
	if c.Tied {
		m.head = m.embed
	} else {
		m.head = get(lmHead, c.Vocab, H)
	}
	m.layers = make([]layer, c.Layers)
	dkey, dval := c.NK*c.DK, c.NV*c.DV
	dconv := 2*dkey + dval
	for i := range m.layers {
		l := &m.layers[i]
		p := fmt.Sprintf("layers.%d.", i)
		l.linear = c.Linear[i]
		l.inNorm = get(p+"input_layernorm.weight", H)
		l.postNorm = get(p+"post_attention_layernorm.weight", H)
		l.gate = get(p+"mlp.gate_proj.weight", I, H)
		l.up = get(p+"mlp.up_proj.weight", I, H)
		l.down = get(p+"mlp.down_proj.weight", H, I)
		if l.linear {
			a := p + "linear_attn."
			l.qkv = get(a+"in_proj_qkv.weight", dconv, H)
			l.z = get(a+"in_proj_z.weight", dval, H)
			l.b = get(a+"in_proj_b.weight", c.NV, H)
			l.a = get(a+"in_proj_a.weight", c.NV, H)
			l.conv = get(a+"conv1d.weight", dconv, convTaps, c.ConvK)
			l.dtBias = get(a+"dt_bias", c.NV)
			l.aLog = get(a+"A_log", c.NV)
			l.norm = get(a+"norm.weight", c.DV)
			l.out = get(a+"out_proj.weight", H, dval)
		} else {
			a := p + "self_attn."
			l.q = get(a+"q_proj.weight", 2*c.Heads*c.HeadDim, H)
			l.k = get(a+"k_proj.weight", c.KVHeads*c.HeadDim, H)
			l.v = get(a+"v_proj.weight", c.KVHeads*c.HeadDim, H)
			l.o = get(a+"o_proj.weight", H, c.Heads*c.HeadDim)
			l.qNorm = get(a+"q_norm.weight", c.HeadDim)
			l.kNorm = get(a+"k_norm.weight", c.HeadDim)
		}
	}
	return err
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

// WeightBytes returns the stored bytes of every weight the model uses.
func (m *Model) WeightBytes() int64 {
	var n int64
	add := func(w *tensor.Weight) {
		if w == nil {
			return
		}
		n += int64(len(w.Data))
		if w.Quant != nil {
			n += int64(len(w.Quant.Scales.Data) + len(w.Quant.Biases.Data))
		}
	}
	add(m.embed)
	if m.head != m.embed {
		add(m.head)
	}
	add(m.finalNorm)
	for i := range m.layers {
		l := &m.layers[i]
		for _, w := range []*tensor.Weight{l.inNorm, l.postNorm, l.gate, l.up, l.down, l.q, l.k, l.v, l.o, l.qNorm, l.kNorm,
			l.qkv, l.z, l.b, l.a, l.conv, l.dtBias, l.aLog, l.norm, l.out} {
			add(w)
		}
	}
	return n
}
