package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
	"github.com/startlux/startlux/tensor"
	"github.com/vmihailenco/msgpack/v5"
)

// benchServeRequests are the requests "bench serve" cycles through: the
// shapes a desktop app sends (one to four questions about small evidence).
var benchServeRequests = []string{
	`{"evidence":{"name":"Nadia","age":30,"city":"Cairo"},"questions":{"q0":{"type":"noul","instructions":"Does Nadia live in Cairo?"}}}`,
	`{"evidence":{"items":[{"name":"switch","qty":13},{"name":"lamp","qty":0}]},"questions":{"q0":{"type":"noul","instructions":"Is lamp available?"},"q1":{"type":"score","instructions":"How many items are out of stock?","criteria":["none","one","two or more"]}}}`,
	`{"evidence":{"page":"Row 0: item 0, qty 1. Row 1: item 1, qty 0. Row 2: item 2, qty 5."},"questions":{"q0":{"type":"score","instructions":"How much is on the page?","criteria":["empty","some","full"]}}}`,
	`{"evidence":{"store":"north","items":[{"name":"stapler","qty":7},{"name":"lamp","qty":6},{"name":"banana","qty":10}]},"questions":{"q0":{"type":"choice","instructions":"Which item has the largest quantity?","criteria":{"lamp":"lamp","stapler":"stapler","banana":"banana"}},"q1":{"type":"noul","instructions":"Is there any lamp in stock?"}}}`,
	`{"evidence":{"name":"Omar","age":56,"city":"Dublin","email":"omar@corp.net"},"questions":{"q0":{"type":"choice","instructions":"Which city is home?","criteria":{"paris":"Paris","seoul":"Seoul","dublin":"Dublin"}},"q1":{"type":"score","instructions":"How old is the person?","criteria":["child","adult","senior"]},"q2":{"type":"noul","instructions":"Is the email address at example.com?"}}}`,
	`{"evidence":{"items":[{"name":"battery","qty":1},{"name":"kiwi","qty":14}]},"questions":{"q0":{"type":"score","instructions":"How many items are out of stock?","criteria":["none","one","two or more"]}}}`,
}

// ServeOptions configures Serve.
type ServeOptions struct {
	Model    string // checkpoint directory ("": the embedded demo model)
	Requests int    // requests per measurement
	Clients  int    // concurrent clients of the many-clients measurement
	MaxBatch int    // the daemon's --max-batch (0: its default)
	// Rounds of measurement (medians are shown); in-process and one-client
	// calls alternate request by request.
	Rounds int
	// Mixed measures small requests' latency while another client sends
	// maximal requests, against the same without (see serveMixed), instead
	// of the throughput measurements.
	Mixed bool
	// PassTokens is the daemon's longest forward pass of a large request, in
	// tokens (0: its default).
	PassTokens int
}

func (o *ServeOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.Model, "model", "", "checkpoint `DIR` (default: the embedded demo model)")
	fs.IntVar(&o.Requests, "requests", 300, "requests per measurement")
	fs.IntVar(&o.Clients, "clients", 16, "concurrent clients of the many-clients measurement")
	fs.IntVar(&o.MaxBatch, "max-batch", 0, "the daemon's --max-batch (0: its default)")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds of measurement (medians are shown); in-process and one-client calls alternate request by request")
	fs.BoolVar(&o.Mixed, "mixed", false, "measure small requests' latency while another client sends maximal requests, against the same without")
	fs.IntVar(&o.PassTokens, "pass-tokens", 0, "the daemon's longest forward pass of a large request, in tokens (0: its default)")
}

// ServeReport is what Serve measured: the medians over its rounds.
type ServeReport struct {
	Options                           ServeOptions
	Shapes                            int // request shapes cycled through
	InProcess, OneClient, ManyClients ServeResult
	// Mixed holds the --mixed measurement (nil without it; then the three
	// results above are unset).
	Mixed *MixedResult
}

