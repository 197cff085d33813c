package daemon

import (
	"context"
	"github.com/startlux/startlux/api"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/decide"
)

// fakeMachine is an injected memory size that a test changes as it goes.
type fakeMachine struct {
	mu  sync.Mutex // guards mem
	mem Memory
}

func (m *fakeMachine) get() Memory {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mem
}

func (m *fakeMachine) set(avail, gpu int64) {
	m.mu.Lock()
	m.mem = Memory{Known: true, Total: 16e9, Available: avail, GPUWorkingSet: gpu}
	m.mu.Unlock()
}

// fakeSizes is an Estimator over fixed footprints, by directory.
func fakeSizes(needs map[string]int64) Estimator {
	return func(ctx context.Context, dir string, useInt8 bool) (Footprint, error) {
		return Footprint{Weights: needs[dir] / 2, Pass: needs[dir] / 4, Cache: needs[dir] / 8, Scratch: needs[dir] - needs[dir]/2 - needs[dir]/4 - needs[dir]/8}, nil
	}
}

// TestFitCheck holds loads to an injected memory size: a model that cannot
// fit is refused at start and on a switch with both numbers, the one in
// service staying; one that fits leaves no warning unless it leaves less
// than the margin; one that fits only without the model in service has
// that model released (and closed) before its load begins, decisions
// waiting meanwhile with status saying why; and Metal's working set bounds
// what is loaded beside the model in service as well.
func TestFitCheck(t *testing.T) {
	models := t.TempDir()
	a, b, huge, broken := filepath.Join(models, "a"), filepath.Join(models, "b"), filepath.Join(models, "huge"), filepath.Join(models, "broken")
	for _, dir := range []string{a, b, huge, broken} {
		os.Mkdir(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644)
		os.WriteFile(filepath.Join(dir, "decision_config.json"), []byte("{}"), 0o644)
	}
	fl := newFakeLoader()
	fl.weights = map[string]int64{a: 3e9, b: 3e9, "": 1e9}
	fl.fail = broken
	machine := &fakeMachine{}
	machine.set(1e9, 0)
	path := startDaemon(t, Options{Load: fl.load, Model: a, ModelsDir: models, Memory: machine.get,
		Estimate: fakeSizes(map[string]int64{a: 2e9, b: 4e9, huge: 6e9, broken: 4e9, "": 1.5e9})})
	c := dial(t, path)
	ctx := context.Background()

	// At start: 2 GB needed, 1 GB available.
	waitFor(t, func() bool { return status(t, c).State == api.StateFailed })
	if st := status(t, c); !strings.Contains(st.Error, "not enough memory: the model needs 2.0 GB, 1.0 GB available (2.0 GB: weights 1.0 GB, largest pass 500 MB, prefix cache 250 MB, scratch 250 MB)") {
		t.Errorf("refused at start: %q", st.Error)
	}
	if len(fl.all(a)) != 0 {
		t.Error("a model that cannot fit was loaded")
	}

	// Enough, but less than the margin (1.6 GB of 16 GB) left: a warning.
	machine.set(3e9, 0)
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: a}, nil); err != nil {
		t.Fatal(err)
	}
	st := status(t, c)
	if st.State != api.StateReady || st.Memory.Needs != 2e9 || !strings.Contains(st.Memory.Warning, "low memory: the model needs 2.0 GB, which leaves 1.0 GB of the machine's 16.0 GB free") {
		t.Errorf("a tight fit: state %s, memory %+v", st.State, st.Memory)
	}
	if st.Memory.Weights != 3e9 || st.Memory.Available != 3e9 {
		t.Errorf("memory %+v: want the engine's weights and the machine's available memory", st.Memory)
	}

	// A switch that cannot fit even without a (3 GB held): refused, a
	// stays, with no model released.
	machine.set(2e9, 0)
	err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: huge}, nil)
	if api.ErrorCode(err) != api.CodeModelLoadFailed || !strings.Contains(err.Error(), "needs 6.0 GB, 5.0 GB available") {
		t.Fatalf("switch to a model too large: %v", err)
	}
	if st := status(t, c); st.State != api.StateReady || st.Model.Path != a || fl.engine(a).isClosed() {
		t.Fatalf("after a refused switch: %s serving %s", st.State, st.Model.Path)
	}

	// b (4 GB) fits only once a (3 GB) is released: a is closed before b's
	// load begins, and a decision sent meanwhile waits for b.
	gate := make(chan struct{})
	var closedFirst bool
	fl.opened = func(dir string) {
		if dir == b {
			closedFirst = fl.engine(a).isClosed()
			<-gate
		}
	}
	switched := make(chan error, 1)
	go func() { switched <- c.Call(ctx, api.MethodLoad, api.LoadParams{Model: b}, nil) }()
	waitFor(t, func() bool { return strings.Contains(status(t, c).Memory.Note, "released the previous model first") })
	if st := status(t, c); st.State != api.StateLoading {
		t.Errorf("while a is released: state %s, want loading", st.State)
	}
	answered := make(chan error, 1)
	go func() {
		c2 := dial(t, path)
		var resp api.Response
		err := c2.Call(ctx, api.MethodDecide, params(t, request(5)), &resp)
		if err == nil {
			err = checkAnswer(t, &resp, []int{fl.tags[b]}, request(5))
		}
		answered <- err
	}()
	waitFor(t, func() bool { return status(t, c).Queued == 1 })
	close(gate)
	if err := <-switched; err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Errorf("the decision sent during the release: %v", err)
	}
	if !closedFirst {
		t.Error("b's load began before a was closed")
	}
	if st := status(t, c); st.State != api.StateReady || st.Model.Path != b || st.Memory.Note != "" {
		t.Errorf("after the switch: %s serving %s, note %q", st.State, st.Model.Path, st.Memory.Note)
	}
	fl.opened = nil

	// A release for a model whose load then fails: b is loaded again, and
	// status says why the switch failed.
	err = c.Call(ctx, api.MethodLoad, api.LoadParams{Model: broken}, nil)
	if api.ErrorCode(err) != api.CodeModelLoadFailed || !strings.Contains(err.Error(), "no such checkpoint") {
		t.Fatalf("switch to a broken model: %v", err)
	}
	if st := status(t, c); st.State != api.StateReady || st.Model.Path != b || !strings.Contains(st.Error, "no such checkpoint") || len(fl.all(b)) != 2 {
		t.Errorf("after a failed switch that released b: %s serving %s (%d loads of b), error %q", st.State, st.Model.Path, len(fl.all(b)), st.Error)
	}

	// Metal: a working set of 4 GB holds b (3 GB) and not the demo (1.5 GB)
	// beside it, though the machine has room; alone the demo fits.
	machine.set(10e9, 4e9)
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: "demo"}, nil); err != nil {
		t.Fatal(err)
	}
	if bs := fl.all(b); !bs[len(bs)-1].isClosed() {
		t.Error("b was kept beside the demo model beyond the GPU's working set")
	}
	err = c.Call(ctx, api.MethodLoad, api.LoadParams{Model: huge}, nil)
	if api.ErrorCode(err) != api.CodeModelLoadFailed || !strings.Contains(err.Error(), "not enough GPU memory: the model needs 6.0 GB, the GPU's recommended working set is 4.0 GB") {
		t.Fatalf("a model over the GPU's working set: %v", err)
	}
	if st := status(t, c); st.Memory.GPUWorkingSet != 4e9 || st.Model.Name != "demo-decision" {
		t.Errorf("status %+v serving %s", st.Memory, st.Model.Name)
	}
}

