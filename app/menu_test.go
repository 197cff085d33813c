package app

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
)

func TestBuildMenu(t *testing.T) {
	ready := api.Status{
		State:          api.StateReady,
		Model:          api.ModelStatus{Name: "demo", Backend: "cpu", Calibrated: true},
		SnapshotBytes:  3 << 20,
		SnapshotLimit:  512 << 20,
		Memory:         api.MemoryStatus{Resident: 150 << 20, Weights: 8 << 20, Cache: 3 << 20, CacheLimit: 512 << 20, Scratch: 1 << 20, ScratchLimit: 1 << 30},
		IdleUnloadS:    1800,
		RequestsServed: 4,
		LatencyP50MS:   12.4,
	}
	idleSince := "2026-03-01T14:05:00Z"
	idleSinceLocal := func() string { t, _ := time.Parse(time.RFC3339, idleSince); return t.Local().Format("15:04") }()
	models := []api.ModelEntry{{Name: "demo", Embedded: true, Current: true, Calibrated: true}, {Name: "big", Path: "/m/big", Calibrated: true}}
	down := errors.New("no daemon is listening")
	tests := []struct {
		name  string
		state MenuState
		want  string
	}{
		{"ready", MenuState{Status: ready, Models: models, LoginItem: true}, `
[Model: demo]
[Backend: cpu]
[int8: off]
[Weights: 8.0 MiB]
[Memory: 150 MiB resident]
[Prefix cache: 3.0 MiB / 512 MiB]
[Scratch: 1.0 MiB / 1.0 GiB]
[Requests: 4 · p50 12 ms]
---
Unload Model
Unload When Idle ▸
      After 5 Minutes
    ✓ After 30 Minutes
      After 2 Hours
      Never
---
Switch Model ▸
    ✓ demo
      big
    ---
    Add Model…
    Open Models Folder…
  Use int8
---
✓ Start at Login
Restart Daemon
---
Quit StartLux
`},
		{"down", MenuState{StatusErr: down}, `
[Daemon not running]
Start Daemon
---
Switch Model ▸
    [Start the daemon to list models]
    ---
    [Add Model…]
    Open Models Folder…
  [Use int8]
---
  Start at Login
---
Quit StartLux
`},
		{"starting", MenuState{StatusErr: down, Starting: true, Notice: "Allow StartLux in Login Items"}, `
[⚠ Allow StartLux in Login Items]
---
[Daemon starting…]
---
Switch Model ▸
    [Start the daemon to list models]
    ---
    [Add Model…]
    Open Models Folder…
  [Use int8]
---
  Start at Login
---
Quit StartLux
`},
		{"loading", MenuState{Status: api.Status{State: api.StateLoading, Progress: &api.LoadProgress{Model: "/m/big", Phase: "loading", Done: 1, Total: 4}}, LoginItemErr: errors.New("no bundle")}, `
[Daemon loading /m/big… 25%]
---
[Unload Model]
Unload When Idle ▸
      After 5 Minutes
      After 30 Minutes
      After 2 Hours
    ✓ Never
---
Switch Model ▸
    [No models listed]
    ---
    Add Model…
    Open Models Folder…
  [Use int8]
---
  [Start at Login]
Restart Daemon
---
Quit StartLux
`},
		{"switching", MenuState{Status: func() api.Status { s := ready; s.Model.Int8, s.Model.Int8Kernel = true, "avx2"; return s }(), Models: models, Switching: "big", Int8: true}, `
[Model: demo]
[Switching to big…]
[Backend: cpu]
[int8: on (avx2)]
[Weights: 8.0 MiB]
[Memory: 150 MiB resident]
[Prefix cache: 3.0 MiB / 512 MiB]
[Scratch: 1.0 MiB / 1.0 GiB]
[Requests: 4 · p50 12 ms]
---
[Unload Model]
Unload When Idle ▸
      After 5 Minutes
    ✓ After 30 Minutes
      After 2 Hours
      Never
---
Switch Model ▸
    ✓ [demo]
      [big]
    ---
    [Add Model…]
    Open Models Folder…
✓ [Use int8]
---
  Start at Login
Restart Daemon
---
Quit StartLux
`},
		{"switch from elsewhere", MenuState{Status: func() api.Status {
			s := ready
			s.Progress = &api.LoadProgress{Model: "/m/big", Phase: "loading", Done: 3, Total: 4}
			return s
		}(), Models: models}, `
[Model: demo]
[Loading /m/big… 75%]
[Backend: cpu]
[int8: off]
[Weights: 8.0 MiB]
[Memory: 150 MiB resident]
[Prefix cache: 3.0 MiB / 512 MiB]
[Scratch: 1.0 MiB / 1.0 GiB]
[Requests: 4 · p50 12 ms]
---
Unload Model
Unload When Idle ▸
      After 5 Minutes
    ✓ After 30 Minutes
      After 2 Hours
      Never
---
Switch Model ▸
    ✓ demo
      big
    ---
    Add Model…
    Open Models Folder…
  Use int8
---
  Start at Login
Restart Daemon
---
Quit StartLux
`},
		{"unloaded", MenuState{Status: api.Status{State: api.StateUnloaded, IdleSince: idleSince, IdleUnloadS: 300, Model: ready.Model, Memory: api.MemoryStatus{Resident: 40 << 20}}, Models: models}, `
[Model demo unloaded (idle since ` + idleSinceLocal + `)]
[The next decision loads it again]
[Memory: 40 MiB resident]
---
[Unload Model]
Unload When Idle ▸
    ✓ After 5 Minutes
      After 30 Minutes
      After 2 Hours
      Never
---
Switch Model ▸
    ✓ demo
      big
    ---
    Add Model…
    Open Models Folder…
  Use int8
---
  Start at Login
Restart Daemon
---
Quit StartLux
`},
		{"tight", MenuState{Status: func() api.Status {
			s := ready
			s.IdleUnloadS = 0
			s.Memory.Warning = "the model leaves 0.4 GB of the machine's memory free"
			return s
		}(), Models: models}, `
[Model: demo]
[Backend: cpu]
[int8: off]
[Weights: 8.0 MiB]
[Memory: 150 MiB resident]
[Prefix cache: 3.0 MiB / 512 MiB]
[Scratch: 1.0 MiB / 1.0 GiB]
[⚠ the model leaves 0.4 GB of the machine's memory free]
[Requests: 4 · p50 12 ms]
---
Unload Model
Unload When Idle ▸
      After 5 Minutes
      After 30 Minutes
      After 2 Hours
    ✓ Never
---
Switch Model ▸
    ✓ demo
      big
    ---
    Add Model…
    Open Models Folder…
  Use int8
---
  Start at Login
Restart Daemon
---
Quit StartLux
`},
		{"released for a switch", MenuState{Status: api.Status{State: api.StateLoading, Progress: &api.LoadProgress{Model: "/m/big", Phase: "loading", Done: 0, Total: 4},
			Memory: api.MemoryStatus{Note: "released the previous model first: both would not fit; decisions wait"}}, Models: models}, `
[Daemon loading /m/big… 0%]
[released the previous model first: both would not fit; decisions wait]
---
[Unload Model]
Unload When Idle ▸
      After 5 Minutes
      After 30 Minutes
      After 2 Hours
    ✓ Never
---
Switch Model ▸
    ✓ demo
      big
    ---
    Add Model…
    Open Models Folder…
  [Use int8]
---
  Start at Login
Restart Daemon
---
Quit StartLux
`},
		{"int8 unavailable", MenuState{Status: func() api.Status {
			s := ready
			s.Model.Int8Unavailable, s.Memory.Weights = "backend metal has no int8 matrix products", 3<<20
			return s
		}(), Models: models}, `
[Model: demo]
[Backend: cpu]
[int8: unavailable — backend metal has no int8 matrix products]
[Weights: 3.0 MiB]
[Memory: 150 MiB resident]
[Prefix cache: 3.0 MiB / 512 MiB]
[Scratch: 1.0 MiB / 1.0 GiB]
[Requests: 4 · p50 12 ms]
---
Unload Model
Unload When Idle ▸
      After 5 Minutes
    ✓ After 30 Minutes
      After 2 Hours
      Never
---
Switch Model ▸
    ✓ demo
      big
    ---
    Add Model…
    Open Models Folder…
  Use int8
---
  Start at Login
Restart Daemon
---
Quit StartLux
`},
		{"on the CPU after the GPU check", MenuState{Status: func() api.Status {
			s := ready
			s.Model.BackendNote = "Metal disabled: attention kernel differs from the CPU by 5.0e-01 at head 0 of token 8"
			return s
		}(), Models: models[:1]}, `
[Model: demo]
[Backend: cpu]
[⚠ Metal disabled: attention kernel differs from the CPU by 5.0e-01 at head 0 of token 8]
[int8: off]
[Weights: 8.0 MiB]
[Memory: 150 MiB resident]
[Prefix cache: 3.0 MiB / 512 MiB]
[Scratch: 1.0 MiB / 1.0 GiB]
[Requests: 4 · p50 12 ms]
---
Unload Model
Unload When Idle ▸
      After 5 Minutes
    ✓ After 30 Minutes
      After 2 Hours
      Never
---
Switch Model ▸
    ✓ demo
    ---
    Add Model…
    Open Models Folder…
  Use int8
---
  Start at Login
Restart Daemon
---
Quit StartLux
`},
		{"failed", MenuState{Status: api.Status{State: api.StateFailed, Error: "model_load_failed: bad config"}, Models: models}, `
[Model failed to load]
[model_load_failed: bad config]
---
[Unload Model]
Unload When Idle ▸
      After 5 Minutes
      After 30 Minutes
      After 2 Hours
    ✓ Never
---
Switch Model ▸
    ✓ demo
      big
    ---
    Add Model…
    Open Models Folder…
  Use int8
---
  Start at Login
Restart Daemon
---
Quit StartLux
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BuildMenu(tt.state).Text()
			if want := strings.TrimPrefix(tt.want, "\n"); got != want {
				t.Errorf("menu:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestMenuFind(t *testing.T) {
	m := BuildMenu(MenuState{Status: api.Status{State: api.StateReady}, Models: []api.ModelEntry{{Name: "x", Calibrated: true}}})
	if it, ok := m.Find(UseAction("x")); !ok || it.Title != "x" || !it.Enabled {
		t.Errorf("Find(use:x) = %+v, %v", it, ok)
	}
	if _, ok := m.Find(ActionStart); ok {
		t.Errorf("a running daemon's menu offers Start Daemon")
	}
}

func TestMenuUnloadableModel(t *testing.T) {
	m := BuildMenu(MenuState{Status: api.Status{State: api.StateReady}, Models: []api.ModelEntry{{Name: "x", Calibrated: true}, {Name: "bad", Unloadable: "mixture-of-experts"}, {Name: "chat"}}})
	if it, ok := m.Find(UseAction("bad")); !ok || it.Enabled || it.Title != "bad (not loadable)" {
		t.Errorf("Find(use:bad) = %+v, %v; want a disabled item that says it cannot be loaded", it, ok)
	}
	if it, ok := m.Find(UseAction("chat")); !ok || !it.Enabled || it.Title != "chat — uncalibrated (run startlux calibrate)" {
		t.Errorf("Find(use:chat) = %+v, %v; want an enabled item marked uncalibrated", it, ok)
	}
	if it, ok := m.Find(UseAction("x")); !ok || !it.Enabled {
		t.Errorf("Find(use:x) = %+v, %v", it, ok)
	}
}

func TestFlattenShape(t *testing.T) {
	a := BuildMenu(MenuState{Status: api.Status{State: api.StateReady}, Models: []api.ModelEntry{{Name: "x", Calibrated: true}}})
	b := BuildMenu(MenuState{Status: api.Status{State: api.StateReady, SnapshotBytes: 99}, Models: []api.ModelEntry{{Name: "y", Current: true, Calibrated: true}}, LoginItem: true})
	c := BuildMenu(MenuState{Status: api.Status{State: api.StateReady}, Models: []api.ModelEntry{{Name: "x", Calibrated: true}, {Name: "y", Calibrated: true}}})
	fa, fb, fc := flatten(a.Items), flatten(b.Items), flatten(c.Items)
	if shapeOf(fa) != shapeOf(fb) {
		t.Errorf("titles and checks changed the shape")
	}
	if shapeOf(fa) == shapeOf(fc) {
		t.Errorf("an extra model did not change the shape")
	}
	for i, f := range fa {
		if f.parent >= i {
			t.Errorf("item %d has parent %d after it", i, f.parent)
		}
		if f.parent >= 0 && len(fa[f.parent].Children) == 0 {
			t.Errorf("item %d's parent %d has no children", i, f.parent)
		}
	}
}

// TestMenuUncalibratedModel: a model served zero-shot is marked as such in
// the status part of the menu.
func TestMenuUncalibratedModel(t *testing.T) {
	st := api.Status{State: api.StateReady, Model: api.ModelStatus{Name: "chat", Backend: "cpu"}}
	text := BuildMenu(MenuState{Status: st}).Text()
	if !strings.Contains(text, "[Model: chat — uncalibrated (run startlux calibrate)]") {
		t.Errorf("menu of an uncalibrated model:\n%s", text)
	}
	st.Model.Calibrated = true
	if text := BuildMenu(MenuState{Status: st}).Text(); strings.Contains(text, "uncalibrated") {
		t.Errorf("menu of a calibrated model:\n%s", text)
	}
}

// TestMenuPulling: a pull in the daemon shows its repository, percentage,
// total and rate, whether a model serves meanwhile or not.
func TestMenuPulling(t *testing.T) {
	p := &api.LoadProgress{Model: "/m/q", Phase: api.PhasePulling, Repo: "Qwen/Qwen3.5-0.8B", Done: 1 << 29, Total: 1 << 31, Rate: 12 << 20}
	serving := api.Status{State: api.StateReady, Model: api.ModelStatus{Name: "demo", Calibrated: true}, Progress: p}
	first := api.Status{State: api.StateLoading, Progress: p}
	for _, st := range []api.Status{serving, first} {
		text := BuildMenu(MenuState{Status: st, Switching: "Qwen/Qwen3.5-0.8B"}).Text()
		if !strings.Contains(text, "[Downloading Qwen/Qwen3.5-0.8B… 25% of 2.0 GiB · 12 MiB/s]") || !strings.Contains(text, "[Add Model…]") {
			t.Errorf("state %s:\n%s", st.State, text)
		}
	}
}
