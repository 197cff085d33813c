package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
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
	"github.com/startlux/startlux/model/modeltest"
	"github.com/startlux/startlux/tensor"
)

// PrefillOptions configures Prefill.
type PrefillOptions struct {
	Tokens int // prompt length
	Runs   int // timed prefills after one warm-up (the median is reported)
	// Quant, when not 0, also runs the shapes MLX affine-quantised to this
	// many bits (2, 3, 4, 5, 6 or 8; group 64).
	Quant int
	// Dir, when set, is where the checkpoints are written and kept (by
	// default a temporary directory, removed).
	Dir string
	// Int8, instead of the bf16 measurement against sgemm (and of Quant),
	// loads the bf16
	// checkpoint twice, in float and with int8 projections (as an int8
	// engine does: SmoothQuant on down_proj's input from calibration rows),
	// and alternates their prefills (see PrefillInt8).
	Int8 bool
	// Check, with Int8, also compares the two models' final hidden states.
	Check bool
	// Layers is the number of decoder layers (0: the model's 24).
	Layers int

	// config, when set (by tests), replaces the 0.8B shapes.
	config func(layers int) model.Config
}

func (o *PrefillOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&o.Tokens, "tokens", 512, "prompt length")
	fs.IntVar(&o.Quant, "quant", 0, "also run the shapes MLX affine-quantised to this many bits (2, 3, 4, 5, 6 or 8; group 64); 0: bf16 only")
	fs.IntVar(&o.Runs, "runs", 3, "timed prefills after one warm-up (the median is reported)")
	fs.StringVar(&o.Dir, "dir", "", "write the checkpoints under this directory and keep them (default: a temporary directory, removed)")
	fs.BoolVar(&o.Int8, "int8", false, "compare bf16 with int8 projections: prefills alternated, tok/s, their ratio, projection bytes, resident memory")
	fs.BoolVar(&o.Check, "check", false, "with --int8: the relative error of the final hidden state, int8 against bf16")
	fs.IntVar(&o.Layers, "layers", 24, "decoder layers of the Qwen3.5-0.8B shapes (24 in the model)")
}

// PrefillReport is what Prefill measured.
type PrefillReport struct {
	Backend      string
	GOMAXPROCS   int
	GOOS, GOARCH string
	Tokens       int
	Layers       int
	BF16         PrefillResult
	Quant        *PrefillResult // with PrefillOptions.Quant
	QuantBits    int
	Int8         *PrefillInt8 // with PrefillOptions.Int8 (BF16 and Quant are then not measured)
}

// PrefillResult is one checkpoint's measurement.
type PrefillResult struct {
	Kind               string  // "bf16", "4-bit"
	TokensPerSecond    float64 // over the median prefill
	GFLOPS             float64 // 2 · parameters · tokens over the median prefill
	Sgemm              float64 // the backend's sgemm GFLOP/s, measured between the timed prefills; 0 if it has none
	WeightBytes        int64
	CheckpointBytes    int64
	LoadedRSS, PeakRSS int64 // resident bytes after load, and at the peak of the run
}

