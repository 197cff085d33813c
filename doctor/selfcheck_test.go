package doctor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/metal/metaltest"
	"github.com/startlux/startlux/tensor"
)

// noInt8 is a backend without int8 kernels.
type noInt8 struct{ tensor.Backend }

func TestInt8Check(t *testing.T) {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := be.Int8Kernel()
	if err != nil {
		t.Fatal(err)
	}
	if r := checkInt8(be); r.Status != OK || r.Kernel != want || r.Backend != be.Name() {
		t.Errorf("the CPU backend: %+v, want kernel %q", r, want)
	}
	if r := checkInt8(noInt8{be}); r.Status != Failed || !strings.Contains(r.Reason, "has no int8 matrix products") {
		t.Errorf("a backend without int8: %+v", r)
	}
	if r := checkInt8(nil); r.Status != Failed || r.Reason == "" {
		t.Errorf("no backend: %+v", r)
	}
}

func emulated(t *testing.T, f *metal.Faults) tensor.Backend {
	t.Helper()
	return metaltest.Emulated(t, metal.Options{Faults: f})
}

// TestSelfCheckEmulated: off a Mac the check runs under the emulator and
// says so; every family is reported (int8 included, which the emulator
// runs), the model pass is skipped with the reason, and the JSON carries
// every field.
func TestSelfCheckEmulated(t *testing.T) {
	emulated(t, nil) // skips without clang-19
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := checkSelf(context.Background(), Options{}, be)
	if s.Status != OK || s.On != "metal-emu" || s.Model.Status != Skipped || s.Model.Reason != emuModelSkip {
		t.Fatalf("%+v", s)
	}
	if want := 2 + 2*len(metal.AllWeightForms()) + 1 + 5; len(s.Families) != want {
		t.Errorf("%d families, want %d", len(s.Families), want)
	}
	names := map[string]bool{}
	for _, f := range s.Families {
		names[f.Name] = true
		if f.Status != OK || f.Where == "" {
			t.Errorf("%+v", f)
		}
	}
	for _, n := range []string{"matmul i8", "matmul q4g64_bf16", "attention", "gated delta"} {
		if !names[n] {
			t.Errorf("no family %q", n)
		}
	}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	for _, k := range []string{"status", "on", "families", "model", "elapsed_ms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no field %q in %s", k, raw)
		}
	}
	if fam := m["families"].([]any)[0].(map[string]any); fam["name"] == nil || fam["max_rel"] == nil || fam["tol"] == nil || fam["where"] == nil {
		t.Errorf("a family's fields: %v", fam)
	}
	var b strings.Builder
	if err := (Report{SelfCheck: s}).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "self-check   ok      on metal-emu (no GPU here: the kernel emulator): 22 of 22 kernel families agree with the CPU") ||
		!strings.Contains(b.String(), "  demo model           skipped left out under the emulator") {
		t.Errorf("text:\n%s", b.String())
	}
}

// TestSelfCheckFailure: a kernel gone wrong fails the check with its
// finding, on its own family; the others still report.
func TestSelfCheckFailure(t *testing.T) {
	f := &metal.Faults{}
	f.Set(metal.Fault{Kernel: "rope", Scale: 2})
	s := runSelfCheck(context.Background(), emulated(t, f), "metal-emu", true)
	if s.Status != Failed || !strings.HasPrefix(s.Reason, "rope kernel differs from the CPU by ") {
		t.Errorf("check: %+v", s.Check)
	}
	for _, fam := range s.Families {
		if bad := fam.Status != OK; bad != (fam.Name == "rope") {
			t.Errorf("%s: %+v", fam.Name, fam.Check)
		}
	}
}