// Serve measures the throughput and latency of decisions through the
// socket of an in-process daemon, for one client and for many concurrent
// ones, against calling the engine in-process on the same backend.
func Serve(ctx context.Context, env Env, o ServeOptions) (*ServeReport, error) {
	if o.Requests < 1 || o.Clients < 1 || o.Rounds < 1 {
		return nil, fmt.Errorf("--requests, --clients and --rounds must be positive")
	}
	// The daemon, on a socket of its own.
	sock, stopDaemon, err := startServeDaemon(ctx, env, o)
	if err != nil {
		return nil, err
	}
	defer stopDaemon()
	ctl, err := ipc.Dial(ctx, sock)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	st, err := waitReady(ctx, ctl)
	if err != nil {
		return nil, err
	}
	if o.Mixed {
		m, err := serveMixed(ctx, env, o, sock, st)
		if err != nil {
			return nil, err
		}
		return &ServeReport{Options: o, Shapes: len(benchServeRequests), Mixed: m}, nil
	}

	// The same model in-process, on the same backend.
	be, err := env.Open(0)
	if err != nil {
		return nil, err
	}
	eng, err := daemon.OpenEngine(o.Model, be, decide.Options{})
	if err != nil {
		return nil, err
	}
	defer eng.Close()

	reqs := make([]*decide.Request, len(benchServeRequests))
	raws := make([]msgpack.RawMessage, len(benchServeRequests))
	for i, js := range benchServeRequests {
		if reqs[i], err = decide.ParseJSON([]byte(js)); err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		if raws[i], err = ipc.FromJSON([]byte(js)); err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
	}
	inProcess := func(i int) error { _, err := eng.Decide(ctx, reqs[i%len(reqs)]); return err }
	clientsConns := make([]*ipc.Client, o.Clients)
	for i := range clientsConns {
		if clientsConns[i], err = ipc.Dial(ctx, sock); err != nil {
			return nil, err
		}
		defer clientsConns[i].Close()
	}
	viaSocket := func(c *ipc.Client) func(int) error {
		return func(i int) error {
			var resp api.Response
			return c.Call(ctx, api.MethodDecide, raws[i%len(raws)], &resp)
		}
	}
	// Warm both sides (the evidence snapshots, first-use costs).
	if _, err := measure(ctx, 2*len(reqs), 1, func(int) func(int) error { return inProcess }); err != nil {
		return nil, err
	}
	if _, err := measure(ctx, 2*len(reqs), 1, func(int) func(int) error { return viaSocket(ctl) }); err != nil {
		return nil, err
	}

	// In-process and one-client calls alternate request by request, so that
	// load from elsewhere on the machine falls on both alike.
	var local, one, many []ServeResult
	for r := 0; r < o.Rounds; r++ {
		lr, or, err := measurePaired(ctx, o.Requests, inProcess, viaSocket(ctl))
		if err != nil {
			return nil, err
		}
		local, one = append(local, lr), append(one, or)
		res, err := measure(ctx, o.Requests, o.Clients, func(g int) func(int) error { return viaSocket(clientsConns[g]) })
		if err != nil {
			return nil, fmt.Errorf("%d clients: %w", o.Clients, err)
		}
		many = append(many, res)
	}
	return &ServeReport{Options: o, Shapes: len(reqs),
		InProcess: medianResult(local), OneClient: medianResult(one), ManyClients: medianResult(many)}, nil
}

// Print writes the report.
func (r *ServeReport) Print(w io.Writer) error {
	p := &printer{w: w}
	model := "the embedded demo model"
	if r.Options.Model != "" {
		model = r.Options.Model
	}
	if r.Mixed != nil {
		r.Mixed.print(p, model, r.Options)
		return p.err
	}
	batching := "default"
	if r.Options.MaxBatch > 0 {
		batching = fmt.Sprint(r.Options.MaxBatch)
	}
	p.printf("bench serve: %s, %d request shapes, %d requests per measurement, median of %d rounds, max batch %s\n",
		model, r.Shapes, r.Options.Requests, r.Options.Rounds, batching)
	p.printf("  %-22s %10s %10s %10s %10s\n", "", "req/s", "mean ms", "p50 ms", "p99 ms")
	l, o, m := r.InProcess, r.OneClient, r.ManyClients
	for _, row := range []struct {
		name string
		r    ServeResult
	}{{"in-process Decide", l}, {"socket, 1 client", o}, {fmt.Sprintf("socket, %d clients", r.Options.Clients), m}} {
		p.printf("  %-22s %10.1f %10.3f %10.3f %10.3f\n", row.name, row.r.Throughput, row.r.Mean, row.r.P50, row.r.P99)
	}
	p.printf("  socket overhead at 1 client: %+.1f%% of the mean (%+.3f ms), %+.1f%% of the p50 (goal: under 10%%)\n",
		100*(o.Mean-l.Mean)/l.Mean, o.Mean-l.Mean, 100*(o.P50-l.P50)/l.P50)
	p.printf("  %d clients vs 1: %.2fx the throughput\n", r.Options.Clients, m.Throughput/o.Throughput)
	return p.err
}

