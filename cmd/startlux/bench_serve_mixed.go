package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
	"github.com/vmihailenco/msgpack/v5"
)

// mixedParams is what "bench serve --mixed" measures with.
type mixedParams struct {
	sock     string
	ctl      *ipc.Client
	status   daemon.Status
	modelDir string
	backend  string
	requests int // small requests per measurement
	rounds   int
}

// benchServeMixed is "startlux bench serve --mixed": the latency of small
// requests (benchServeRequests, one client, one at a time) while another
// client sends maximal requests one after another, against the same small
// requests with nothing else running. The two alternate round by round, so
// that load from elsewhere on the machine falls on both alike; the goal is a
// p99 at most three times the unloaded one.
func benchServeMixed(ctx context.Context, env *cmdEnv, p mixedParams) error {
	large, tokens, err := maximalRequest(p)
	if err != nil {
		return fmt.Errorf("bench serve --mixed: %w", err)
	}
	smalls := make([]msgpack.RawMessage, len(benchServeRequests))
	for i, js := range benchServeRequests {
		if smalls[i], err = ipc.FromJSON([]byte(js)); err != nil {
			return fmt.Errorf("bench serve --mixed: request %d: %w", i, err)
		}
	}
	small, err := ipc.Dial(ctx, p.sock)
	if err != nil {
		return fmt.Errorf("bench serve --mixed: %w", err)
	}
	defer small.Close()
	bigC, err := ipc.Dial(ctx, p.sock)
	if err != nil {
		return fmt.Errorf("bench serve --mixed: %w", err)
	}
	defer bigC.Close()
	call := func(i int) error {
		var resp decide.Response
		return small.Call(ctx, daemon.MethodDecide, smalls[i%len(smalls)], &resp)
	}
	if _, err := measure(ctx, 2*len(smalls), 1, func(int) func(int) error { return call }); err != nil { // warm
		return fmt.Errorf("bench serve --mixed: %w", err)
	}
	var alone, loaded []benchResult
	var larges int
	var largeTime time.Duration
	for range p.rounds {
		r, err := measure(ctx, p.requests, 1, func(int) func(int) error { return call })
		if err != nil {
			return fmt.Errorf("bench serve --mixed: %w", err)
		}
		alone = append(alone, r)
		n, took, r, err := underLarge(ctx, bigC, large, func() (benchResult, error) {
			return measure(ctx, p.requests, 1, func(int) func(int) error { return call })
		})
		if err != nil {
			return fmt.Errorf("bench serve --mixed: %w", err)
		}
		loaded = append(loaded, r)
		larges += n
		largeTime += took
	}
	a, l := medianResult(alone), medianResult(loaded)
	model := "the embedded demo model"
	if p.modelDir != "" {
		model = p.modelDir
	}
	lim := p.status.Limits
	fmt.Fprintf(env.stdout, "bench serve --mixed: %s, %d small requests per measurement, median of %d rounds\n", model, p.requests, p.rounds)
	fmt.Fprintf(env.stdout, "  the large request: %d questions rendering %d tokens (limits: %d questions, %d tokens)\n",
		lim.MaxQuestions, tokens, lim.MaxQuestions, lim.MaxRequestTokens)
	fmt.Fprintf(env.stdout, "  %-34s %10s %10s %10s\n", "small requests", "mean ms", "p50 ms", "p99 ms")
	fmt.Fprintf(env.stdout, "  %-34s %10.3f %10.3f %10.3f\n", "alone", a.mean, a.p50, a.p99)
	fmt.Fprintf(env.stdout, "  %-34s %10.3f %10.3f %10.3f\n", "while a client sends large ones", l.mean, l.p50, l.p99)
	fmt.Fprintf(env.stdout, "  p99 under load: %.2fx the unloaded p99 (goal: at most 3x); p50 %.2fx\n", l.p99/a.p99, l.p50/a.p50)
	if larges > 0 {
		fmt.Fprintf(env.stdout, "  large requests meanwhile: %d, %.2f s each\n", larges, largeTime.Seconds()/float64(larges))
	}
	return nil
}

// underLarge runs measure while bigC sends large one after another (the
// first sent before measure starts, the last answered after it ends) and
// returns how many large ones were answered, the time they took, and what
// measure found.
func underLarge(ctx context.Context, bigC *ipc.Client, large msgpack.RawMessage, measure func() (benchResult, error)) (int, time.Duration, benchResult, error) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n int
	var took time.Duration
	var bigErr error
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		first := true
		for {
			t0 := time.Now()
			done := make(chan error, 1)
			go func() {
				var resp decide.Response
				done <- bigC.Call(ctx, daemon.MethodDecide, large, &resp)
			}()
			if first {
				time.Sleep(20 * time.Millisecond) // let its first passes start
				close(started)
				first = false
			}
			if err := <-done; err != nil {
				bigErr = err
				return
			}
			n++
			took += time.Since(t0)
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	<-started
	r, err := measure()
	close(stop)
	wg.Wait()
	if err == nil {
		err = bigErr
	}
	return n, took, r, err
}

// maximalRequest builds the largest request the daemon's limits allow:
// max_questions questions, each with instructions of its own (so that no
// prefix is shared and everything is computed), their rows together just
// under max_request_tokens. The rows are sized with the model itself.
func maximalRequest(p mixedParams) (msgpack.RawMessage, int, error) {
	be, err := openBackend(p.backend)
	if err != nil {
		return nil, 0, err
	}
	var eng *decide.Engine
	if p.modelDir == "" {
		eng, err = decide.OpenFS(startlux.DemoModel(), daemon.DemoPath, be, decide.Options{CacheLimit: -1})
	} else {
		eng, err = decide.Open(p.modelDir, be, decide.Options{CacheLimit: -1})
	}
	if err != nil {
		return nil, 0, err
	}
	defer eng.Close()
	lim := p.status.Limits
	build := func(reps int) string {
		qs := make([]string, lim.MaxQuestions)
		for i := range qs {
			qs[i] = fmt.Sprintf(`"q%d": {"type": "noul", "instructions": "Question %d: %s?"}`, i, i, strings.Repeat("is the item in the list red or blue ", reps))
		}
		return `{"evidence": {"list": [1, 2, 3]}, "questions": {` + strings.Join(qs, ", ") + `}}`
	}
	tokensOf := func(reps int) (int, error) {
		r, err := decide.ParseJSON([]byte(build(reps)))
		if err != nil {
			return 0, err
		}
		prep, err := eng.Prepare(r)
		if err != nil {
			return 0, err
		}
		return prep.Tokens(), nil
	}
	// The most repetitions that fit, by bisection.
	lo, hi := 0, 1
	for {
		if _, err := tokensOf(hi); err != nil {
			break
		}
		lo, hi = hi, 2*hi
		if hi > 1<<16 {
			return nil, 0, fmt.Errorf("no request reaches the limits")
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if _, err := tokensOf(mid); err != nil {
			hi = mid
		} else {
			lo = mid
		}
	}
	n, err := tokensOf(lo)
	if err != nil {
		return nil, 0, err
	}
	raw, err := ipc.FromJSON([]byte(build(lo)))
	return raw, n, err
}
