//go:build !mactest

// The tests of the GPU path through the emulator; with -tags mactest
// (./build.sh mac-test, the GPU under test) gpu_mac_test.go runs instead.

package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/gpucheck"
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/metal/metaltest"
	"github.com/startlux/startlux/tensor"
)

// These tests run the GPU path through the kernel emulator (the metal-emu
// backend), with faults injected by the test option metal.Options.Faults: an
// option field rather than a flag or an environment variable, because the
// test makes the backend itself (LoaderOptions.Backend), so nothing a user
// can set reaches it (startlux serve has no way to pass it, and metal.New
// refuses it). The demo model's pass of the GPU check is left out
// (LoaderOptions.Check.NoModel): under the emulator it takes half a minute.

// emuLoader returns LoaderOptions on the emulated Metal backend with faults
// f, falling back to the CPU backend when fallback is set.
func emuLoader(t *testing.T, f *metal.Faults, fallback bool) LoaderOptions {
	return emuLoaderOpts(t, metal.Options{Faults: f}, fallback)
}

// emuLoaderOpts is emuLoader with the emulated backend's options.
func emuLoaderOpts(t *testing.T, mo metal.Options, fallback bool) LoaderOptions {
	t.Helper()
	metaltest.Emulated(t, metal.Options{}) // ends the test without the emulator
	lo := LoaderOptions{
		Backend: func() (tensor.Backend, error) { return metal.NewEmulated(mo) },
		Check:   gpucheck.Options{NoModel: true},
	}
	if fallback {
		lo.Fallback = func() (tensor.Backend, error) { return cpu.New(cpu.Options{}) }
	}
	return lo
}

// TestGPUFallback runs one daemon (the embedded demo model, auto's
// arrangement: the GPU with the CPU backend to fall back to) through what
// the GPU check and the run-time faults do, reloading the model (the load
// method) after changing the faults: a poisoned kernel leaves the daemon
// serving right answers on the CPU backend with the reason in status; with
// the faults cleared it serves on the GPU; command buffers failing then
// fail requests with internal, and after MaxDeviceFaults of them the model
// moves to the CPU backend with the note, and answers right again. (Each
// load on the emulator takes several seconds: the checkpoint's preamble
// runs there. The check's other failures, a failed command buffer and a
// check past its bound, take the same path here; package gpucheck's tests
// show each one found.)
func TestGPUFallback(t *testing.T) {
	f := &metal.Faults{}
	f.Set(metal.Fault{Kernel: "attention", Scale: 1.5})
	path := startDaemon(t, Options{Load: DecideLoader(emuLoader(t, f, true)), ModelsDir: t.TempDir(), NoWarmup: true, MaxDeviceFaults: 2})
	cl := dial(t, path)
	ctx := context.Background()
	onCPU := func(what, note string, st api.Status) {
		t.Helper()
		if st.State != api.StateReady || !strings.HasPrefix(st.Model.Backend, "cpu") || !strings.HasPrefix(st.Model.BackendNote, note) {
			t.Fatalf("%s: state %s (%s), backend %q, note %q; want ready on the CPU with a note starting %q",
				what, st.State, st.Error, st.Model.Backend, st.Model.BackendNote, note)
		}
	}
	reload := func() api.Status {
		t.Helper()
		var st api.Status
		if err := cl.Call(ctx, api.MethodLoad, api.LoadParams{Model: api.DemoName}, &st); err != nil {
			t.Fatalf("load: %v", err)
		}
		return st
	}

	onCPU("a poisoned attention kernel", "Metal disabled: attention kernel differs from the CPU by 5.0e-01 at head ", waitSettled(t, cl))
	checkDemoAnswers(t, cl)

	f.Set()
	if st := reload(); st.State != api.StateReady || st.Model.Backend != "metal-emu" || st.Model.BackendNote != "" {
		t.Fatalf("with the faults cleared: state %s (%s), backend %q, note %q; want ready on metal-emu", st.State, st.Error, st.Model.Backend, st.Model.BackendNote)
	}
	f.Set(metal.Fault{Fail: true})
	for i := range 2 {
		var resp api.Response
		err := cl.Call(ctx, api.MethodDecide, params(t, request(i)), &resp)
		perr, ok := errors.AsType[*api.Error](err)
		if !ok || perr.Code != api.CodeInternal || !strings.Contains(perr.Message, "metal: command buffer failed: Internal Error") {
			t.Fatalf("request %d on a faulting GPU: %v", i, err)
		}
	}
	st := waitStatus(t, cl, func(st api.Status) bool { return strings.HasPrefix(st.Model.Backend, "cpu") })
	onCPU("after two failed command buffers", "Metal disabled: 2 batches in a row failed on the GPU; the last: ", st)
	if !strings.Contains(st.Model.BackendNote, "command buffer failed") || st.RequestsFailed != 2 {
		t.Errorf("note %q, %d requests failed; want the command buffer's message and the 2 that faulted", st.Model.BackendNote, st.RequestsFailed)
	}
	checkDemoAnswers(t, cl)
	// Metal stays off for later loads, whatever the GPU does now.
	f.Set()
	onCPU("a later load", "Metal disabled: 2 batches in a row failed on the GPU", reload())
}

