// Package modeltest writes synthetic Qwen3.5 checkpoints for tests and
// benchmarks: random weights of any shape, in the Hugging Face layout (bf16)
// or mlx-community's (affine-quantised), and PEFT LoRA adapters for them.
// Every tensor is named, shaped and shifted as package model reads it:
// from model.Config.Tensors, model.Layout and model.LoRAKeys, so a
// checkpoint written here is what the loader expects by construction.
//
// The weights are deterministic (a fixed SplitMix64 stream) and drawn
// uniformly with the standard deviation PyTorch's default initialisation
// gives a layer of that fan-in; they mean nothing, but cost what a real
// checkpoint of the same shapes costs.
package modeltest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

// Qwen35Small returns the configuration of Qwen3.5-0.8B (qwen35.md §1.3)
// with the given number of layers (24 in the real model), every fourth of
// them full attention.
func Qwen35Small(layers int) model.Config {
	return model.Config{
		Hidden: 1024, Layers: layers, Intermediate: 3584, Vocab: 248320,
		Heads: 8, KVHeads: 2, HeadDim: 256, RopeDim: 64, RopeTheta: 1e7, Eps: 1e-6,
		Linear: Hybrid(layers), NK: 16, NV: 16, DK: 128, DV: 128, ConvK: 4,
		Tied: true, MaxPositions: 262144,
	}
}

// Hybrid returns the layer kinds of a Qwen3.5 model of n layers: every
// fourth layer full attention, the others Gated DeltaNet (true).
func Hybrid(n int) []bool {
	lin := make([]bool, n)
	for i := range lin {
		lin[i] = (i+1)%4 != 0
	}
	return lin
}

// Options says how Write stores a checkpoint.
type Options struct {
	// Bits, when not 0, writes the mlx-community layout (language_model.*
	// keys, zero-centred norms stored shifted by one, the conv as [D, K, 1])
	// with every matrix and the embedding affine-quantised to Bits (2, 3, 4,
	// 5, 6 or 8) in groups of Group, scales and biases in bf16. 0 writes the
	// Hugging Face layout in bf16.
	Bits int
}

// Group is the quantisation group Write uses.
const Group = 64

// Write writes config.json and model.safetensors for configuration c into
// dir with random weights: matrices with standard deviation in^−½ (the
// embedding 0.02), conv taps 0.5, zero-centred norms at one, A_log as log
// of a uniform draw in [1, 16), dt_bias 0; A_log and the DeltaNet's output
// norm in F32 as in official files, everything else bf16 or quantised. It
// returns the number of parameters outside the embedding and the LM head:
// those a prefill multiplies every token by.
func Write(dir string, c model.Config, opts Options) (params int64, err error) {
	if len(c.Linear) != c.Layers {
		return 0, fmt.Errorf("modeltest: %d layer kinds for %d layers", len(c.Linear), c.Layers)
	}
	switch opts.Bits {
	case 0, 2, 3, 4, 5, 6, 8:
	default:
		return 0, fmt.Errorf("modeltest: %d bits: want 0, 2, 3, 4, 5, 6 or 8", opts.Bits)
	}
	if err := writeConfig(dir, c, opts.Bits); err != nil {
		return 0, err
	}
	layout, shift := model.LayoutHF, float32(0)
	if opts.Bits != 0 {
		layout, shift = model.LayoutMLX, 1
	}
	g := &gen{seed: 1, bits: opts.Bits}
	for _, s := range c.Tensors() {
		key, shape := layout.Key(s.Name), s.Shape
		if s.Role != model.RoleEmbedding && s.Role != model.RoleHead {
			params += int64(elems(shape))
		}
		switch s.Role {
		case model.RoleEmbedding:
			g.matrix(key, shape, 0.02)
		case model.RoleHead, model.RoleProjection, model.RoleHeadGate:
			g.matrix(key, shape, 1/math.Sqrt(float64(shape[1])))
		case model.RoleNorm:
			g.add(key, tensor.BF16, shape, constant(shift))
		case model.RoleGatedNorm:
			g.add(key, tensor.F32, shape, constant(1))
		case model.RoleConv:
			if opts.Bits != 0 {
				shape = []int{shape[0], shape[2], shape[1]}
			}
			g.add(key, tensor.BF16, shape, g.uniform(0.5))
		case model.RoleDecayBias:
			g.add(key, tensor.BF16, shape, constant(0))
		case model.RoleDecayLog:
			g.add(key, tensor.F32, shape, func() float32 {
				return float32(math.Log(g.unit()*15 + 1))
			})
		default:
			return 0, fmt.Errorf("modeltest: tensor %s has role %d, which Write does not know", s.Name, s.Role)
		}
	}
	return params, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), g.ents, map[string]string{"format": "pt"})
}

