package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
	"github.com/vmihailenco/msgpack/v5"
)

// MixedResult is what "bench serve --mixed" measured: the small requests'
// latency alone and while another client sends maximal requests (medians
// over the rounds), and the large requests answered meanwhile.
type MixedResult struct {
	Alone, Loaded ServeResult
	// LargeTokens is the large request's rendered tokens; Limits the
	// daemon's limits it was built against.
	LargeTokens int
	Limits      api.Limits
	// Larges and LargeSeconds count the large requests answered during the
	// loaded measurements and their mean time.
	Larges       int
	LargeSeconds float64
}

// serveMixed measures the latency of small requests (benchServeRequests,
// one client, one at a time) while another client sends maximal requests one
// after another, against the same small requests with nothing else running.
// The two alternate round by round, so that load from elsewhere on the
// machine falls on both alike; the goal is a p99 at most three times the
// unloaded one.
func serveMixed(ctx context.Context, env Env, o ServeOptions, sock string, st api.Status) (*MixedResult, error) {
	large, tokens, err := maximalRequest(env, o, st.Limits)
	if err != nil {
		return nil, err
	}
	smalls := make([]msgpack.RawMessage, len(benchServeRequests))
	for i, js := range benchServeRequests {
		if smalls[i], err = ipc.FromJSON([]byte(js)); err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
	}
	small, err := ipc.Dial(ctx, sock)
	if err != nil {
		return nil, err
	}
	defer small.Close()
	bigC, err := ipc.Dial(ctx, sock)
	if err != nil {
		return nil, err
	}
	defer bigC.Close()
	call := func(i int) error {
		var resp api.Response
		return small.Call(ctx, api.MethodDecide, smalls[i%len(smalls)], &resp)
	}
	if _, err := measure(ctx, 2*len(smalls), 1, func(int) func(int) error { return call }); err != nil { // warm
		return nil, err
	}
	var alone, loaded []ServeResult
	var larges int
	var largeTime time.Duration
	for r := range o.Rounds {
		env.logf("bench serve --mixed: round %d of %d\n", r+1, o.Rounds)
		a, err := measure(ctx, o.Requests, 1, func(int) func(int) error { return call })
		if err != nil {
			return nil, err
		}
		alone = append(alone, a)
		n, took, l, err := underLarge(ctx, bigC, large, func() (ServeResult, error) {
			return measure(ctx, o.Requests, 1, func(int) func(int) error { return call })
		})
		if err != nil {
			return nil, err
		}
		loaded = append(loaded, l)
		larges += n
		largeTime += took
	}
	res := &MixedResult{Alone: medianResult(alone), Loaded: medianResult(loaded), LargeTokens: tokens, Limits: st.Limits, Larges: larges}
	if larges > 0 {
		res.LargeSeconds = largeTime.Seconds() / float64(larges)
	}
	return res, nil
}

func (m *MixedResult) print(p *printer, model string, o ServeOptions) {
	p.printf("bench serve --mixed: %s, %d small requests per measurement, median of %d rounds\n", model, o.Requests, o.Rounds)
	p.printf("  the large request: %d questions rendering %d tokens (limits: %d questions, %d tokens)\n",
		m.Limits.MaxQuestions, m.LargeTokens, m.Limits.MaxQuestions, m.Limits.MaxRequestTokens)
	p.printf("  %-34s %10s %10s %10s\n", "small requests", "mean ms", "p50 ms", "p99 ms")
	p.printf("  %-34s %10.3f %10.3f %10.3f\n", "alone", m.Alone.Mean, m.Alone.P50, m.Alone.P99)
	p.printf("  %-34s %10.3f %10.3f %10.3f\n", "while a client sends large ones", m.Loaded.Mean, m.Loaded.P50, m.Loaded.P99)
	p.printf("  p99 under load: %.2fx the unloaded p99 (goal: at most 3x); p50 %.2fx\n", m.Loaded.P99/m.Alone.P99, m.Loaded.P50/m.Alone.P50)
	if m.Larges > 0 {
		p.printf("  large requests meanwhile: %d, %.2f s each\n", m.Larges, m.LargeSeconds)
	}
}

// underLarge runs measure while bigC sends large one after another (the
// first sent before measure starts, the last answered after it ends) and
// returns how many large ones were answered, the time they took, and what
// measure found.
func underLarge(ctx context.Context, bigC *ipc.Client, large msgpack.RawMessage, measure func() (ServeResult, error)) (int, time.Duration, ServeResult, error) {
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
				var resp api.Response
				done <- bigC.Call(ctx, api.MethodDecide, large, &resp)
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
func maximalRequest(env Env, o ServeOptions, lim api.Limits) (msgpack.RawMessage, int, error) {
	be, err := env.Open(0)
	if err != nil {
		return nil, 0, err
	}
	eng, err := daemon.OpenEngine(o.Model, be, decide.Options{CacheLimit: -1})
	if err != nil {
		return nil, 0, err
	}
	defer eng.Close()
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