// TestFitDemo runs the fit check of real models (DecideEstimator) against
// an injected memory size: the demo model is refused with what
// decide.EstimateFS says it needs plus the scratch limit, and once there is
// room it loads and status gives its footprint.
func TestFitDemo(t *testing.T) {
	lo := LoaderOptions{ScratchLimit: 64 << 20}
	want, err := decide.EstimateFS(startlux.DemoModel(), DemoPath, decide.Options{}, false)
	if err != nil {
		t.Fatal(err)
	}
	need := want.Total() + 64<<20
	machine := &fakeMachine{}
	machine.set(need-1, 0)
	path := startDaemon(t, Options{Load: DecideLoader(lo), Estimate: DecideEstimator(lo), Memory: machine.get, ModelsDir: t.TempDir()})
	c := dial(t, path)
	waitFor(t, func() bool { return status(t, c).State == api.StateFailed })
	st := status(t, c)
	if !strings.Contains(st.Error, "not enough memory: the model needs "+formatGB(need)+", "+formatGB(need-1)+" available") {
		t.Errorf("refusal %q, want the demo's %d bytes against %d", st.Error, need, need-1)
	}
	machine.set(need+8e9, 0)
	if err := c.Call(context.Background(), api.MethodLoad, api.LoadParams{Model: "demo"}, nil); err != nil {
		t.Fatal(err)
	}
	var resp api.Response
	if err := c.Call(context.Background(), api.MethodDecide, params(t, request(4)), &resp); err != nil {
		t.Fatal(err)
	}
	st = status(t, c)
	m := st.Memory
	if m.Needs != need || m.Warning != "" || m.Weights != want.Weights || m.CacheLimit != decide.DefaultCacheLimit ||
		m.ScratchLimit != 64<<20 || m.Scratch <= 0 || m.Scratch > m.ScratchLimit || m.Resident <= m.Weights || m.Cache != st.SnapshotBytes {
		t.Errorf("status memory %+v; want needs %d, weights %d, the limits, scratch kept within its limit", m, need, want.Weights)
	}
}

// TestEstimateFit holds the demo checkpoint's footprint, as the estimator
// of the daemon's loads tells it, to memory sizes around it.
func TestEstimateFit(t *testing.T) {
	dir := filepath.Join("..", "testdata", "demo-decision")
	fp, err := DecideEstimator(LoaderOptions{})(context.Background(), dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mem     Memory
		refused bool
	}{
		{Memory{Known: true, Total: 32e9, Available: fp.Total() - 1}, true},
		{Memory{Known: true, Total: 32e9, Available: fp.Total()}, false},
		{Memory{Known: true, Total: 32e9, Available: fp.Total() + 8e9}, false},
		{Memory{Known: false}, false},
	} {
		fit, err := EstimateFit(context.Background(), dir, LoaderOptions{}, tc.mem)
		if err != nil {
			t.Fatal(err)
		}
		if fit.Needs != fp || fit.Memory != tc.mem || fit.Refused() != tc.refused {
			t.Errorf("EstimateFit with %+v = %+v, refused %v; want %v needed, refused %v", tc.mem, fit, fit.Refused(), fp, tc.refused)
		}
	}
	if _, err := EstimateFit(context.Background(), filepath.Join(t.TempDir(), "none"), LoaderOptions{}, Memory{}); err == nil {
		t.Error("no error for a missing checkpoint")
	}
}
