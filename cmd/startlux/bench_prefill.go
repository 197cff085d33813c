package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

// sgemmMeter is what a backend offers to measure its plain float32 GEMM (the
// CPU backend's MeasureSgemm).
type sgemmMeter interface {
	MeasureSgemm(ctx context.Context, m, n, k int, minDur time.Duration) (float64, error)
}

// benchPrefill runs "startlux bench prefill": a prefill over a checkpoint
// with the real Qwen3.5-0.8B shapes and random bf16 weights, against the
// backend's own sgemm rate measured in the same run. With --quant B it then
// runs the same shapes MLX-quantised to B bits and compares.
func benchPrefill(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("bench prefill", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	tokens := fs.Int("tokens", 512, "prompt length")
	quant := fs.Int("quant", 0, "also run the shapes MLX affine-quantised to this many bits (2, 3, 4, 5, 6 or 8; group 64); 0: bf16 only")
	runs := fs.Int("runs", 3, "timed prefills after one warm-up (the median is reported)")
	keep := fs.String("dir", "", "write the checkpoints under this directory and keep them (default: a temporary directory, removed)")
	backend := backendFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tokens < 1 || *runs < 1 || fs.NArg() != 0 {
		return fmt.Errorf("bench prefill: --tokens and --runs must be positive, no other arguments")
	}
	switch *quant {
	case 0, 2, 3, 4, 5, 6, 8:
	default:
		return fmt.Errorf("bench prefill: --quant %d: want 0, 2, 3, 4, 5, 6 or 8", *quant)
	}
	be, err := openBackend(*backend)
	if err != nil {
		return fmt.Errorf("bench prefill: %w", err)
	}
	root := *keep
	if root == "" {
		if root, err = os.MkdirTemp("", "startlux-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(root)
	}
	fmt.Fprintf(env.stdout, "backend %s, GOMAXPROCS %d, %s/%s\n", be.Name(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)

	b := &prefillBench{be: be, tokens: *tokens, runs: *runs, env: env}
	base, err := b.run(ctx, filepath.Join(root, "bf16"), 0)
	if err != nil {
		return fmt.Errorf("bench prefill: %w", err)
	}
	var q *prefillResult
	if *quant != 0 {
		if q, err = b.run(ctx, filepath.Join(root, fmt.Sprintf("q%d", *quant)), *quant); err != nil {
			return fmt.Errorf("bench prefill: %d-bit: %w", *quant, err)
		}
	}
	line := fmt.Sprintf("prefill %d tokens: %.1f tok/s, %.1f GFLOP/s", *tokens, base.tps, base.gflops)
	if base.sgemm > 0 {
		line += fmt.Sprintf(" = %.0f%% of BLAS sgemm (%.1f GFLOP/s)", 100*base.gflops/base.sgemm, base.sgemm)
	}
	if q != nil {
		fmt.Fprintf(env.stdout, "prefill %d tokens, %d-bit: %.1f tok/s = %.2f × bf16, weights %.2f GB = %.0f%% of bf16's %.2f GB\n",
			*tokens, *quant, q.tps, q.tps/base.tps, float64(q.weightBytes)/1e9, 100*float64(q.weightBytes)/float64(base.weightBytes), float64(base.weightBytes)/1e9)
	}
	fmt.Fprintln(env.stdout, line)
	return nil
}

// prefillBench holds what every run of the prefill benchmark shares.
type prefillBench struct {
	be           tensor.Backend
	tokens, runs int
	env          *cmdEnv
}

// prefillResult is one checkpoint's measurement.
type prefillResult struct {
	tps, gflops float64
	sgemm       float64 // the backend's sgemm GFLOP/s, measured between the timed prefills; 0 if it has none
	weightBytes int64
}

// run writes a checkpoint (bits 0: bf16, else MLX-quantised) into dir,
// loads it and times prefills.
func (b *prefillBench) run(ctx context.Context, dir string, bits int) (*prefillResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	kind := "bf16"
	if bits != 0 {
		kind = fmt.Sprintf("%d-bit", bits)
	}
	t0 := time.Now()
	params, err := writeBenchCheckpoint(dir, qwen35Small(), bits)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.env.stderr, "wrote a Qwen3.5-0.8B-shaped %s checkpoint (%.2f GB, %.1fM non-embedding parameters) in %.1fs\n",
		kind, float64(st.Size())/1e9, float64(params)/1e6, time.Since(t0).Seconds())
	debug.FreeOSMemory() // what an earlier run left on the heap must not count against this one
	resetPeakRSS()
	m, err := model.Load(dir, b.be, model.LoadOptions{})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	loaded := currentRSS()
	ids := make([]int32, b.tokens)
	rng := uint64(0x9e3779b97f4a7c15)
	for i := range ids {
		ids[i] = int32(splitmix(&rng) % 240000)
	}
	prefill := func() (time.Duration, error) {
		start := time.Now()
		s, err := m.Prefill(ctx, nil, ids)
		if err != nil {
			return 0, err
		}
		d := time.Since(start)
		s.Free()
		return d, nil
	}
	if _, err := prefill(); err != nil { // warm-up: pages of the mapping, scratch buffers
		return nil, err
	}
	// The sgemm yardstick is measured right after each timed prefill, so
	// that both see the same machine (its load may change during a run).
	var times []time.Duration
	var sgemms []float64
	sm, hasSgemm := b.be.(sgemmMeter)
	for range b.runs {
		d, err := prefill()
		if err != nil {
			return nil, err
		}
		times = append(times, d)
		msg := fmt.Sprintf("%s prefill %d tokens: %.2fs", kind, b.tokens, d.Seconds())
		if hasSgemm && bits == 0 {
			sg, err := sm.MeasureSgemm(ctx, b.tokens, 1024, 3584, time.Second)
			if err != nil {
				return nil, fmt.Errorf("sgemm: %w", err)
			}
			sgemms = append(sgemms, sg)
			msg += fmt.Sprintf(", then sgemm %d×1024×3584 %.1f GFLOP/s", b.tokens, sg)
		}
		fmt.Fprintln(b.env.stderr, msg)
	}
	slices.Sort(times)
	med := times[len(times)/2].Seconds()
	r := &prefillResult{tps: float64(b.tokens) / med, gflops: 2 * float64(params) * float64(b.tokens) / med / 1e9, weightBytes: m.WeightBytes()}
	if len(sgemms) > 0 {
		slices.Sort(sgemms)
		r.sgemm = sgemms[len(sgemms)/2]
	}
	rss := peakRSS()
	fmt.Fprintf(b.env.stdout, "%s: resident after load %.2f GB, peak %.2f GB = %.2f × the checkpoint's %.2f GB\n",
		kind, float64(loaded)/1e9, float64(rss)/1e9, float64(rss)/float64(st.Size()), float64(st.Size())/1e9)
	return r, nil
}

// resetPeakRSS resets the kernel's peak-RSS mark where it can (Linux), so
// that each run reports its own peak.
func resetPeakRSS() {
	if runtime.GOOS == "linux" {
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	}
}

// peakRSS returns the peak resident set size in bytes: VmHWM on Linux,
// getrusage's maxrss elsewhere.
func peakRSS() int64 {
	if kb, ok := procStatus("VmHWM:"); ok {
		return kb << 10
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return ru.Maxrss // bytes
	}
	return ru.Maxrss << 10 // kilobytes elsewhere
}

// currentRSS returns the resident set size now (Linux), or the peak where
// the current figure is not available.
func currentRSS() int64 {
	if kb, ok := procStatus("VmRSS:"); ok {
		return kb << 10
	}
	return peakRSS()
}

// procStatus reads a kB field of /proc/self/status.
func procStatus(key string) (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == key {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}

// benchShape is the part of a Qwen3.5 config the benchmark varies.
type benchShape struct {
	H, L, I, V, NH, NKV, HD, NK, NV, DK, DV, K int
}

// qwen35Small returns the Qwen3.5-0.8B shapes (qwen35.md §1.3).
func qwen35Small() benchShape {
	return benchShape{H: 1024, L: 24, I: 3584, V: 248320, NH: 8, NKV: 2, HD: 256, NK: 16, NV: 16, DK: 128, DV: 128, K: 4}
}

// writeBenchCheckpoint writes config.json and model.safetensors for shape s
// with random weights (matrices with std in^−½, as the PyTorch peer draws
// them; F32 A_log and linear_attn.norm as in official files) and returns the
// number of non-embedding parameters. bits 0 writes the HF layout in bf16;
// otherwise the mlx-community layout (language_model.model.*, norms stored
// shifted, conv [D, K, 1]) with every matrix and the embedding affine-quantised
// to bits, group 64, bf16 scales and biases.
func writeBenchCheckpoint(dir string, s benchShape, bits int) (int64, error) {
	const group = 64
	types := make([]string, s.L)
	for i := range types {
		types[i] = "linear_attention"
		if (i+1)%4 == 0 {
			types[i] = "full_attention"
		}
	}
	cfg := map[string]any{
		"architectures": []string{"Qwen3_5ForCausalLM"}, "model_type": "qwen3_5_text",
		"hidden_size": s.H, "num_hidden_layers": s.L, "intermediate_size": s.I, "vocab_size": s.V,
		"num_attention_heads": s.NH, "num_key_value_heads": s.NKV, "head_dim": s.HD,
		"linear_num_key_heads": s.NK, "linear_num_value_heads": s.NV, "linear_key_head_dim": s.DK,
		"linear_value_head_dim": s.DV, "linear_conv_kernel_dim": s.K, "rms_norm_eps": 1e-6,
		"hidden_act": "silu", "layer_types": types, "tie_word_embeddings": true, "max_position_embeddings": 262144,
		"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25},
	}
	prefix, shift := "model.", float32(0)
	if bits != 0 {
		cfg["quantization"] = map[string]any{"group_size": group, "bits": bits, "mode": "affine"}
		prefix, shift = "language_model.model.", 1
	}
	cb, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cb, 0o644); err != nil {
		return 0, err
	}
	seed := uint64(1)
	var ents []safetensors.Entry
	var params int64
	count := func(name string, shape []int) int {
		n := 1
		for _, x := range shape {
			n *= x
		}
		if name != prefix+"embed_tokens.weight" {
			params += int64(n)
		}
		return n
	}
	add := func(name string, d tensor.DType, shape []int, gen func() float32) {
		n := count(name, shape)
		ents = append(ents, safetensors.Entry{Name: name, DType: d, Shape: shape, Stream: func(w io.Writer) error {
			bw := &benchWriter{w: w}
			for range n {
				bw.put(d, gen())
			}
			return bw.flush()
		}})
	}
	// uniform draws with the given standard deviation.
	rnd := func(std float64) func() float32 {
		a := std * math.Sqrt(3)
		return func() float32 { return float32(a * (2*float64(splitmix(&seed)>>11)/(1<<53) - 1)) }
	}
	constant := func(v float32) func() float32 { return func() float32 { return v } }
	mat := func(name string, out, in int, std float64) {
		if bits == 0 {
			add(name+".weight", tensor.BF16, []int{out, in}, rnd(std))
			return
		}
		// The packed stream is written first; the scales and biases it
		// produces (1/16 of its size or less) wait in memory for their turn.
		count(name+".weight", []int{out, in})
		ng := in / group
		var sc, bi []byte
		gen := rnd(std)
		ents = append(ents, safetensors.Entry{Name: name + ".weight", DType: tensor.U32, Shape: []int{out, in * bits / 32},
			Stream: func(w io.Writer) error {
				row, packed := make([]float32, in), make([]byte, in*bits/8)
				rs, rb := make([]float32, ng), make([]float32, ng)
				sc, bi = make([]byte, 0, 2*out*ng), make([]byte, 0, 2*out*ng)
				for range out {
					for c := range row {
						row[c] = gen()
					}
					model.QuantizeRow(packed, rs, rb, row, bits, group, tensor.BF16)
					if _, err := w.Write(packed); err != nil {
						return err
					}
					for g := range ng {
						sc = binary.LittleEndian.AppendUint16(sc, tensor.F32ToBF16(rs[g]))
						bi = binary.LittleEndian.AppendUint16(bi, tensor.F32ToBF16(rb[g]))
					}
				}
				return nil
			}},
			safetensors.Entry{Name: name + ".scales", DType: tensor.BF16, Shape: []int{out, ng}, Stream: func(w io.Writer) error {
				_, err := w.Write(sc)
				sc = nil
				return err
			}},
			safetensors.Entry{Name: name + ".biases", DType: tensor.BF16, Shape: []int{out, ng}, Stream: func(w io.Writer) error {
				_, err := w.Write(bi)
				bi = nil
				return err
			}})
	}
	lin := func(name string, out, in int) { mat(name, out, in, 1/math.Sqrt(float64(in))) }
	mat(prefix+"embed_tokens", s.V, s.H, 0.02)
	add(prefix+"norm.weight", tensor.BF16, []int{s.H}, constant(shift))
	dconv, dval := 2*s.NK*s.DK+s.NV*s.DV, s.NV*s.DV
	for i := range s.L {
		p := fmt.Sprintf("%slayers.%d.", prefix, i)
		add(p+"input_layernorm.weight", tensor.BF16, []int{s.H}, constant(shift))
		add(p+"post_attention_layernorm.weight", tensor.BF16, []int{s.H}, constant(shift))
		lin(p+"mlp.gate_proj", s.I, s.H)
		lin(p+"mlp.up_proj", s.I, s.H)
		lin(p+"mlp.down_proj", s.H, s.I)
		if types[i] == "full_attention" {
			a := p + "self_attn."
			lin(a+"q_proj", 2*s.NH*s.HD, s.H)
			lin(a+"k_proj", s.NKV*s.HD, s.H)
			lin(a+"v_proj", s.NKV*s.HD, s.H)
			lin(a+"o_proj", s.H, s.NH*s.HD)
			add(a+"q_norm.weight", tensor.BF16, []int{s.HD}, constant(shift))
			add(a+"k_norm.weight", tensor.BF16, []int{s.HD}, constant(shift))
			continue
		}
		a := p + "linear_attn."
		lin(a+"in_proj_qkv", dconv, s.H)
		lin(a+"in_proj_z", dval, s.H)
		lin(a+"in_proj_b", s.NV, s.H)
		lin(a+"in_proj_a", s.NV, s.H)
		conv := []int{dconv, 1, s.K}
		if bits != 0 {
			conv = []int{dconv, s.K, 1}
		}
		add(a+"conv1d.weight", tensor.BF16, conv, rnd(0.5))
		add(a+"dt_bias", tensor.BF16, []int{s.NV}, constant(0))
		add(a+"A_log", tensor.F32, []int{s.NV}, func() float32 {
			return float32(math.Log(float64(splitmix(&seed)>>11)/(1<<53)*15 + 1))
		})
		add(a+"norm.weight", tensor.F32, []int{s.DV}, constant(1))
		lin(a+"out_proj", s.H, dval)
	}
	return params, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ents, map[string]string{"format": "pt"})
}

// benchWriter buffers element-wise writes of generated tensors.
type benchWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func (b *benchWriter) put(d tensor.DType, v float32) {
	if d == tensor.F32 {
		b.buf = binary.LittleEndian.AppendUint32(b.buf, math.Float32bits(v))
	} else {
		b.buf = binary.LittleEndian.AppendUint16(b.buf, tensor.F32ToBF16(v))
	}
	if len(b.buf) >= 1<<16 {
		b.flush()
	}
}

func (b *benchWriter) flush() error {
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
