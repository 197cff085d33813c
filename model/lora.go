package model

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

// Files of a PEFT LoRA adapter directory.
const (
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
)

// peftPrefix starts the name of every tensor of a PEFT adapter, before the
// stored key of the tensor it adapts.
const peftPrefix = "base_model.model."

// LoRAKeys returns the names PEFT gives the lora_A and lora_B tensors of an
// adapter on the checkpoint tensor stored under key
// ("model.layers.3.mlp.up_proj.weight").
func LoRAKeys(key string) (a, b string) {
	stem := peftPrefix + strings.TrimSuffix(key, ".weight")
	return stem + ".lora_A.weight", stem + ".lora_B.weight"
}

// Adapter is a PEFT LoRA adapter (adapter_config.json and
// adapter_model.safetensors) ready to be merged into a base checkpoint by
// [Load] or [LoadFS] (see [LoadOptions.Adapter]). Only plain LoRA on linear
// layers is read; anything that a weight merge cannot express is refused
// when the adapter is read.
type Adapter struct {
	// Name is how errors refer to the adapter (its directory).
	Name string
	// Rank is the adapter's r, Alpha its lora_alpha.
	Rank  int
	Alpha float64
	// RSLoRA is true for rank-stabilised LoRA: the factor is alpha/√r
	// instead of alpha/r.
	RSLoRA bool

	file  *safetensors.File
	pairs []loraPair // sorted by stem
}

// loraPair is one lora_A/lora_B pair and the checkpoint tensor it adapts,
// named as PEFT names it with "base_model.model." removed.
type loraPair struct {
	stem   string // the adapter's name without .lora_A.weight
	target string
	a, b   *safetensors.Info
}

// LoadAdapter reads the PEFT LoRA adapter in dir. The weights file is
// mmap'd until Close.
func LoadAdapter(dir string) (*Adapter, error) {
	return readAdapter(dirSource{dir: dir}, dir)
}

// LoadAdapterFS reads a PEFT LoRA adapter from a file system whose root is
// the adapter directory; name is shown in errors.
func LoadAdapterFS(fsys fs.FS, name string) (*Adapter, error) {
	return readAdapter(fsSource{fsys: fsys, name: name}, name)
}

// Factor returns the multiplier of B·A for a merge at scale: alpha/r (or
// alpha/√r with rsLoRA) times scale.
func (a *Adapter) Factor(scale float64) float64 {
	r := float64(a.Rank)
	if a.RSLoRA {
		r = math.Sqrt(r)
	}
	return a.Alpha / r * scale
}

// Pairs returns the number of lora_A/lora_B pairs, one per adapted weight.
func (a *Adapter) Pairs() int { return len(a.pairs) }

// Close releases the adapter's weights file. Models merged from it keep
// their own copies and stay usable.
func (a *Adapter) Close() error {
	if a == nil || a.file == nil {
		return nil
	}
	f := a.file
	a.file, a.pairs = nil, nil
	return f.Close()
}

func readAdapter(src source, name string) (_ *Adapter, err error) {
	data, err := src.readFile(AdapterConfigFile)
	if err != nil {
		return nil, fmt.Errorf("adapter %s: %w", name, err)
	}
	a := &Adapter{Name: name}
	if err := a.parseConfig(src.display(AdapterConfigFile), data); err != nil {
		return nil, fmt.Errorf("adapter %s: %w", name, err)
	}
	f, err := src.openTensors(AdapterWeightsFile)
	if err != nil {
		if _, e := src.readFile("adapter_model.bin"); e == nil {
			return nil, fmt.Errorf("adapter %s: %w (adapter_model.bin, a pickle, is not read: save the adapter with safetensors)", name, err)
		}
		return nil, fmt.Errorf("adapter %s: %w", name, err)
	}
	a.file = f
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	if err := a.pairUp(); err != nil {
		return nil, fmt.Errorf("adapter %s: %w", name, err)
	}
	return a, nil
}