// startServeDaemon runs a daemon on a socket in a private temporary
// directory and returns the socket and a function that stops the daemon.
func startServeDaemon(ctx context.Context, env Env, o ServeOptions) (string, func(), error) {
	tmp, err := os.MkdirTemp("", "startlux-bench-")
	if err != nil {
		return "", nil, err
	}
	sock := filepath.Join(tmp, "bench.sock")
	dctx, stop := context.WithCancel(ctx)
	listening := make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		ran <- daemon.Run(dctx, daemon.RunOptions{Socket: sock, Daemon: daemon.Options{
			Load:  daemon.DecideLoader(daemon.LoaderOptions{Backend: func() (tensor.Backend, error) { return env.Open(0) }}),
			Model: o.Model, ModelsDir: tmp, MaxBatch: o.MaxBatch, PassTokens: o.PassTokens,
		}, Listening: func(string) { close(listening) }})
	}()
	select {
	case <-listening:
	case err := <-ran:
		stop()
		os.RemoveAll(tmp)
		return "", nil, err
	}
	return sock, func() { stop(); <-ran; os.RemoveAll(tmp) }, nil
}

// waitReady polls the daemon's status until its model serves.
func waitReady(ctx context.Context, c *ipc.Client) (api.Status, error) {
	var st api.Status
	for st.State != api.StateReady {
		if err := c.Call(ctx, api.MethodStatus, nil, &st); err != nil {
			return st, err
		}
		if st.State == api.StateFailed {
			return st, errors.New(st.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return st, nil
}

// ServeResult is one measurement: requests per second and per-request
// latency (mean and percentiles, in ms).
type ServeResult struct {
	Throughput, Mean, P50, P99 float64
}

// measure runs n requests split over `workers` goroutines (worker g calls
// fn(g) for its request function) and times each.
func measure(ctx context.Context, n, workers int, fn func(g int) func(int) error) (ServeResult, error) {
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call := fn(g)
			for i := g; i < n; i += workers {
				if err := ctx.Err(); err != nil {
					errs <- err
					return
				}
				t0 := time.Now()
				if err := call(i); err != nil {
					errs <- err
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return ServeResult{}, err
	}
	return summarize(lat, wall), nil
}

// measurePaired runs n requests through a and through b, alternating, and
// times each; throughput is over the time spent in each.
func measurePaired(ctx context.Context, n int, a, b func(int) error) (ServeResult, ServeResult, error) {
	la, lb := make([]time.Duration, n), make([]time.Duration, n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return ServeResult{}, ServeResult{}, err
		}
		for _, side := range []struct {
			call func(int) error
			lat  []time.Duration
		}{{a, la}, {b, lb}} {
			t0 := time.Now()
			if err := side.call(i); err != nil {
				return ServeResult{}, ServeResult{}, err
			}
			side.lat[i] = time.Since(t0)
		}
	}
	return summarize(la, 0), summarize(lb, 0), nil
}

// summarize turns latencies into a result; wall is the elapsed time of
// concurrent requests (0: the latencies ran one after another).
func summarize(lat []time.Duration, wall time.Duration) ServeResult {
	lat = append([]time.Duration(nil), lat...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	if wall == 0 {
		wall = sum
	}
	msOf := func(d time.Duration) float64 { return float64(d) / 1e6 }
	pct := func(p float64) time.Duration {
		return lat[min(len(lat)-1, max(0, int(p*float64(len(lat))+0.999999)-1))]
	}
	return ServeResult{
		Throughput: float64(len(lat)) / wall.Seconds(),
		Mean:       msOf(sum) / float64(len(lat)),
		P50:        msOf(pct(0.50)),
		P99:        msOf(pct(0.99)),
	}
}

// medianResult takes the median of each figure over rounds.
func medianResult(rs []ServeResult) ServeResult {
	med := func(get func(ServeResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	return ServeResult{
		Throughput: med(func(r ServeResult) float64 { return r.Throughput }),
		Mean:       med(func(r ServeResult) float64 { return r.Mean }),
		P50:        med(func(r ServeResult) float64 { return r.P50 }),
		P99:        med(func(r ServeResult) float64 { return r.P99 }),
	}
}
