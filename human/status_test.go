package human

import (
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/ipc"
)

// TestStatusBackendNote: the backend note travels as model.backend_note
// (absent when empty) and Status prints it under the backend.
func TestStatusBackendNote(t *testing.T) {
	note := "Metal disabled: attention kernel differs from the CPU by 5.0e-01 at head 0 of token 8"
	for _, c := range []struct {
		note     string
		wantLine string // "" when no note line is printed
	}{
		{note, "backend:   cpu (openblas)\nnote:      " + note + "\n"},
		{"", ""},
	} {
		st := api.Status{State: api.StateReady, Model: api.ModelStatus{Name: "demo", Backend: "cpu (openblas)", BackendNote: c.note}}
		raw, err := ipc.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var wire map[string]any
		if err := ipc.Unmarshal(raw, &wire); err != nil {
			t.Fatal(err)
		}
		m, _ := wire["model"].(map[string]any)
		got, present := m["backend_note"]
		if present != (c.note != "") || (present && got != c.note) {
			t.Errorf("note %q on the wire: %v (present %v)", c.note, got, present)
		}
		var back api.Status
		if err := ipc.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		Status(&b, &back)
		if c.wantLine != "" && !strings.Contains(b.String(), c.wantLine) || c.wantLine == "" && strings.Contains(b.String(), "note:") {
			t.Errorf("note %q printed as:\n%s", c.note, b.String())
		}
	}
}

// TestStatus checks the whole text of a few statuses: each field's line,
// and the lines that are left out when their field is empty.
func TestStatus(t *testing.T) {
	since := time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)
	mem := api.MemoryStatus{Weights: 3_200_000, Cache: 1_000_000, CacheLimit: 536_870_912, Scratch: 0, ScratchLimit: 1 << 30, Resident: 150_000_000}
	for _, c := range []struct {
		name string
		st   api.Status
		want string
	}{
		{"ready, calibrated", api.Status{
			State:       api.StateReady,
			Model:       api.ModelStatus{Name: "demo", Path: "demo-decision (embedded)", Backend: "cpu (openblas)", Int8: true, Int8Kernel: "avx2", Calibrated: true},
			Memory:      mem,
			IdleUnloadS: 1800, RequestsServed: 12, RequestsFailed: 1, Queued: 2,
			LatencyP50MS: 4.25, LatencyP99MS: 30, UptimeS: 3725, PID: 42,
		}, "state:     ready\n" +
			"model:     demo (demo-decision (embedded))\n" +
			"backend:   cpu (openblas)\n" +
			"int8:      on (avx2)\n" +
			"readout:   calibrated\n" +
			"memory:    150.0 MB resident: weights 3.2 MB, prefix cache 1.0 MB of 536.9 MB, scratch 0.0 MB of 1.1 GB\n" +
			"unload:    after 30m0s without a decision\n" +
			"requests:  12 served, 1 failed, 2 queued\n" +
			"latency:   p50 4.2 ms, p99 30 ms\n" +
			"uptime:    1h2m5s (pid 42)\n"},
		{"warming, uncalibrated, a fit and a warning", api.Status{
			State: api.StateWarming,
			Model: api.ModelStatus{Name: "qwen", Path: "qwen", Backend: "metal", Int8Unavailable: "no int8 kernel"},
			Memory: api.MemoryStatus{Needs: 2_500_000_000, Available: 8_000_000_000, GPUWorkingSet: 12_000_000_000,
				Warning: "the model leaves 0.4 GB free", Note: "released the previous model"},
		}, "state:     warming\n" +
			"model:     qwen\n" +
			"backend:   metal\n" +
			"int8:      unavailable — no int8 kernel\n" +
			"readout:   " + api.UncalibratedNote + ": zero-shot, no decision_config.json\n" +
			"memory:    0.0 MB resident: weights 0.0 MB, prefix cache 0.0 MB of 0.0 MB, scratch 0.0 MB of 0.0 MB\n" +
			"fit:       the model needs 2.5 GB at the limits; 8.0 GB available; GPU working set 12.0 GB\n" +
			"warning:   the model leaves 0.4 GB free\n" +
			"note:      released the previous model\n" +
			"unload:    never\n" +
			"requests:  0 served, 0 failed, 0 queued\n" +
			"latency:   p50 0.0 ms, p99 0.0 ms\n" +
			"uptime:    0s (pid 0)\n"},
		{"loading the embedded model", api.Status{
			State:    api.StateLoading,
			Progress: &api.LoadProgress{Phase: api.StateLoading, Done: 800_000, Total: 3_200_000},
		}, "state:     loading\n" +
			"loading:   the embedded demo model: loading, 25% of 3.2 MB\n"},
		{"failed while pulling", api.Status{
			State: api.StateFailed, Error: "no space left",
			Progress: &api.LoadProgress{Phase: api.PhasePulling, Repo: "Qwen/Qwen3.5-0.8B", Model: "/m/Qwen3.5-0.8B", Done: 500_000_000, Total: 2_000_000_000},
		}, "state:     failed\n" +
			"error:     no space left\n" +
			"pulling:   Qwen/Qwen3.5-0.8B into /m/Qwen3.5-0.8B: 500 MB of 2.00 GB (25%)\n"},
		{"unloaded", api.Status{State: api.StateUnloaded, IdleSince: since.Format(time.RFC3339), Model: api.ModelStatus{Name: "demo"}},
			"state:     unloaded (idle since " + since.Local().Format("2006-01-02 15:04:05") + "; the next decision loads it again)\n" +
				"model:     demo\n" +
				"backend:   \n" +
				"int8:      off\n"},
	} {
		var b strings.Builder
		Status(&b, &c.st)
		got := b.String()
		if c.st.State == api.StateLoading || c.st.State == api.StateFailed || c.st.State == api.StateUnloaded {
			// The memory and counter lines are those of the first case.
			got = got[:strings.Index(got, "memory:")]
		}
		if got != c.want {
			t.Errorf("%s: printed\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}

// TestPullProgress checks each part of the pull line, present only when
// its field is known.
func TestPullProgress(t *testing.T) {
	for _, c := range []struct {
		p    api.LoadProgress
		want string
	}{
		{api.LoadProgress{Done: 0}, "0 B"},
		{api.LoadProgress{Done: 1_076}, "1.08 kB"},
		{api.LoadProgress{Done: 250_000_000, Total: 1_000_000_000}, "250 MB of 1.00 GB (25%)"},
		{api.LoadProgress{Done: 999, Total: 1_000, Rate: 12_500_000, ETAS: 95, File: "model.safetensors"},
			"999 B of 1.00 kB (99%), 12.5 MB/s, 1m35s left, fetching model.safetensors"},
	} {
		if got := PullProgress(&c.p); got != c.want {
			t.Errorf("PullProgress(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

// TestModelLabel: a directory is its own label, "" the embedded model.
func TestModelLabel(t *testing.T) {
	for dir, want := range map[string]string{"": "the embedded demo model", "/m/qwen": "/m/qwen"} {
		if got := ModelLabel(dir); got != want {
			t.Errorf("ModelLabel(%q) = %q, want %q", dir, got, want)
		}
	}
}
