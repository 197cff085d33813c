package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
)

// waitStatus polls the daemon's status until cond holds (loads on the
// emulator take seconds) and returns it.
func waitStatus(t *testing.T, c *ipc.Client, cond func(st api.Status) bool) api.Status {
	t.Helper()
	var st api.Status
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := c.Call(context.Background(), api.MethodStatus, nil, &st); err != nil {
			t.Fatal(err)
		}
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status not reached in 2 minutes: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSettled waits until the daemon is ready or failed and returns its
// status.
func waitSettled(t *testing.T, c *ipc.Client) api.Status {
	t.Helper()
	return waitStatus(t, c, func(st api.Status) bool { return st.State == api.StateReady || st.State == api.StateFailed })
}

// checkDemoAnswers asks the daemon the first two golden requests and holds
// the answers to the goldens (made by transformers on the CPU, fp32) and to
// the CPU backend's own answers in-process.
func checkDemoAnswers(t *testing.T, c *ipc.Client) { checkDemoAnswersTol(t, c, 1e-4, 1e-6) }

// checkDemoAnswersTol is checkDemoAnswers with the tolerances of the
// probabilities against the goldens and against the CPU backend.
func checkDemoAnswersTol(t *testing.T, c *ipc.Client, golden, cpuTol float64) {
	t.Helper()
	cases := loadGoldens(t)[:2]
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var lo LoaderOptions
	ref, err := (&decideLoader{lo: lo}).openEngine("", be, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for i := range cases {
		var resp api.Response
		if err := c.Call(context.Background(), api.MethodDecide, params(t, string(cases[i].Request)), &resp); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if err := checkGolden(&resp, &cases[i], golden); err != nil {
			t.Errorf("case %d against the goldens: %v", i, err)
		}
		r, err := decide.ParseJSON(cases[i].Request)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.Decide(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameAnswers(&resp, WireResponse(want), cpuTol); err != nil {
			t.Errorf("case %d against the CPU backend: %v", i, err)
		}
	}
}
