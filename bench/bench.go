// Package bench holds StartLux's benchmarks, the ones startlux bench runs:
// prefill (a Qwen3.5-0.8B-shaped prefill against the machine's sgemm),
// decide (cold against warm evidence, decide_batch against one by one),
// pointer (a pointer/1 checkpoint's prefix form against its row form), serve
// (the daemon over its socket against the engine in-process) and tokenize.
// Each is a function that takes its options and returns a report, which
// prints as the command shows it; All lists them with their command-line
// flags, and Main runs them from the command's arguments. Figures are
// ratios measured in the same run (docs/benchmarks.md).
package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"time"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/tensor"
)

// Env is what a benchmark gets from its caller.
type Env struct {
	// Open opens the compute backend to measure, with the given number of
	// CPU threads (0: all cores; backends without threads ignore it).
	Open func(threads int) (tensor.Backend, error)
	// Log receives progress while the benchmark runs (nil: none).
	Log io.Writer
}

func (e Env) logf(format string, a ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format, a...)
	}
}

// Report is what a benchmark measured.
type Report interface {
	// Print writes the report as startlux bench shows it.
	Print(w io.Writer) error
}

// Benchmark is one benchmark as startlux bench runs it from its flags.
type Benchmark struct {
	Name, Summary string
	// UsesBackend is set for the benchmarks that run on a compute backend
	// (Env.Open), which the command lets the user choose.
	UsesBackend bool
	// Flags registers the benchmark's flags on fs and returns the function
	// that runs it with their values once fs has parsed them. The report
	// comes back whenever the run finished, even with an error that says its
	// results broke what the benchmark holds.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, env Env) (Report, error)
}

// All lists the benchmarks, in the order "startlux bench all" runs them.
func All() []Benchmark {
	return []Benchmark{
		{"prefill", "Qwen3.5-0.8B-shaped prefill: tok/s and GFLOP/s against the machine's sgemm", true,
			flagsOf((*PrefillOptions).register, Prefill)},
		{"decide", "the demo model: cold vs warm evidence, decide_batch vs one by one", true,
			flagsOf((*DecideOptions).register, Decide)},
		{"pointer", "pointer/1: prefix form vs row form, cold and warm", true,
			flagsOf((*PointerOptions).register, Pointer)},
		{"serve", "the daemon over its socket: throughput, p50/p99, overhead against in-process", true,
			flagsOf((*ServeOptions).register, Serve)},
		{"tokenize", "encode throughput of the real Qwen3 vocabulary", false,
			flagsOf((*TokenizeOptions).register, Tokenize)},
	}
}

// flagsOf makes a Benchmark's Flags from the registration of its options'
// flags and the function that runs it.
func flagsOf[O, R any, P interface {
	*R
	Report
}](register func(*O, *flag.FlagSet), run func(context.Context, Env, O) (P, error)) func(*flag.FlagSet) func(context.Context, Env) (Report, error) {
	return func(fs *flag.FlagSet) func(context.Context, Env) (Report, error) {
		var o O
		register(&o, fs)
		return func(ctx context.Context, env Env) (Report, error) {
			r, err := run(ctx, env, o)
			if r == nil {
				return nil, err // not a Report holding a nil pointer
			}
			return r, err
		}
	}
}

// printer writes lines and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

// Engine names what a decide or pointer benchmark ran: the model, the
// backend, the platform and the engine's preamble.
type Engine struct {
	Model, Backend, GOOS, GOARCH string
	PreambleTokens               int
}

func newEngine(model string, be tensor.Backend, e *decide.Engine) Engine {
	return Engine{Model: model, Backend: backendLabel(be), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, PreambleTokens: e.Info().PreambleTokens}
}

func (e Engine) print(p *printer, benchmark string) {
	p.printf("%s benchmark: model %s, backend %s, GOOS/GOARCH %s/%s, preamble %d tokens\n",
		benchmark, e.Model, e.Backend, e.GOOS, e.GOARCH, e.PreambleTokens)
}

// sgemmMeter is what a backend offers to measure its plain float32 GEMM (the
// CPU backend's MeasureSgemm).
type sgemmMeter interface {
	MeasureSgemm(ctx context.Context, m, n, k int, minDur time.Duration) (float64, error)
}

// backendLabel names a backend for a report, with its thread count where it
// has one.
func backendLabel(be tensor.Backend) string {
	if t, ok := be.(interface{ Threads() int }); ok {
		return fmt.Sprintf("%s (%d threads)", be.Name(), t.Threads())
	}
	return be.Name()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// median returns the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// maxDiff is the largest difference between two responses' probabilities.
func maxDiff(a, b *decide.Response) float64 {
	worst := 0.0
	for i := range a.Answers {
		for j := range a.Answers[i].Probs {
			worst = math.Max(worst, math.Abs(a.Answers[i].Probs[j]-b.Answers[i].Probs[j]))
		}
	}
	return worst
}

// splitmix advances a SplitMix64 generator.
func splitmix(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
