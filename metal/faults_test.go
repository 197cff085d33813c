//go:build !mactest

// Tests of the faults a test can inject into the emulator (Options.Faults)
// and of how device failures reach callers; with -tags mactest (the GPU
// under test) they are left out.

package metal

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/internal/testenv"
	"github.com/startlux/startlux/tensor"
)

func faultyBackend(t *testing.T, f *Faults, timeout time.Duration) *Backend {
	t.Helper()
	be, err := newEmulated(context.Background(), Options{Faults: f, CommandTimeout: timeout}, "")
	if errors.Is(err, ErrNoCompiler) {
		testenv.Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// TestFaults shows each injected fault found by the self-check, as the
// failure a broken GPU would give (a wrong output, a failed command buffer,
// a command that does not finish in time), and the backend answering
// correctly again once the fault is cleared.
func TestFaults(t *testing.T) {
	ctx := context.Background()
	ref := cpuRef(t)
	bf16 := []WeightForm{{DType: tensor.BF16}}
	byName := func(res []FamilyResult) map[string]FamilyResult {
		m := map[string]FamilyResult{}
		for _, r := range res {
			m[r.Family] = r
		}
		return m
	}
	f := &Faults{}
	be := faultyBackend(t, f, 0)
	cases := []struct {
		name   string
		fault  Fault
		family string
		check  func(r FamilyResult) bool
	}{
		{"wrong attention", Fault{Kernel: "attention", Scale: 1.5}, "attention", func(r FamilyResult) bool {
			return r.Err == nil && r.MaxRel > 0.49 && r.MaxRel < 0.51 &&
				strings.HasPrefix(r.Note(), "Metal disabled: attention kernel differs from the CPU by 5.0e-01 at head ")
		}},
		{"failed command buffer", Fault{Kernel: "rmsnorm", Fail: true}, "rmsnorm", func(r FamilyResult) bool {
			return errors.Is(r.Err, tensor.ErrDeviceFault) &&
				strings.Contains(r.Note(), "rmsnorm kernel failed: metal: command buffer failed: Internal Error") &&
				strings.Contains(r.Note(), "injected by a test into kernel rmsnorm")
		}},
	}
	for _, c := range cases {
		f.Set(c.fault)
		before := f.Hits()
		res := byName(SelfCheck(ctx, be, ref, bf16))
		if r := res[c.family]; !c.check(r) {
			t.Errorf("%s: %s: %+v, note %q", c.name, c.family, r, r.Note())
		}
		if f.Hits() == before {
			t.Errorf("%s: the fault never hit", c.name)
		}
		for name, r := range res {
			if name != c.family && !r.OK() {
				t.Errorf("%s: %s failed beside it: %+v", c.name, name, r)
			}
		}
	}
	f.Set()
	for _, r := range SelfCheck(ctx, be, ref, bf16) {
		if !r.OK() {
			t.Errorf("after the faults were cleared: %+v", r)
		}
	}

	// A command that never finishes, on a backend whose waits are bounded
	// (the bound is short for the emulator, so only the hung family is
	// held to anything here).
	hung := &Faults{}
	hung.Set(Fault{Kernel: "causal_conv", Delay: time.Hour})
	r := byName(SelfCheck(ctx, faultyBackend(t, hung, 300*time.Millisecond), ref, bf16))["conv"]
	if !errors.Is(r.Err, tensor.ErrDeviceFault) || errors.Is(r.Err, context.DeadlineExceeded) ||
		!strings.Contains(r.Note(), "conv kernel failed: metal: the GPU has not finished its work within 300ms") {
		t.Errorf("a hung conv: %+v, note %q", r, r.Note())
	}
}

// TestSyncErrors: ctx's end is not a device fault; a failure is.
func TestSyncErrors(t *testing.T) {
	f := &Faults{}
	be := faultyBackend(t, f, 0)
	x := be.Alloc(64)
	defer be.Free(x)
	f.Set(Fault{Delay: time.Hour})
	be.Add(x, x, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := be.Sync(ctx); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, tensor.ErrDeviceFault) {
		t.Errorf("a wait past the caller's deadline: %v", err)
	}
	f.Set(Fault{Fail: true})
	if err := be.Sync(context.Background()); !errors.Is(err, tensor.ErrDeviceFault) || !strings.HasPrefix(err.Error(), "metal: command buffer failed: ") {
		t.Errorf("a failed command buffer: %v", err)
	}
	f.Set()
	be.Write(x, 0, make([]float32, 64))
	if err := be.Sync(context.Background()); err != nil {
		t.Errorf("after the fault: %v", err)
	}
}