// writeConfig writes the config.json of c (quantised to bits unless 0).
func writeConfig(dir string, c model.Config, bits int) error {
	types := make([]string, c.Layers)
	for i, lin := range c.Linear {
		types[i] = "full_attention"
		if lin {
			types[i] = "linear_attention"
		}
	}
	// The float32 eps as the decimal it was written as, not its float64 widening.
	eps, err := strconv.ParseFloat(strconv.FormatFloat(float64(c.Eps), 'g', -1, 32), 64)
	if err != nil {
		return err
	}
	cfg := map[string]any{
		"architectures": []string{"Qwen3_5ForCausalLM"}, "model_type": "qwen3_5_text",
		"hidden_size": c.Hidden, "num_hidden_layers": c.Layers, "intermediate_size": c.Intermediate, "vocab_size": c.Vocab,
		"num_attention_heads": c.Heads, "num_key_value_heads": c.KVHeads, "head_dim": c.HeadDim,
		"linear_num_key_heads": c.NK, "linear_num_value_heads": c.NV, "linear_key_head_dim": c.DK,
		"linear_value_head_dim": c.DV, "linear_conv_kernel_dim": c.ConvK, "rms_norm_eps": eps,
		"hidden_act": "silu", "layer_types": types, "tie_word_embeddings": c.Tied, "max_position_embeddings": c.MaxPositions,
		"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": c.RopeTheta,
			"partial_rotary_factor": float64(c.RopeDim) / float64(c.HeadDim)},
	}
	if bits != 0 {
		cfg["quantization"] = map[string]any{"group_size": Group, "bits": bits, "mode": "affine"}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
}

// gen draws a checkpoint's tensors from one random stream, in the order
// they are written.
type gen struct {
	seed uint64
	bits int
	ents []safetensors.Entry
}

// unit returns a uniform draw in [0, 1).
func (g *gen) unit() float64 { return float64(splitmix(&g.seed)>>11) / (1 << 53) }

// uniform returns a generator of uniform draws with standard deviation std.
func (g *gen) uniform(std float64) func() float32 {
	a := std * math.Sqrt(3)
	return func() float32 { return float32(a * (2*g.unit() - 1)) }
}

func constant(v float32) func() float32 { return func() float32 { return v } }

// add appends a tensor whose elements next draws as the file is written.
func (g *gen) add(name string, d tensor.DType, shape []int, next func() float32) {
	n := elems(shape)
	g.ents = append(g.ents, safetensors.Entry{Name: name, DType: d, Shape: shape, Stream: func(w io.Writer) error {
		bw := &elemWriter{w: w}
		for range n {
			bw.put(d, next())
		}
		return bw.flush()
	}})
}

// matrix appends an [out, in] matrix of uniform draws with standard
// deviation std: bf16, or quantised (packed U32 weight, bf16 scales and
// biases) when g.bits is set.
func (g *gen) matrix(name string, shape []int, std float64) {
	if g.bits == 0 {
		g.add(name, tensor.BF16, shape, g.uniform(std))
		return
	}
	// The packed stream is written first; the scales and biases it
	// produces (1/16 of its size or less) wait in memory for their turn.
	out, in, bits := shape[0], shape[1], g.bits
	base := name[:len(name)-len(".weight")]
	ng := in / Group
	var sc, bi []byte
	next := g.uniform(std)
	g.ents = append(g.ents, safetensors.Entry{Name: name, DType: tensor.U32, Shape: []int{out, in * bits / 32},
		Stream: func(w io.Writer) error {
			row, packed := make([]float32, in), make([]byte, in*bits/8)
			rs, rb := make([]float32, ng), make([]float32, ng)
			sc, bi = make([]byte, 0, 2*out*ng), make([]byte, 0, 2*out*ng)
			for range out {
				for c := range row {
					row[c] = next()
				}
				model.QuantizeRow(packed, rs, rb, row, bits, Group, tensor.BF16)
				if _, err := w.Write(packed); err != nil {
					return err
				}
				for j := range ng {
					sc = binary.LittleEndian.AppendUint16(sc, tensor.F32ToBF16(rs[j]))
					bi = binary.LittleEndian.AppendUint16(bi, tensor.F32ToBF16(rb[j]))
				}
			}
			return nil
		}},
		safetensors.Entry{Name: base + ".scales", DType: tensor.BF16, Shape: []int{out, ng}, Stream: func(w io.Writer) error {
			_, err := w.Write(sc)
			sc = nil
			return err
		}},
		safetensors.Entry{Name: base + ".biases", DType: tensor.BF16, Shape: []int{out, ng}, Stream: func(w io.Writer) error {
			_, err := w.Write(bi)
			bi = nil
			return err
		}})
}