// TestGPUFaultWhileOpening: a command buffer failing while the checkpoint
// opens (its preamble's pass) moves the load to the CPU backend; named
// explicitly (no fallback), the backend fails the load with the same
// reason.
func TestGPUFaultWhileOpening(t *testing.T) {
	reason := "open demo-decision (embedded): preamble: prefill: metal: command buffer failed: Internal Error"
	for _, fallback := range []bool{true, false} {
		f := &metal.Faults{}
		f.Set(metal.Fault{Kernel: "rmsnorm", Fail: true})
		path := startDaemon(t, Options{Load: DecideLoader(emuLoader(t, f, fallback)), ModelsDir: t.TempDir(), NoWarmup: true})
		cl := dial(t, path)
		st := waitSettled(t, cl)
		if fallback {
			if st.State != api.StateReady || !strings.HasPrefix(st.Model.Backend, "cpu") || !strings.HasPrefix(st.Model.BackendNote, gpucheck.NotePrefix+reason) {
				t.Errorf("with a fallback: state %s, backend %q, note %q", st.State, st.Model.Backend, st.Model.BackendNote)
			}
			checkDemoAnswers(t, cl)
			continue
		}
		if want := "load the embedded demo model: " + reason; st.State != api.StateFailed || !strings.HasPrefix(st.Error, want) {
			t.Errorf("named explicitly: state %s, error %q; want failed with %q", st.State, st.Error, want)
		}
		var resp api.Response
		err := cl.Call(context.Background(), api.MethodDecide, params(t, request(1)), &resp)
		if perr, ok := errors.AsType[*api.Error](err); !ok || perr.Code != api.CodeModelLoadFailed || !strings.Contains(perr.Message, "command buffer failed") {
			t.Errorf("a decision with no model: %v", err)
		}
	}
}

