package daemon

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
)

// TestSmallNotHeldBehindLarge: while a large request's passes run, small
// requests from other clients each wait for at most one of them: between a
// small batch asking for its turn and running, at most one pass of the large
// one starts. (Counted in passes, so machine load cannot change it.)
func TestSmallNotHeldBehindLarge(t *testing.T) {
	fl := newFakeLoader()
	fl.delay = 5 * time.Millisecond
	eng := fl.engine("")
	path := startDaemon(t, Options{Load: fl.load, NoWarmup: true})
	ctx := context.Background()
	big, small := dial(t, path), dial(t, path)
	var st api.Status
	waitFor(t, func() bool { big.Call(ctx, api.MethodStatus, nil, &st); return st.State == api.StateReady })

	bigDone := make(chan error, 1)
	go func() {
		bigDone <- big.Call(ctx, api.MethodDecide, params(t, `{"evidence": 1, "questions": {"large": {"type": "noul", "instructions": "big:20000"}}}`), nil)
	}()
	logLen := func() int { eng.mu.Lock(); defer eng.mu.Unlock(); return len(eng.passLog) }
	waitFor(t, func() bool { return logLen() > 10 })
	for i := range 5 {
		req := fmt.Sprintf(`{"evidence": %d, "questions": {"small%d": {"type": "noul", "instructions": "Is it?"}}}`, i, i)
		if err := small.Call(ctx, api.MethodDecide, params(t, req), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-bigDone; err != nil {
		t.Fatal(err)
	}
	eng.mu.Lock()
	log := append([]string(nil), eng.passLog...)
	eng.mu.Unlock()
	for i := range 5 {
		name := fmt.Sprintf("small%d", i)
		ask, ran := -1, -1
		for k, e := range log {
			if e == "ask "+name && ask < 0 {
				ask = k
			}
			if e == name && ran < 0 {
				ran = k
			}
		}
		if ask < 0 || ran < 0 {
			t.Fatalf("%s: no pass in the log %v", name, log)
		}
		held := 0
		for _, e := range log[ask:ran] {
			if e == "large" {
				held++
			}
		}
		if held > 1 {
			t.Errorf("%s waited for %d passes of the large request (log %v)", name, held, log[ask:ran+1])
		}
	}
}

// TestSmallLatencyBehindLarge measures, on the demo model, a small
// request's latency alone and while another client's large request runs;
// the ratio of the medians must stay within a generous bound (the large
// request runs a hundred times as long as a small one or more, which is what
// the small ones waited before passes took turns).
func TestSmallLatencyBehindLarge(t *testing.T) {
	path := startDemoDaemon(t)
	ctx := context.Background()
	bigC, smallC := dial(t, path), dial(t, path)
	smallReq := func(i int) string {
		return fmt.Sprintf(`{"evidence": {"name": "Ada", "n": %d}, "questions": {"q": {"type": "noul", "instructions": "Does Ada live in London?"}}}`, i)
	}
	timeSmall := func(i int) time.Duration {
		t0 := time.Now()
		var resp api.Response
		if err := smallC.Call(ctx, api.MethodDecide, params(t, smallReq(i)), &resp); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	median := func(ds []time.Duration) time.Duration {
		ds = append([]time.Duration(nil), ds...)
		sort.Slice(ds, func(a, b int) bool { return ds[a] < ds[b] })
		return ds[len(ds)/2]
	}
	timeSmall(-1) // warm
	var alone []time.Duration
	for i := range 7 {
		alone = append(alone, timeSmall(i))
	}
	// 24 questions with their own long instructions: some 7,000 tokens to
	// compute, no shared prefix to save them.
	var qs []string
	for i := range 24 {
		qs = append(qs, fmt.Sprintf(`"q%d": {"type": "noul", "instructions": "%d %s?"}`, i, i, strings.Repeat("is the item in the list red or blue ", 28)))
	}
	bigReq := `{"evidence": {"list": [1, 2, 3]}, "questions": {` + strings.Join(qs, ", ") + `}}`
	bigDone := make(chan time.Duration, 1)
	t0 := time.Now()
	go func() {
		var resp api.Response
		if err := bigC.Call(ctx, api.MethodDecide, params(t, bigReq), &resp); err != nil {
			t.Error(err)
		}
		bigDone <- time.Since(t0)
	}()
	time.Sleep(50 * time.Millisecond)
	var behind []time.Duration
	for i := 0; i < 7; i++ {
		behind = append(behind, timeSmall(100+i))
	}
	bigTook := <-bigDone
	ratio := float64(median(behind)) / float64(median(alone))
	t.Logf("small request alone %v, behind the large one %v (%.1fx); the large one took %v", median(alone), median(behind), ratio, bigTook)
	if sum := behind[0] + behind[1] + behind[2] + behind[3] + behind[4] + behind[5] + behind[6]; sum > bigTook {
		t.Errorf("seven small requests behind the large one took %v, longer than the large one (%v): they did not run between its passes", sum, bigTook)
	}
	if ratio > 20 {
		t.Errorf("a small request took %.1fx as long behind a large one as alone (%v against %v), want at most 20x", ratio, median(behind), median(alone))
	}
}

// TestAbandonedBatch: a large request whose client went away stops between
// passes instead of running to its end.
func TestAbandonedBatch(t *testing.T) {
	fl := newFakeLoader()
	fl.delay = 5 * time.Millisecond
	eng := fl.engine("")
	path := startDaemon(t, Options{Load: fl.load, NoWarmup: true})
	ctx := context.Background()
	c := dial(t, path)
	var st api.Status
	waitFor(t, func() bool { c.Call(ctx, api.MethodStatus, nil, &st); return st.State == api.StateReady })
	go c.Call(ctx, api.MethodDecide, params(t, `{"evidence": 1, "questions": {"large": {"type": "noul", "instructions": "big:40000"}}}`), nil)
	passes := func() int {
		eng.mu.Lock()
		defer eng.mu.Unlock()
		n := 0
		for _, e := range eng.passLog {
			if e == "large" {
				n++
			}
		}
		return n
	}
	waitFor(t, func() bool { return passes() >= 5 })
	c.Close()
	waitFor(t, func() bool { eng.mu.Lock(); defer eng.mu.Unlock(); return eng.active == 0 })
	if n := passes(); n >= 400 {
		t.Errorf("the abandoned request ran all its %d passes", n)
	}
	// Its tokens are given back.
	d := dial(t, path)
	waitFor(t, func() bool { d.Call(ctx, api.MethodStatus, nil, &st); return st.TokensInFlight == 0 })
}
