package main

import (
	"context"
	"flag"
	"fmt"
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
	params, err := modeltest.Write(dir, modeltest.Qwen35Small(24), modeltest.Options{Bits: bits})
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

// splitmix advances a SplitMix64 generator.
func splitmix(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