// TestGPUUnfit: a GPU backend whose kernels do not compile (the emulator's
// compiler failing, as newLibraryWithSource would on a Mac), or whose
// check finds a poisoned kernel, moves the load to the CPU backend with the
// reason as the note; named explicitly (no fallback) it fails the load with
// the same reason, and decisions fail with model_load_failed. (The poisoned
// kernel with a fallback is TestGPUFallback's first step.)
func TestGPUUnfit(t *testing.T) {
	// A compiler that fails as clang does on a kernel it rejects.
	cc := filepath.Join(t.TempDir(), "cc")
	script := "#!/bin/sh\necho \"kernels.cpp:12:3: error: use of undeclared identifier 'simd_sumx'\" >&2\nexit 1\n"
	if err := os.WriteFile(cc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	poisoned := &metal.Faults{}
	poisoned.Set(metal.Fault{Kernel: "attention", Scale: 1.5})
	cases := []struct {
		name      string
		mo        metal.Options
		reason    string // what the note and the load's error hold
		fallbacks []bool
	}{
		{"compile error", metal.Options{Compiler: cc, CacheDir: t.TempDir()}, "metal emulator: compile kernels.cpp: exit status 1\nkernels.cpp:12:3: error: use of undeclared identifier 'simd_sumx'", []bool{true, false}},
		{"poisoned attention", metal.Options{Faults: poisoned}, "attention kernel differs from the CPU by 5.0e-01 at head ", []bool{false}},
	}
	for _, c := range cases {
		for _, fallback := range c.fallbacks {
			t.Run(fmt.Sprintf("%s, fallback %v", c.name, fallback), func(t *testing.T) {
				path := startDaemon(t, Options{Load: DecideLoader(emuLoaderOpts(t, c.mo, fallback)), ModelsDir: t.TempDir(), NoWarmup: true})
				cl := dial(t, path)
				st := waitSettled(t, cl)
				if fallback {
					if st.State != api.StateReady || !strings.HasPrefix(st.Model.Backend, "cpu") ||
						!strings.HasPrefix(st.Model.BackendNote, gpucheck.NotePrefix) || !strings.Contains(st.Model.BackendNote, c.reason) {
						t.Fatalf("state %s (%s), backend %q, note %q; want ready on the CPU with a note holding %q", st.State, st.Error, st.Model.Backend, st.Model.BackendNote, c.reason)
					}
					checkDemoAnswers(t, cl)
					return
				}
				if st.State != api.StateFailed || !strings.Contains(st.Error, c.reason) {
					t.Fatalf("state %s, error %q; want failed with %q", st.State, st.Error, c.reason)
				}
				var resp api.Response
				err := cl.Call(context.Background(), api.MethodDecide, params(t, request(1)), &resp)
				if perr, ok := errors.AsType[*api.Error](err); !ok || perr.Code != api.CodeModelLoadFailed || !strings.Contains(perr.Message, c.reason) {
					t.Errorf("a decision with no model: %v", err)
				}
			})
		}
	}
}

// TestGPUHang: a command buffer that does not finish within the backend's
// bound (metal.Options.CommandTimeout) fails its request with internal,
// naming the bound, and (MaxDeviceFaults 1) moves the model to the CPU
// backend, which answers right. The bound is far above what a wait takes
// on the emulator and the hang lasts an hour, so the outcome does not
// depend on the machine's speed.
func TestGPUHang(t *testing.T) {
	f := &metal.Faults{}
	lo := emuLoaderOpts(t, metal.Options{Faults: f, CommandTimeout: 20 * time.Second}, true)
	path := startDaemon(t, Options{Load: DecideLoader(lo), ModelsDir: t.TempDir(), NoWarmup: true, MaxDeviceFaults: 1})
	cl := dial(t, path)
	if st := waitSettled(t, cl); st.State != api.StateReady || st.Model.Backend != "metal-emu" {
		t.Fatalf("state %s (%s), backend %q; want ready on metal-emu", st.State, st.Error, st.Model.Backend)
	}
	f.Set(metal.Fault{Delay: time.Hour})
	var resp api.Response
	err := cl.Call(context.Background(), api.MethodDecide, params(t, request(3)), &resp)
	perr, ok := errors.AsType[*api.Error](err)
	if !ok || perr.Code != api.CodeInternal || !strings.Contains(perr.Message, "the GPU has not finished its work within 20s") {
		t.Fatalf("a request on a hung GPU: %v", err)
	}
	f.Set()
	st := waitStatus(t, cl, func(st api.Status) bool { return strings.HasPrefix(st.Model.Backend, "cpu") })
	if want := "Metal disabled: 1 batches in a row failed on the GPU; the last: "; !strings.HasPrefix(st.Model.BackendNote, want) ||
		!strings.Contains(st.Model.BackendNote, "has not finished its work within 20s") {
		t.Errorf("note %q; want it to start %q and name the bound", st.Model.BackendNote, want)
	}
	checkDemoAnswers(t, cl)
}

// faultyEngine is a fake engine whose batches fail with err (nil: a device
// fault) while faulty is set, and which can (canFallBack) or cannot fall
// back.
type faultyEngine struct {
	*fakeEngine
	mu          sync.Mutex // guards faulty and notes
	faulty      bool
	err         error
	canFallBack bool
	notes       []string
}

var errFakeFault = fmt.Errorf("fake GPU: %w", tensor.ErrDeviceFault)

func (e *faultyEngine) Run(ctx context.Context, jobs []Job, turn decide.Turn, passTokens int) ([]*decide.Response, []error) {
	e.mu.Lock()
	faulty := e.faulty
	e.mu.Unlock()
	if !faulty {
		return e.fakeEngine.Run(ctx, jobs, turn, passTokens)
	}
	err := e.err
	if err == nil {
		err = errFakeFault
	}
	errs := make([]error, len(jobs))
	for i := range errs {
		errs[i] = err
	}
	return make([]*decide.Response, len(jobs)), errs
}

func (e *faultyEngine) FallBack(note string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notes = append(e.notes, note)
	return e.canFallBack
}

func (e *faultyEngine) set(faulty bool) {
	e.mu.Lock()
	e.faulty = faulty
	e.mu.Unlock()
}

// TestDeviceFaultCount: faults count in a row (an answered batch starts the
// count again); at the bound a model that can fall back is reloaded once,
// one that cannot keeps serving with the note in its status.
func TestDeviceFaultCount(t *testing.T) {
	for _, canFallBack := range []bool{true, false} {
		t.Run(fmt.Sprintf("fallback %v", canFallBack), func(t *testing.T) {
			fl := newFakeLoader()
			first := &faultyEngine{fakeEngine: fl.engine(""), canFallBack: canFallBack}
			var mu sync.Mutex
			loads := 0
			int8Loads := 0 // the daemon runs int8: the reload keeps it
			load := func(ctx context.Context, dir string, useInt8 bool, progress func(done, total int64)) (Engine, api.ModelStatus, error) {
				mu.Lock()
				defer mu.Unlock()
				loads++
				if useInt8 {
					int8Loads++
				}
				if loads == 1 {
					return first, api.ModelStatus{Name: "demo", Backend: "gpu"}, nil
				}
				return &fakeEngine{tag: 9}, api.ModelStatus{Name: "demo", Backend: "cpu", BackendNote: "moved"}, nil
			}
			path := startDaemon(t, Options{Load: load, ModelsDir: t.TempDir(), MaxDeviceFaults: 3, Int8: true})
			cl := dial(t, path)
			waitSettled(t, cl)
			ask := func(i int) error {
				var resp api.Response
				return cl.Call(context.Background(), api.MethodDecide, params(t, request(i)), &resp)
			}
			first.set(true)
			for i := range 2 {
				if err := ask(i); err == nil || !strings.Contains(err.Error(), "fake GPU: device fault") {
					t.Fatalf("faulting request %d: %v", i, err)
				}
			}
			first.set(false)
			if err := ask(5); err != nil {
				t.Fatal(err)
			}
			first.set(true)
			for i := range 3 {
				ask(10 + i)
			}
			var st api.Status
			waitFor(t, func() bool {
				if err := cl.Call(context.Background(), api.MethodStatus, nil, &st); err != nil {
					t.Fatal(err)
				}
				return st.Model.BackendNote != ""
			})
			first.mu.Lock()
			notes := first.notes
			first.mu.Unlock()
			wantNote := "Metal disabled: 3 batches in a row failed on the GPU; the last: fake GPU: device fault"
			if len(notes) != 1 || notes[0] != wantNote {
				t.Errorf("FallBack called with %q, want once with %q", notes, wantNote)
			}
			if canFallBack {
				mu.Lock()
				defer mu.Unlock()
				if st.Model.Backend != "cpu" || st.Model.BackendNote != "moved" || loads != 2 || int8Loads != 2 {
					t.Errorf("after the faults: %+v, %d loads (%d with int8, want all)", st.Model, loads, int8Loads)
				}
				return
			}
			if want := strings.TrimPrefix(wantNote, gpucheck.NotePrefix); st.Model.Backend != "gpu" || st.Model.BackendNote != want || loads != 1 {
				t.Errorf("after the faults, nowhere to go: %+v, %d loads; want the note %q", st.Model, loads, want)
			}
		})
	}
}

// TestWarmUpFault: a device fault in the warm-up requests after a load
// turns the GPU off with the warm-up's error as the note and loads the
// model again (on the fallback); a warm-up failure that is no device fault
// fails the load.
func TestWarmUpFault(t *testing.T) {
	for _, deviceFault := range []bool{true, false} {
		t.Run(fmt.Sprintf("device fault %v", deviceFault), func(t *testing.T) {
			fl := newFakeLoader()
			first := &faultyEngine{fakeEngine: fl.engine(""), canFallBack: true, faulty: true}
			var mu sync.Mutex
			loads := 0
			load := func(ctx context.Context, dir string, useInt8 bool, progress func(done, total int64)) (Engine, api.ModelStatus, error) {
				mu.Lock()
				defer mu.Unlock()
				loads++
				switch {
				case loads == 1 && deviceFault:
					return first, api.ModelStatus{Name: "demo", Backend: "gpu"}, nil
				case loads == 1:
					return &faultyEngine{fakeEngine: fl.engine(""), faulty: true, err: errors.New("not a device fault")}, api.ModelStatus{Name: "demo", Backend: "gpu"}, nil
				}
				return &fakeEngine{tag: 9}, api.ModelStatus{Name: "demo", Backend: "cpu", BackendNote: "moved"}, nil
			}
			path := startDaemon(t, Options{Load: load, ModelsDir: t.TempDir()})
			st := waitSettled(t, dial(t, path))
			first.mu.Lock()
			notes := first.notes
			first.mu.Unlock()
			if !deviceFault {
				if st.State != api.StateFailed || !strings.Contains(st.Error, "warm-up: ") || !strings.Contains(st.Error, "not a device fault") || loads != 1 {
					t.Errorf("state %s, error %q, %d loads; want failed naming the warm-up's error after one load", st.State, st.Error, loads)
				}
				return
			}
			if len(notes) != 1 || !strings.HasPrefix(notes[0], "Metal disabled: warm-up: ") || !strings.Contains(notes[0], "fake GPU: device fault") {
				t.Errorf("FallBack called with %q, want once with the warm-up's fault", notes)
			}
			if st.State != api.StateReady || st.Model.Backend != "cpu" || st.Model.BackendNote != "moved" || loads != 2 {
				t.Errorf("after the warm-up fault: state %s (%s), %+v, %d loads", st.State, st.Error, st.Model, loads)
			}
		})
	}
}