// AdapterOptions describes the LoRA adapter WriteAdapter writes.
type AdapterOptions struct {
	// Rank and Alpha are the adapter's r and lora_alpha.
	Rank  int
	Alpha float64
	// Targets are the adapted modules, relative to a layer ("mlp.up_proj",
	// "self_attn.o_proj"); every layer that has one gets a pair.
	Targets []string
	// StdB is the standard deviation of the lora_B draws (lora_A's is
	// in^−½).
	StdB float64
	// Seed starts the random stream.
	Seed uint64
}

// WriteAdapter writes a PEFT LoRA adapter with random weights
// (adapter_config.json, adapter_model.safetensors) into dir, for a
// Hugging Face checkpoint of configuration c.
func WriteAdapter(dir string, c model.Config, opts AdapterOptions) error {
	g := &gen{seed: opts.Seed}
	draw := func(n int, std float64) []float32 {
		v := make([]float32, n)
		next := g.uniform(std)
		for i := range v {
			v[i] = next()
		}
		return v
	}
	specs := c.Tensors()
	var ents []safetensors.Entry
	var modules []string
	for i := range c.Layers {
		for _, t := range opts.Targets {
			name := fmt.Sprintf("layers.%d.%s.weight", i, t)
			for _, s := range specs {
				if s.Name != name {
					continue
				}
				out, in, r := s.Shape[0], s.Shape[1], opts.Rank
				a, b := model.LoRAKeys(model.LayoutHF.Key(name))
				ents = append(ents,
					safetensors.F32(a, []int{r, in}, draw(r*in, 1/math.Sqrt(float64(in)))),
					safetensors.F32(b, []int{out, r}, draw(out*r, opts.StdB)))
			}
		}
	}
	if len(ents) == 0 {
		return fmt.Errorf("modeltest: adapter targets %v match no tensor", opts.Targets)
	}
	for _, t := range opts.Targets {
		modules = append(modules, t[strings.LastIndexByte(t, '.')+1:]) // PEFT matches the last part of a module's path
	}
	if err := safetensors.WriteFile(filepath.Join(dir, model.AdapterWeightsFile), ents, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	b, err := json.MarshalIndent(map[string]any{"peft_type": "LORA", "r": opts.Rank, "lora_alpha": opts.Alpha,
		"target_modules": modules, "bias": "none"}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, model.AdapterConfigFile), b, 0o644)
}

func elems(shape []int) int {
	n := 1
	for _, x := range shape {
		n *= x
	}
	return n
}

// elemWriter buffers element-wise writes of generated tensors.
type elemWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func (b *elemWriter) put(d tensor.DType, v float32) {
	if d == tensor.F32 {
		b.buf = binary.LittleEndian.AppendUint32(b.buf, math.Float32bits(v))
	} else {
		b.buf = binary.LittleEndian.AppendUint16(b.buf, tensor.F32ToBF16(v))
	}
	if len(b.buf) >= 1<<16 {
		b.flush()
	}
}

func (b *elemWriter) flush() error {
	if b.err == nil && len(b.buf) > 0 {
		_, b.err = b.w.Write(b.buf)
	}
	b.buf = b.buf[:0]
	return b.err
}

// splitmix advances a SplitMix64 generator.
func splitmix(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
