//go:build !mactest

// Tests that need the emulator's fault injection (metal.Faults); with
// -tags mactest (the GPU under test) they are left out.

package gpucheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/metal/metaltest"
	"github.com/startlux/startlux/tensor"
)

// onGPU says whether backendUnderTest is a GPU: not without -tags mactest.
const onGPU = false

// backendUnderTest is the Metal backend under the emulator (with -tags
// mactest: the Mac's GPU).
func backendUnderTest(t *testing.T) tensor.Backend { return emulated(t, nil) }

// emulated returns the Metal backend under the emulator with faults f.
func emulated(t *testing.T, f *metal.Faults) tensor.Backend {
	t.Helper()
	return metaltest.Emulated(t, metal.Options{Faults: f})
}

// TestRunFaults: each injected fault makes the backend unfit with the
// reason a user sees; a wrong kernel is found before the model pass runs.
func TestRunFaults(t *testing.T) {
	ctx := context.Background()
	bf16 := []metal.WeightForm{{DType: tensor.BF16}}
	f := &metal.Faults{}
	be := emulated(t, f)
	ref := cpuBackend(t)

	f.Set(metal.Fault{Kernel: "attention", Scale: 1.5})
	r := Run(ctx, be, ref, Options{Forms: bf16})
	if r.OK() || r.Model.Ran || !strings.HasPrefix(r.Note(), "Metal disabled: attention kernel differs from the CPU by 5.0e-01 at head ") {
		t.Errorf("poisoned attention: note %q, model %+v", r.Note(), r.Model)
	}

	f.Set(metal.Fault{Kernel: "delta_chunk_scan", Fail: true})
	r = Run(ctx, be, ref, Options{Forms: bf16})
	if r.OK() || !strings.HasPrefix(r.Note(), "Metal disabled: gated delta kernel failed: metal: command buffer failed: ") {
		t.Errorf("failing command buffer: note %q", r.Note())
	}

	f.Set(metal.Fault{Kernel: "rmsnorm", Delay: time.Hour})
	r = Run(ctx, be, ref, Options{Forms: bf16, Timeout: 300 * time.Millisecond})
	// (Which family it stopped at is rmsnorm unless the families before it
	// alone took 300 ms on a loaded machine.)
	if !r.TimedOut || r.OK() || !strings.HasPrefix(r.Note(), "Metal disabled: the self-check did not finish within 300ms (stopped at: ") ||
		!strings.Contains(r.Note(), "kernel failed: ") {
		t.Errorf("hung rmsnorm: timed out %v, note %q", r.TimedOut, r.Note())
	}

	// ctx ending is no verdict: the result says so through TimedOut false.
	f.Set()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if r := Run(cctx, be, ref, Options{Forms: bf16}); r.TimedOut || r.OK() {
		t.Errorf("a cancelled check: timed out %v, ok %v", r.TimedOut, r.OK())
	}
}
