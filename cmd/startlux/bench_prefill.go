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
// backend's own sgemm rate measured in the same run.
func benchPrefill(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("bench prefill", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	tokens := fs.Int("tokens", 512, "prompt length")
	quant := fs.Int("quant", 0, "0: bf16 weights (MLX-quantised weights are not built into the benchmark yet)")
	runs := fs.Int("runs", 3, "timed prefills after one warm-up (the median is reported)")
	keep := fs.String("dir", "", "write the checkpoint here and keep it (default: a temporary directory, removed)")
	backend := backendFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tokens < 1 || *runs < 1 || fs.NArg() != 0 {
		return fmt.Errorf("bench prefill: --tokens and --runs must be positive, no other arguments")
	}
	if *quant != 0 {
		return fmt.Errorf("bench prefill: --quant %d: only 0 (bf16) is built so far", *quant)
	}
	be, err := openBackend(*backend)
	if err != nil {
		return fmt.Errorf("bench prefill: %w", err)
	}

	dir := *keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "startlux-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t0 := time.Now()
	params, err := writeBenchCheckpoint(dir, qwen35Small())
	if err != nil {
		return fmt.Errorf("bench prefill: %w", err)
	}
	st, err := os.Stat(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return err
	}
	ckBytes := st.Size()
	fmt.Fprintf(env.stderr, "wrote a Qwen3.5-0.8B-shaped checkpoint (%.2f GB, %.1fM non-embedding parameters) in %.1fs\n",
		float64(ckBytes)/1e9, float64(params)/1e6, time.Since(t0).Seconds())

	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		return fmt.Errorf("bench prefill: %w", err)
	}
	defer m.Close()
	ids := make([]int32, *tokens)
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
		return fmt.Errorf("bench prefill: %w", err)
	}
	var times []time.Duration
	for range *runs {
		d, err := prefill()
		if err != nil {
			return fmt.Errorf("bench prefill: %w", err)
		}
		times = append(times, d)
		fmt.Fprintf(env.stderr, "prefill %d tokens: %.2fs\n", *tokens, d.Seconds())
	}
	slices.Sort(times)
	med := times[len(times)/2].Seconds()
	tps := float64(*tokens) / med
	gflops := 2 * float64(params) * float64(*tokens) / med / 1e9

	fmt.Fprintf(env.stdout, "backend %s, %d threads (GOMAXPROCS), %s/%s\n", be.Name(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(env.stdout, "peak resident memory %.2f GB = %.2f × the checkpoint's %.2f GB\n",
		float64(peakRSS())/1e9, float64(peakRSS())/float64(ckBytes), float64(ckBytes)/1e9)
	line := fmt.Sprintf("prefill %d tokens: %.1f tok/s, %.1f GFLOP/s", *tokens, tps, gflops)
	if sm, ok := be.(sgemmMeter); ok {
		sg, err := sm.MeasureSgemm(ctx, *tokens, 1024, 3584, time.Second)
		if err != nil {
			return fmt.Errorf("bench prefill: sgemm: %w", err)
		}
		line += fmt.Sprintf(" = %.0f%% of BLAS sgemm (%.1f GFLOP/s, %d×1024×3584)", 100*gflops/sg, sg, *tokens)
	}
	fmt.Fprintln(env.stdout, line)
	return nil
}

// peakRSS returns the peak resident set size in bytes: VmHWM on Linux,
// getrusage's maxrss elsewhere.
func peakRSS() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
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

// benchShape is the part of a Qwen3.5 config the benchmark varies.
type benchShape struct {
	H, L, I, V, NH, NKV, HD, NK, NV, DK, DV, K int
}

// qwen35Small returns the Qwen3.5-0.8B shapes (qwen35.md §1.3).
func qwen35Small() benchShape {
	return benchShape{H: 1024, L: 24, I: 3584, V: 248320, NH: 8, NKV: 2, HD: 256, NK: 16, NV: 16, DK: 128, DV: 128, K: 4}
}

// writeBenchCheckpoint writes config.json and model.safetensors for shape s
// with random weights (bf16 matrices with std in^−½, as the PyTorch peer
// draws them; F32 A_log and linear_attn.norm as in official files) and
// returns the number of non-embedding parameters.
func writeBenchCheckpoint(dir string, s benchShape) (int64, error) {
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
	add := func(name string, d tensor.DType, shape []int, gen func(i int) float32) {
		n := 1
		for _, x := range shape {
			n *= x
		}
		if name != "model.embed_tokens.weight" {
			params += int64(n)
		}
		ents = append(ents, safetensors.Entry{Name: name, DType: d, Shape: shape, Stream: func(w io.Writer) error {
			buf := make([]byte, 0, 1<<16)
			for i := range n {
				v := gen(i)
				if d == tensor.F32 {
					buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
				} else {
					buf = binary.LittleEndian.AppendUint16(buf, tensor.F32ToBF16(v))
				}
				if len(buf) >= 1<<16-4 {
					if _, err := w.Write(buf); err != nil {
						return err
					}
					buf = buf[:0]
				}
			}
			_, err := w.Write(buf)
			return err
		}})
	}
	// uniform draws with the given standard deviation.
	rnd := func(std float64) func(int) float32 {
		a := std * math.Sqrt(3)
		return func(int) float32 {
			return float32(a * (2*float64(splitmix(&seed)>>11)/(1<<53) - 1))
		}
	}
	constant := func(v float32) func(int) float32 { return func(int) float32 { return v } }
	lin := func(name string, out, in int) {
		add(name, tensor.BF16, []int{out, in}, rnd(1/math.Sqrt(float64(in))))
	}
	add("model.embed_tokens.weight", tensor.BF16, []int{s.V, s.H}, rnd(0.02))
	add("model.norm.weight", tensor.BF16, []int{s.H}, constant(0))
	dconv, dval := 2*s.NK*s.DK+s.NV*s.DV, s.NV*s.DV
	for i := range s.L {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"input_layernorm.weight", tensor.BF16, []int{s.H}, constant(0))
		add(p+"post_attention_layernorm.weight", tensor.BF16, []int{s.H}, constant(0))
		lin(p+"mlp.gate_proj.weight", s.I, s.H)
		lin(p+"mlp.up_proj.weight", s.I, s.H)
		lin(p+"mlp.down_proj.weight", s.H, s.I)
		if types[i] == "full_attention" {
			a := p + "self_attn."
			lin(a+"q_proj.weight", 2*s.NH*s.HD, s.H)
			lin(a+"k_proj.weight", s.NKV*s.HD, s.H)
			lin(a+"v_proj.weight", s.NKV*s.HD, s.H)
			lin(a+"o_proj.weight", s.H, s.NH*s.HD)
			add(a+"q_norm.weight", tensor.BF16, []int{s.HD}, constant(0))
			add(a+"k_norm.weight", tensor.BF16, []int{s.HD}, constant(0))
			continue
		}
		a := p + "linear_attn."
		lin(a+"in_proj_qkv.weight", dconv, s.H)
		lin(a+"in_proj_z.weight", dval, s.H)
		lin(a+"in_proj_b.weight", s.NV, s.H)
		lin(a+"in_proj_a.weight", s.NV, s.H)
		add(a+"conv1d.weight", tensor.BF16, []int{dconv, 1, s.K}, rnd(0.5))
		add(a+"dt_bias", tensor.BF16, []int{s.NV}, constant(0))
		add(a+"A_log", tensor.F32, []int{s.NV}, func(int) float32 {
			return float32(math.Log(float64(splitmix(&seed)>>11)/(1<<53)*15 + 1))
		})
		add(a+"norm.weight", tensor.F32, []int{s.DV}, constant(1))
		lin(a+"out_proj.weight", s.H, dval)
	}
	return params, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ents, map[string]string{"format": "pt"})
}

// splitmix advances a SplitMix64 generator.
func splitmix(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
