package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/tensor"
)

// loadLog records, in order, the fit checks ("fit") and the loads ("load")
// a daemon makes.
type loadLog struct {
	mu     sync.Mutex // guards events
	events []string
}

func (l *loadLog) add(ev string) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
}

func (l *loadLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// loads counts the loads so far.
func (l *loadLog) loads() int {
	return len(slices.DeleteFunc(l.get(), func(ev string) bool { return ev != "load" }))
}

// TestFitCheckEveryLoad: the loads the daemon makes by itself are held to
// the machine's memory first, as a load asked for is: the load again on the
// fallback backend after a warm-up that faults on the GPU, the reload off a
// GPU that faults at run time, and the reload of an unloaded model for the
// decision that finds it gone. Each comes after its own fit check, and when
// the machine no longer has the memory the check refuses it with both
// numbers and the loader is not called.
func TestFitCheckEveryLoad(t *testing.T) {
	for _, path := range []string{"warm-up fault", "run-time fault", "unloaded"} {
		for _, fits := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, fits %v", path, fits), func(t *testing.T) {
				testFitCheckEveryLoad(t, path, fits)
			})
		}
	}
}

func testFitCheckEveryLoad(t *testing.T, path string, fits bool) {
	fl := newFakeLoader()
	first := &faultyEngine{fakeEngine: fl.engine(""), canFallBack: true, faulty: path == "warm-up fault"}
	log := &loadLog{}
	machine := &fakeMachine{}
	machine.set(8e9, 0)
	estimate := func(ctx context.Context, dir string, useInt8 bool) (Footprint, error) {
		log.add("fit")
		return Footprint{Weights: 1e9, Pass: 2e8, Cache: 1e8, Scratch: 1e8}, nil
	}
	load := func(ctx context.Context, dir string, useInt8 bool, progress func(done, total int64)) (Engine, api.ModelStatus, error) {
		n := log.loads()
		log.add("load")
		if n == 0 && path != "unloaded" {
			if !fits && path == "warm-up fault" {
				machine.set(1e9, 0) // the memory goes while the GPU warms up
			}
			return first, api.ModelStatus{Name: "demo", Backend: "gpu"}, nil
		}
		return fl.engine(""), api.ModelStatus{Name: "demo", Backend: "cpu", BackendNote: "moved"}, nil
	}
	sock := startDaemon(t, Options{Load: load, Estimate: estimate, Memory: machine.get, ModelsDir: t.TempDir(), MaxDeviceFaults: 1})
	c := dial(t, sock)
	ctx := context.Background()
	st := waitSettled(t, c)
	ask := func(i int) error {
		var resp api.Response
		return c.Call(ctx, api.MethodDecide, params(t, request(i)), &resp)
	}
	const refusal = "not enough memory: the model needs 1.4 GB, 1.0 GB available"
	switch path {
	case "warm-up fault":
		// Settled already: loaded, faulted in its warm-up, loaded again
		// or refused.
	case "run-time fault":
		if st.State != api.StateReady || st.Model.Backend != "gpu" {
			t.Fatalf("before the fault: state %s (%s), %+v", st.State, st.Error, st.Model)
		}
		if !fits {
			machine.set(1e9, 0)
		}
		first.set(true)
		if err := ask(1); err == nil {
			t.Fatal("a batch on the faulting GPU was answered")
		}
		waitFor(t, func() bool { st = status(t, c); return st.Model.Backend == "cpu" || st.Error != "" })
	case "unloaded":
		if err := c.Call(ctx, api.MethodUnload, nil, nil); err != nil {
			t.Fatal(err)
		}
		if !fits {
			machine.set(1e9, 0)
		}
		err := ask(1)
		switch {
		case fits && err != nil:
			t.Fatalf("the decision that reloads: %v", err)
		case !fits && (err == nil || !strings.Contains(err.Error(), refusal)):
			t.Fatalf("the decision whose reload cannot fit: %v, want the refusal %q", err, refusal)
		}
		st = waitSettled(t, c)
	}
	want := []string{"fit", "load", "fit", "load"}
	if !fits {
		want = want[:3]
	}
	if got := log.get(); !slices.Equal(got, want) {
		t.Errorf("fit checks and loads %q, want %q", got, want)
	}
	switch {
	case fits && path == "unloaded":
		if st.State != api.StateReady || st.Memory.Needs != 1.4e9 {
			t.Errorf("after the reload: state %s (%s), needs %d", st.State, st.Error, st.Memory.Needs)
		}
	case fits:
		if st.State != api.StateReady || st.Model.Backend != "cpu" || st.Model.BackendNote != "moved" || st.Memory.Needs != 1.4e9 {
			t.Errorf("after the fallback: state %s (%s), %+v, needs %d", st.State, st.Error, st.Model, st.Memory.Needs)
		}
	case !strings.Contains(st.Error, refusal):
		t.Errorf("state %s, error %q; want the refusal %q", st.State, st.Error, refusal)
	case path == "run-time fault" && (st.State != api.StateReady || st.Model.Backend != "gpu"):
		// Nothing else to serve on: the model on the GPU stays, status
		// saying why it could not move.
		t.Errorf("after the refused reload: state %s, %+v", st.State, st.Model)
	case path != "run-time fault" && st.State != api.StateFailed:
		t.Errorf("after the refused load: state %s, want failed", st.State)
	}
}

// TestFallbackPoolLimit: the backend a load falls back to (the one asked
// for does not open) has its pool of freed buffers bounded by ScratchLimit,
// as the one asked for would have, and closing the engine empties it.
func TestFallbackPoolLimit(t *testing.T) {
	var fallback tensor.Backend
	lo := LoaderOptions{
		ScratchLimit: 12345,
		Backend:      func() (tensor.Backend, error) { return nil, errors.New("no GPU here") },
		Fallback: func() (tensor.Backend, error) {
			be, err := cpu.New(cpu.Options{})
			fallback = be
			return be, err
		},
	}
	eng, st, err := DecideLoader(lo)(context.Background(), "", false, func(int64, int64) {})
	if err != nil {
		t.Fatal(err)
	}
	m := engineMemory(eng)
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.BackendNote, "no GPU here") || m.ScratchLimit != 12345 || m.Weights <= 0 {
		t.Errorf("fallback load: %+v, memory %+v; want the note, the scratch limit 12345 and the weights", st, m)
	}
	if held, limit := fallback.(tensor.Pooler).PoolStats(); held != 0 || limit != 0 {
		t.Errorf("after Close the fallback's pool holds %d bytes of %d", held, limit)
	}
}
