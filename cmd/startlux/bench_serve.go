package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/startlux/startlux"
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

// benchServe is "startlux bench serve": throughput and latency of decisions
// through the socket of an in-process daemon, for one client and for many
// concurrent ones, against calling the engine in-process.
func benchServe(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("bench serve", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	modelDir := fs.String("model", "", "checkpoint `DIR` (default: the embedded demo model)")
	n := fs.Int("requests", 300, "requests per measurement")
	clients := fs.Int("clients", 16, "concurrent clients of the many-clients measurement")
	maxBatch := fs.Int("max-batch", 0, "the daemon's --max-batch (0: its default)")
	backend := backendFlag(fs)
	rounds := fs.Int("rounds", 3, "rounds of measurement (medians are shown); in-process and one-client calls alternate request by request")
	mixed := fs.Bool("mixed", false, "measure small requests' latency while another client sends maximal requests, against the same without (see benchServeMixed)")
	passTokens := fs.Int("pass-tokens", 0, "the daemon's longest forward pass of a large request, in tokens (0: its default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *clients < 1 || *rounds < 1 {
		return fmt.Errorf("bench serve: --requests, --clients and --rounds must be positive")
	}

	// The daemon, on a socket of its own.
	sock, stopDaemon, err := startBenchDaemon(ctx, *modelDir, *backend, *maxBatch, *passTokens)
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	defer stopDaemon()
	ctl, err := ipc.Dial(ctx, sock)
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	defer ctl.Close()
	st, err := waitReady(ctx, ctl)
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	if *mixed {
		return benchServeMixed(ctx, env, mixedParams{sock: sock, ctl: ctl, status: st, modelDir: *modelDir, backend: *backend, requests: *n, rounds: *rounds})
	}

	// The same model in-process, on the same backend.
	be, err := openBackend(*backend)
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	var eng *decide.Engine
	if *modelDir == "" {
		eng, err = decide.OpenFS(startlux.DemoModel(), daemon.DemoPath, be, decide.Options{})
	} else {
		eng, err = decide.Open(*modelDir, be, decide.Options{})
	}
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	defer eng.Close()

	reqs := make([]*decide.Request, len(benchServeRequests))
	raws := make([]msgpack.RawMessage, len(benchServeRequests))
	for i, js := range benchServeRequests {
		if reqs[i], err = decide.ParseJSON([]byte(js)); err != nil {
			return fmt.Errorf("bench serve: request %d: %w", i, err)
		}
		if raws[i], err = ipc.FromJSON([]byte(js)); err != nil {
			return fmt.Errorf("bench serve: request %d: %w", i, err)
		}
	}
	inProcess := func(i int) error { _, err := eng.Decide(ctx, reqs[i%len(reqs)]); return err }
	clientsConns := make([]*ipc.Client, *clients)
	for i := range clientsConns {
		if clientsConns[i], err = ipc.Dial(ctx, sock); err != nil {
			return fmt.Errorf("bench serve: %w", err)
		}
		defer clientsConns[i].Close()
	}
	viaSocket := func(c *ipc.Client) func(int) error {
		return func(i int) error {
			var resp decide.Response
			return c.Call(ctx, daemon.MethodDecide, raws[i%len(raws)], &resp)
		}
	}
	// Warm both sides (the evidence snapshots, first-use costs).
	if _, err := measure(ctx, 2*len(reqs), 1, func(int) func(int) error { return inProcess }); err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	if _, err := measure(ctx, 2*len(reqs), 1, func(int) func(int) error { return viaSocket(ctl) }); err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}

	// In-process and one-client calls alternate request by request, so that
	// load from elsewhere on the machine falls on both alike.
	var local, one, many []benchResult
	for r := 0; r < *rounds; r++ {
		lr, or, err := measurePaired(ctx, *n, inProcess, viaSocket(ctl))
		if err != nil {
			return fmt.Errorf("bench serve: %w", err)
		}
		local, one = append(local, lr), append(one, or)
		res, err := measure(ctx, *n, *clients, func(g int) func(int) error { return viaSocket(clientsConns[g]) })
		if err != nil {
			return fmt.Errorf("bench serve: %d clients: %w", *clients, err)
		}
		many = append(many, res)
	}
	l, o, m := medianResult(local), medianResult(one), medianResult(many)
	model := "the embedded demo model"
	if *modelDir != "" {
		model = *modelDir
	}
	batching := "default"
	if *maxBatch > 0 {
		batching = fmt.Sprint(*maxBatch)
	}
	fmt.Fprintf(env.stdout, "bench serve: %s, %d request shapes, %d requests per measurement, median of %d rounds, max batch %s\n",
		model, len(reqs), *n, *rounds, batching)
	fmt.Fprintf(env.stdout, "  %-22s %10s %10s %10s %10s\n", "", "req/s", "mean ms", "p50 ms", "p99 ms")
	for _, row := range []struct {
		name string
		r    benchResult
	}{{"in-process Decide", l}, {"socket, 1 client", o}, {fmt.Sprintf("socket, %d clients", *clients), m}} {
		fmt.Fprintf(env.stdout, "  %-22s %10.1f %10.3f %10.3f %10.3f\n", row.name, row.r.throughput, row.r.mean, row.r.p50, row.r.p99)
	}
	fmt.Fprintf(env.stdout, "  socket overhead at 1 client: %+.1f%% of the mean (%+.3f ms), %+.1f%% of the p50 (goal: under 10%%)\n",
		100*(o.mean-l.mean)/l.mean, o.mean-l.mean, 100*(o.p50-l.p50)/l.p50)
	fmt.Fprintf(env.stdout, "  %d clients vs 1: %.2fx the throughput\n", *clients, m.throughput/o.throughput)
	return nil
}

