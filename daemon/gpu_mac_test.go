//go:build mactest

package daemon

import (
	"testing"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/backends"
)

// TestMacServesOnGPU: on a Mac (./build.sh mac-test), a daemon arranged as
// startlux serve --backend auto is (Metal, the CPU backend behind it)
// passes the GPU check, the demo model's pass included, serves on Metal
// with no backend note, and answers the demo requests as the goldens and
// the CPU backend do (within 1e-3: float32 sums in another order).
func TestMacServesOnGPU(t *testing.T) {
	plan, err := backends.PlanFor("auto", 0)
	if err != nil {
		t.Fatal(err)
	}
	lo := LoaderOptions{Backend: plan.Open, Fallback: plan.Fallback}
	path := startDaemon(t, Options{Load: DecideLoader(lo), ModelsDir: t.TempDir()})
	cl := dial(t, path)
	st := waitSettled(t, cl)
	if st.State != api.StateReady || st.Model.Backend != "metal" || st.Model.BackendNote != "" {
		t.Fatalf("status: state %s (%s), backend %q, note %q; want ready on metal with no note", st.State, st.Error, st.Model.Backend, st.Model.BackendNote)
	}
	checkDemoAnswersTol(t, cl, 1e-3, 1e-3)
}
