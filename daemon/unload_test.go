package daemon

import (
	"context"
	"github.com/startlux/startlux/api"
	"testing"
	"time"
)

// TestIdleUnload: with --idle-unload the model goes once no decision has
// come for that long (status: unloaded, idle since the last answer, the
// engine closed, the socket still answering); the next decision loads it
// again and waits for it; the unload method does the same at once; a
// decision running when it is asked finishes on the model first; and
// configure changes the setting (0: never).
func TestIdleUnload(t *testing.T) {
	fl := newFakeLoader()
	path := startDaemon(t, Options{Load: fl.load, IdleUnload: 150 * time.Millisecond})
	c := dial(t, path)
	ctx := context.Background()
	decideOK := func(n int) {
		t.Helper()
		var resp api.Response
		if err := c.Call(ctx, api.MethodDecide, params(t, request(n)), &resp); err != nil {
			t.Fatal(err)
		}
		if err := checkAnswer(t, &resp, []int{1}, request(n)); err != nil {
			t.Fatal(err)
		}
	}
	decideOK(1)
	answered := time.Now()
	if st := status(t, c); st.State != api.StateReady || st.IdleUnloadS != 0.15 {
		t.Fatalf("status %s, idle_unload_s %v", st.State, st.IdleUnloadS)
	}
	waitFor(t, func() bool { return status(t, c).State == api.StateUnloaded })
	st := status(t, c)
	since, err := time.Parse(time.RFC3339, st.IdleSince)
	if err != nil || since.After(answered.Add(time.Second)) || since.Before(answered.Add(-2*time.Second)) {
		t.Errorf("idle_since %q (%v), the last answer at %v", st.IdleSince, err, answered)
	}
	if time.Since(answered) < 150*time.Millisecond {
		t.Errorf("unloaded %v after the last answer, before the idle time", time.Since(answered))
	}
	first := fl.all("")
	if len(first) != 1 || !first[0].isClosed() {
		t.Fatal("the unloaded engine was not closed")
	}
	if st.Model.Name != "demo-decision" || st.Memory.Weights != 0 {
		t.Errorf("unloaded status: model %q, memory %+v", st.Model.Name, st.Memory)
	}

	// The next decision reloads, waiting as during any load.
	fl.loadGate = make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); decideOK(2) }()
	waitFor(t, func() bool { st := status(t, c); return st.State == api.StateLoading && st.Queued == 1 })
	close(fl.loadGate)
	<-done
	fl.loadGate = nil
	if es := fl.all(""); len(es) != 2 || es[1].isClosed() {
		t.Fatalf("%d engines after the reload", len(es))
	}

	// configure: 0 is never.
	var cst api.Status
	if err := c.Call(ctx, api.MethodConfigure, map[string]any{"idle_unload_s": 0}, &cst); err != nil || cst.IdleUnloadS != 0 {
		t.Fatalf("configure: %v, %v", err, cst.IdleUnloadS)
	}
	time.Sleep(400 * time.Millisecond)
	if st := status(t, c); st.State != api.StateReady {
		t.Fatalf("unloaded with idle unload off: %s", st.State)
	}
	if err := c.Call(ctx, api.MethodConfigure, map[string]any{"idle_unload_s": -1}, nil); api.ErrorCode(err) != api.CodeInvalidParams {
		t.Errorf("configure with a negative time: %v", err)
	}

	// The unload method, while a decision runs: it finishes on the model,
	// which closes after it.
	eng := fl.all("")[1]
	eng.gate = make(chan struct{})
	running := make(chan struct{})
	go func() { defer close(running); decideOK(3) }()
	waitFor(t, func() bool { eng.mu.Lock(); defer eng.mu.Unlock(); return eng.active == 1 })
	unloaded := make(chan error, 1)
	go func() { unloaded <- c.Call(ctx, api.MethodUnload, nil, nil) }()
	waitFor(t, func() bool { return status(t, c).State == api.StateUnloaded })
	if eng.isClosed() {
		t.Fatal("closed while a decision ran on it")
	}
	close(eng.gate)
	<-running
	if err := <-unloaded; err != nil {
		t.Fatal(err)
	}
	if !eng.isClosed() || len(eng.problems()) > 0 {
		t.Errorf("after the unload: closed %v, misuse %v", eng.isClosed(), eng.problems())
	}
	decideOK(4)
	if st := status(t, c); st.State != api.StateReady || len(fl.all("")) != 3 {
		t.Errorf("after a decision on the unloaded daemon: %s, %d engines", st.State, len(fl.all("")))
	}
}