// parseConfig reads adapter_config.json and refuses, by name, every setting
// that a merge of B·A into the base weights would not reproduce.
func (a *Adapter) parseConfig(file string, data []byte) error {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	o := jsonObj{file: file, m: m}
	if t, err := o.str("peft_type"); err != nil {
		return err
	} else if t != "" && t != "LORA" {
		return o.errf("peft_type", "is %q: only LORA adapters can be merged", t)
	}
	var err error
	if a.Rank, err = o.int("r", -1); err != nil {
		return err
	}
	alpha, ok, err := o.num("lora_alpha")
	if err != nil {
		return err
	}
	if !ok {
		return o.errf("lora_alpha", "missing")
	}
	if !(alpha > 0) || math.IsInf(alpha, 0) {
		return o.errf("lora_alpha", "is %v, want a positive number", alpha)
	}
	a.Alpha = alpha
	if a.RSLoRA, err = o.boolean("use_rslora"); err != nil {
		return err
	}
	for _, k := range []struct{ key, why string }{
		{"use_dora", "DoRA (a learned magnitude per column) is not a plain weight merge"},
		{"lora_bias", "a LoRA bias on the B matrices is not supported"},
		{"fan_in_fan_out", "transposed (Conv1D) base weights are not supported"},
		{"use_qalora", "QA-LoRA is not supported"},
	} {
		on, err := o.boolean(k.key)
		if err != nil {
			return err
		}
		if on {
			return o.errf(k.key, "is true: %s", k.why)
		}
	}
	if o.has("trainable_token_indices") {
		return o.errf("trainable_token_indices", "is set: trained token embeddings are not supported")
	}
	for _, k := range []string{"rank_pattern", "alpha_pattern"} {
		if v, ok := m[k]; ok && v != nil {
			p, isObj := v.(map[string]any)
			if !isObj {
				return o.errf(k, "is %v, want an object", v)
			}
			if len(p) > 0 {
				return o.errf(k, "is not empty: per-module ranks and alphas are not supported")
			}
		}
	}
	if v, ok := m["modules_to_save"]; ok && v != nil {
		if l, isList := v.([]any); !isList || len(l) > 0 {
			return o.errf("modules_to_save", "is %v: fully trained modules are not supported", v)
		}
	}
	if b, err := o.str("bias"); err != nil {
		return err
	} else if b != "" && b != "none" {
		return o.errf("bias", "is %q: trained biases are not supported (want \"none\")", b)
	}
	if o.has("layer_replication") {
		return o.errf("layer_replication", "is set: replicated layers are not supported")
	}
	return nil
}

// pairUp matches every lora_A with its lora_B and checks their shapes.
func (a *Adapter) pairUp() error {
	names := a.file.Names()
	bs := map[string]*safetensors.Info{}
	for _, n := range names {
		if stem, ok := strings.CutSuffix(n, ".lora_B.weight"); ok {
			bs[stem] = a.file.Tensor(n)
		}
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".lora_B.weight") {
			continue
		}
		stem, ok := strings.CutSuffix(n, ".lora_A.weight")
		if !ok {
			return fmt.Errorf("%s: tensor %s is not a lora_A or lora_B weight (only plain LoRA on linear layers can be merged)", a.file.Name, n)
		}
		ta, tb := a.file.Tensor(n), bs[stem]
		if tb == nil {
			return fmt.Errorf("%s: tensor %s has no %s.lora_B.weight", a.file.Name, n, stem)
		}
		delete(bs, stem)
		for _, t := range []*safetensors.Info{ta, tb} {
			if !t.DType.IsFloat() || len(t.Shape) != 2 {
				return fmt.Errorf("%s: tensor %s is %s %v, want a float matrix", a.file.Name, t.Name, t.DType, t.Shape)
			}
		}
		if ta.Shape[0] != a.Rank || tb.Shape[1] != a.Rank {
			return fmt.Errorf("%s: %s is %v and its lora_B %v, want rank r = %d", a.file.Name, n, ta.Shape, tb.Shape, a.Rank)
		}
		target := strings.Replace(stem, peftPrefix, "", 1) + ".weight"
		a.pairs = append(a.pairs, loraPair{stem: stem, target: target, a: ta, b: tb})
	}
	for stem := range bs {
		return fmt.Errorf("%s: tensor %s.lora_B.weight has no lora_A", a.file.Name, stem)
	}
	if len(a.pairs) == 0 {
		return fmt.Errorf("%s: no lora_A/lora_B pairs", a.file.Name)
	}
	sort.Slice(a.pairs, func(i, j int) bool { return a.pairs[i].stem < a.pairs[j].stem })
	return nil
}

// pendingLoRA is a pair waiting for its target to be bound.
type pendingLoRA struct {
	pair *loraPair
	used bool
}