// startBenchDaemon runs a daemon on a socket in a private temporary
// directory and returns the socket and a function that stops the daemon.
func startBenchDaemon(ctx context.Context, modelDir, backend string, maxBatch, passTokens int) (string, func(), error) {
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
			Load:  daemon.DecideLoader(daemon.LoaderOptions{Backend: func() (tensor.Backend, error) { return openBackend(backend) }}),
			Model: modelDir, ModelsDir: tmp, MaxBatch: maxBatch, PassTokens: passTokens,
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
func waitReady(ctx context.Context, c *ipc.Client) (daemon.Status, error) {
	var st daemon.Status
	for st.State != daemon.StateReady {
		if err := c.Call(ctx, daemon.MethodStatus, nil, &st); err != nil {
			return st, err
		}
		if st.State == daemon.StateFailed {
			return st, errors.New(st.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return st, nil
}

// benchResult is one measurement: requests per second and per-request
// latency (mean and percentiles, in ms).
type benchResult struct {
	throughput, mean, p50, p99 float64
}

// measure runs n requests split over `workers` goroutines (worker g calls
// fn(g) for its request function) and times each.
func measure(ctx context.Context, n, workers int, fn func(g int) func(int) error) (benchResult, error) {
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
		return benchResult{}, err
	}
	return summarize(lat, wall), nil
}

// measurePaired runs n requests through a and through b, alternating, and
// times each; throughput is over the time spent in each.
func measurePaired(ctx context.Context, n int, a, b func(int) error) (benchResult, benchResult, error) {
	la, lb := make([]time.Duration, n), make([]time.Duration, n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return benchResult{}, benchResult{}, err
		}
		for _, side := range []struct {
			call func(int) error
			lat  []time.Duration
		}{{a, la}, {b, lb}} {
			t0 := time.Now()
			if err := side.call(i); err != nil {
				return benchResult{}, benchResult{}, err
			}
			side.lat[i] = time.Since(t0)
		}
	}
	return summarize(la, 0), summarize(lb, 0), nil
}

// summarize turns latencies into a result; wall is the elapsed time of
// concurrent requests (0: the latencies ran one after another).
func summarize(lat []time.Duration, wall time.Duration) benchResult {
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
	return benchResult{
		throughput: float64(len(lat)) / wall.Seconds(),
		mean:       msOf(sum) / float64(len(lat)),
		p50:        msOf(pct(0.50)),
		p99:        msOf(pct(0.99)),
	}
}

// medianResult takes the median of each figure over rounds.
func medianResult(rs []benchResult) benchResult {
	med := func(get func(benchResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	return benchResult{
		throughput: med(func(r benchResult) float64 { return r.throughput }),
		mean:       med(func(r benchResult) float64 { return r.mean }),
		p50:        med(func(r benchResult) float64 { return r.p50 }),
		p99:        med(func(r benchResult) float64 { return r.p99 }),
	}
}