// Prefill runs a prefill over a checkpoint with the real Qwen3.5-0.8B
// shapes and random bf16 weights, against the backend's own sgemm rate
// measured in the same run. With Quant it then runs the same shapes
// MLX-quantised and compares. With Int8 it compares the bf16 checkpoint in
// float with the same checkpoint with int8 projections instead.
func Prefill(ctx context.Context, env Env, o PrefillOptions) (*PrefillReport, error) {
	if o.Tokens < 1 || o.Runs < 1 || o.Layers < 0 {
		return nil, fmt.Errorf("--tokens and --runs must be positive, --layers not negative")
	}
	if o.Check && !o.Int8 {
		return nil, fmt.Errorf("--check compares int8 with bf16: it needs --int8")
	}
	if o.Int8 && o.Quant != 0 {
		return nil, fmt.Errorf("--int8 and --quant exclude each other")
	}
	if o.Layers == 0 {
		o.Layers = 24
	}
	if o.config == nil {
		o.config = modeltest.Qwen35Small
	}
	switch o.Quant {
	case 0, 2, 3, 4, 5, 6, 8:
	default:
		return nil, fmt.Errorf("--quant %d: want 0, 2, 3, 4, 5, 6 or 8", o.Quant)
	}
	be, err := env.Open(0)
	if err != nil {
		return nil, err
	}
	root := o.Dir
	if root == "" {
		if root, err = os.MkdirTemp("", "startlux-bench-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(root)
	}
	r := &PrefillReport{Backend: be.Name(), GOMAXPROCS: runtime.GOMAXPROCS(0), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Tokens: o.Tokens, Layers: o.Layers}
	b := &prefillBench{be: be, tokens: o.Tokens, runs: o.Runs, env: env, config: o.config(o.Layers)}
	if o.Int8 {
		if r.Int8, err = b.int8(ctx, filepath.Join(root, "bf16"), o.Check); err != nil {
			if r.Int8 == nil {
				return nil, fmt.Errorf("int8: %w", err)
			}
			return r, fmt.Errorf("int8: %w", err)
		}
	} else {
		base, err := b.run(ctx, filepath.Join(root, "bf16"), 0)
		if err != nil {
			return nil, err
		}
		r.BF16 = *base
	}
	if o.Quant != 0 {
		if r.Quant, err = b.run(ctx, filepath.Join(root, fmt.Sprintf("q%d", o.Quant)), o.Quant); err != nil {
			return nil, fmt.Errorf("%d-bit: %w", o.Quant, err)
		}
		r.QuantBits = o.Quant
	}
	return r, nil
}

// Print writes the report.
func (r *PrefillReport) Print(w io.Writer) error {
	p := &printer{w: w}
	p.printf("backend %s, GOMAXPROCS %d, %s/%s\n", r.Backend, r.GOMAXPROCS, r.GOOS, r.GOARCH)
	if r.Int8 != nil {
		p.printf("%d layers of the Qwen3.5-0.8B shapes\n", r.Layers)
		r.Int8.print(p, r.Tokens)
		return p.err
	}
	for _, x := range []*PrefillResult{&r.BF16, r.Quant} {
		if x != nil {
			p.printf("%s: resident after load %.2f GB, peak %.2f GB = %.2f × the checkpoint's %.2f GB\n",
				x.Kind, float64(x.LoadedRSS)/1e9, float64(x.PeakRSS)/1e9, float64(x.PeakRSS)/float64(x.CheckpointBytes), float64(x.CheckpointBytes)/1e9)
		}
	}
	base := &r.BF16
	if q := r.Quant; q != nil {
		p.printf("prefill %d tokens, %d-bit: %.1f tok/s = %.2f × bf16, weights %.2f GB = %.0f%% of bf16's %.2f GB\n",
			r.Tokens, r.QuantBits, q.TokensPerSecond, q.TokensPerSecond/base.TokensPerSecond, float64(q.WeightBytes)/1e9,
			100*float64(q.WeightBytes)/float64(base.WeightBytes), float64(base.WeightBytes)/1e9)
	}
	p.printf("prefill %d tokens: %.1f tok/s, %.1f GFLOP/s", r.Tokens, base.TokensPerSecond, base.GFLOPS)
	if base.Sgemm > 0 {
		p.printf(" = %.0f%% of BLAS sgemm (%.1f GFLOP/s)", 100*base.GFLOPS/base.Sgemm, base.Sgemm)
	}
	p.printf("\n")
	return p.err
}

// prefillBench holds what every run of the prefill benchmark shares.
type prefillBench struct {
	be           tensor.Backend
	tokens, runs int
	env          Env
	config       model.Config
}

// write writes the checkpoint (bits 0: bf16, else MLX-quantised) into dir
// and returns its parameters outside the embedding and its size.
func (b *prefillBench) write(dir string, bits int, kind string) (params, size int64, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	params, err = modeltest.Write(dir, b.config, modeltest.Options{Bits: bits})
	if err != nil {
		return 0, 0, err
	}
	st, err := os.Stat(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return 0, 0, err
	}
	b.env.logf("wrote a %d-layer Qwen3.5-0.8B-shaped %s checkpoint (%.2f GB, %.1fM non-embedding parameters) in %.1fs\n",
		b.config.Layers, kind, float64(st.Size())/1e9, float64(params)/1e6, time.Since(t0).Seconds())
	return params, st.Size(), nil
}

// ids returns the prompt: tokens random ids (a fixed stream) below 240000,
// or the vocabulary where it is smaller.
func (b *prefillBench) ids(seed uint64) []int32 {
	ids := make([]int32, b.tokens)
	rng := seed
	for i := range ids {
		ids[i] = int32(splitmix(&rng) % uint64(min(240000, b.config.Vocab)))
	}
	return ids
}

// timePrefill times one prefill of ids on m.
func timePrefill(ctx context.Context, m *model.Model, ids []int32) (time.Duration, error) {
	start := time.Now()
	s, err := m.Prefill(ctx, nil, ids)
	if err != nil {
		return 0, err
	}
	d := time.Since(start)
	s.Free()
	return d, nil
}

// run writes a checkpoint (bits 0: bf16, else MLX-quantised) into dir,
// loads it and times prefills.
func (b *prefillBench) run(ctx context.Context, dir string, bits int) (*PrefillResult, error) {
	kind := "bf16"
	if bits != 0 {
		kind = fmt.Sprintf("%d-bit", bits)
	}
	params, size, err := b.write(dir, bits, kind)
	if err != nil {
		return nil, err
	}
	debug.FreeOSMemory() // what an earlier run left on the heap must not count against this one
	resetPeakRSS()
	m, err := model.Load(dir, b.be, model.LoadOptions{})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	loaded := currentRSS()
	ids := b.ids(0x9e3779b97f4a7c15)
	prefill := func() (time.Duration, error) { return timePrefill(ctx, m, ids) }
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
		b.env.logf("%s\n", msg)
	}
	slices.Sort(times)
	med := times[len(times)/2].Seconds()
	r := &PrefillResult{Kind: kind, TokensPerSecond: float64(b.tokens) / med, GFLOPS: 2 * float64(params) * float64(b.tokens) / med / 1e9,
		WeightBytes: m.WeightBytes(), CheckpointBytes: size, LoadedRSS: loaded, PeakRSS: peakRSS()}
	if len(sgemms) > 0 {
		slices.Sort(sgemms)
		r.Sgemm = sgemms[len(sgemms)/2]
	}
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

// fileRSS returns the resident bytes mapped from files (Linux; 0 where
// the figure is not available).
func fileRSS() int64 {
	kb, _ := procStatus("RssFile:")
	return kb << 10
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