// attach maps every pair of ad onto the base's stored tensor names, so that
// weight merges them as it binds. It refuses an adapter on a quantised base
// and a pair whose target the base lacks.
func (r *resolver) attach(ad *Adapter, scale float64) error {
	if ad.file == nil {
		return fmt.Errorf("adapter %s is closed", ad.Name)
	}
	if !(scale > 0) || math.IsInf(scale, 0) {
		return fmt.Errorf("adapter %s: LoRA scale %v, want a positive number", ad.Name, scale)
	}
	quantised := r.quant != nil
	for k := range r.all {
		quantised = quantised || strings.HasSuffix(k, ".scales")
	}
	if quantised {
		return fmt.Errorf("adapter %s on a quantised base: a LoRA adapter can only be merged into unquantised (F32, BF16 or F16) weights; merge it first, then quantise", ad.Name)
	}
	r.lora = map[string]*pendingLoRA{}
	r.loraFactor = float32(ad.Factor(scale))
	for i := range ad.pairs {
		p := &ad.pairs[i]
		key, ok := r.mapTarget(p.target)
		if !ok {
			return fmt.Errorf("adapter %s: tensor %s.lora_A.weight has no target: the base has no %s", ad.Name, p.stem, p.target)
		}
		if prev, dup := r.lora[key]; dup {
			return fmt.Errorf("adapter %s: tensors %s and %s both adapt %s", ad.Name, prev.pair.stem, p.stem, key)
		}
		r.lora[key] = &pendingLoRA{pair: p}
	}
	return nil
}

// mapTarget returns the stored name in this checkpoint of target, a tensor
// name in any of the known layouts.
func (r *resolver) mapTarget(target string) (string, bool) {
	if _, ok := r.all[target]; ok {
		return target, true
	}
	for _, l := range layouts { // longest prefixes first
		var key string
		switch {
		case target == l.head:
			key = r.lay.head
		case strings.HasPrefix(target, l.prefix):
			key = r.lay.prefix + target[len(l.prefix):]
		default:
			continue
		}
		if _, ok := r.all[key]; ok {
			return key, true
		}
	}
	return "", false
}

// unusedLoRA reports a pair whose target exists but is not a weight the
// text model uses (a vision or multi-token-prediction tensor, say).
func (r *resolver) unusedLoRA() error {
	var left []string
	for key, p := range r.lora {
		if !p.used {
			left = append(left, fmt.Sprintf("%s.lora_A.weight (target %s)", p.pair.stem, key))
		}
	}
	if len(left) == 0 {
		return nil
	}
	sort.Strings(left)
	return fmt.Errorf("adapter tensor %s has no target among the weights the text model uses", strings.Join(left, ", "))
}

// merge returns W + (B·A)·factor computed in float32 and rounded once to W's
// stored dtype, as a new in-memory weight.
func (r *resolver) merge(p *pendingLoRA, w *tensor.Weight) (*tensor.Weight, error) {
	if len(w.Shape) != 2 {
		return nil, fmt.Errorf("adapter tensor %s.lora_A.weight: target %s has shape %v, not a matrix", p.pair.stem, w.Name, w.Shape)
	}
	out, in := w.Shape[0], w.Shape[1]
	pa, pb := p.pair.a, p.pair.b
	if pa.Shape[1] != in || pb.Shape[0] != out {
		return nil, fmt.Errorf("adapter tensors %s.lora_{A,B}.weight are %v and %v, which do not fit %s %v", p.pair.stem, pa.Shape, pb.Shape, w.Name, w.Shape)
	}
	av, bv := pa.Weight().Float32s(), pb.Weight().Float32s()
	v := w.Float32s()
	mergeRows(v, av, bv, out, in, pa.Shape[0], r.loraFactor)
	p.used = true
	r.merged++
	return tensor.FromFloat32(w.Name, w.DType, w.Shape, v), nil
}

// mergeRows adds (B·A)·f to the rows of v ([out, in]) for A [rank, in] and
// B [out, rank]. Each element of B·A is accumulated over k in order with
// fused multiply-adds in float32, as an sgemm does (the references were made
// that way; which way matters, because the merged weight is rounded to bf16
// afterwards and this tiny random model amplifies single-ulp flips). A
// float32 product is exact in float64, so the float64 sum rounded to float32
// is the fused result. Large matrices are split over the CPUs.
func mergeRows(v, av, bv []float32, out, in, rank int, f float32) {
	work := func(lo, hi int) {
		row := make([]float32, in)
		for o := lo; o < hi; o++ {
			clear(row)
			for k := range rank {
				bk := float64(bv[o*rank+k])
				ak := av[k*in : (k+1)*in]
				for i, x := range ak {
					row[i] = float32(bk*float64(x) + float64(row[i]))
				}
			}
			dst := v[o*in : (o+1)*in]
			for i, d := range row {
				dst[i] += float32(d * f) // rounded before the add, as two kernels would
			}
		}
	}
	workers := min(runtime.NumCPU(), out, max(1, out*in*rank/(1<<20)))
	if workers <= 1 {
		work(0, out)
		return
	}
	var wg sync.WaitGroup
	step := (out + workers - 1) / workers
	for lo := 0; lo < out; lo += step {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			work(lo, hi)
		}(lo, min(lo+step, out))
	}
	wg.Wait()
}

// MergedLoRA returns the number of LoRA pairs merged into the weights at
// load (0 without an adapter).
func (m *Model) MergedLoRA() int { return m.lora }
