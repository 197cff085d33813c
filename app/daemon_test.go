package app

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/human"
	"github.com/startlux/startlux/internal/settings"
	"github.com/startlux/startlux/internal/testenv"
	"github.com/startlux/startlux/ipc"
)

// buildDaemon builds cmd/startlux into dir.
func buildDaemon(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "startlux")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/startlux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build startlux: %v\n%s", err, out)
	}
	return bin
}

// copyCheckpoint copies the demo checkpoint's files into dir.
func copyCheckpoint(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "decision_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join("../testdata/demo-decision", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// longRequest asks three questions about evidence long enough (a few
// hundred tokens) that the daemon keeps its prefix snapshot.
func longRequest() map[string]any {
	var rows []string
	for i := range 60 {
		rows = append(rows, fmt.Sprintf("Row %d: item %d, qty %d.", i, i*7%13, i%5))
	}
	return map[string]any{
		"evidence": map[string]any{"page": strings.Join(rows, " ")},
		"questions": map[string]any{
			"q0": map[string]any{"type": "noul", "instructions": "Does row 6 exist?"},
			"q1": map[string]any{"type": "score", "instructions": "How much is on the page?", "criteria": []string{"empty", "some", "full"}},
			"q2": map[string]any{"type": "noul", "instructions": "Can a customer buy laptop right now?"},
		},
	}
}

// TestControllerWithRealDaemon runs the real daemon (cmd/startlux serve) as
// the app's child on a real socket and drives it through the controller:
// start, the menu's model and cache figures, a request moving the cache, a
// model switch from the menu, the memory lines, Unload Model and the
// decision that loads it again, Unload When Idle and "Use int8" kept in
// the settings file, a restart (the new process, in float, brought back to
// int8 by Run, and unloading when idle as chosen), and a stopped daemon.
func TestControllerWithRealDaemon(t *testing.T) {
	testenv.LookPath(t, "go", "the Go toolchain")
	dir := t.TempDir()
	bin := buildDaemon(t, dir)
	data := filepath.Join(dir, "data")
	t.Setenv("XDG_DATA_HOME", data) // the child daemon inherits it
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdgconfig"))
	settingsPath, err := settings.Path()
	if err != nil {
		t.Fatal(err)
	}
	models, err := api.ModelsDir()
	if err != nil {
		t.Fatal(err)
	}
	copyCheckpoint(t, filepath.Join(models, "other"))
	sock := filepath.Join(dir, "run", "s.sock") // the daemon makes run/ 0700

	sys := &XDGSystem{DaemonPath: bin, DaemonArgs: []string{"--socket", sock}, ConfigHome: filepath.Join(dir, "config"), LogFile: filepath.Join(dir, "daemon.log")}
	defer sys.Stop()
	d := NewIPCDaemon(sock)
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := New(d, sys, Options{ModelsDir: models, CallTimeout: 10 * time.Second, SettingsFile: settingsPath, Interval: 50 * time.Millisecond})

	// waitFor polls until the menu satisfies cond.
	waitFor := func(what string, cond func(MenuState, string) bool) (MenuState, string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			txt := c.Poll(ctx).Text()
			st := c.State()
			if cond(st, txt) {
				return st, txt
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				log, _ := os.ReadFile(sys.LogFile)
				t.Fatalf("%s: menu:\n%s\ndaemon log:\n%s", what, txt, log)
			}
			if !sys.child.running() {
				log, _ := os.ReadFile(sys.LogFile)
				if strings.Contains(string(log), "not built yet") {
					t.Skip("startlux serve is not built yet")
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	if txt := c.Poll(ctx).Text(); !strings.Contains(txt, "Daemon not running") {
		t.Fatalf("before the start:\n%s", txt)
	}
	if err := c.Handle(ctx, ActionStart); err != nil {
		t.Fatal(err)
	}
	st, txt := waitFor("daemon ready", func(s MenuState, _ string) bool { return s.StatusErr == nil && s.Status.State == api.StateReady })
	name := st.Status.Model.Name
	if name == "" {
		t.Fatalf("status names no model: %+v", st.Status)
	}
	for _, want := range []string{
		"Model: " + name,
		"Backend: " + st.Status.Model.Backend,
		"int8: off",
		"Prefix cache: " + human.Bytes(st.Status.SnapshotBytes) + " / " + human.Bytes(st.Status.SnapshotLimit),
		"✓ demo",
		"  other",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("ready menu lacks %q:\n%s", want, txt)
		}
	}
	if st.Status.SnapshotLimit <= 0 {
		t.Errorf("snapshot limit %d", st.Status.SnapshotLimit)
	}

	// A request with fresh evidence leaves a prefix snapshot behind.
	before := st.Status.SnapshotBytes
	cl, err := ipc.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Call(ctx, api.MethodDecide, longRequest(), nil); err != nil {
		t.Fatalf("decide: %v", err)
	}
	st, txt = waitFor("cache grew", func(s MenuState, _ string) bool { return s.Status.SnapshotBytes != before })
	if !strings.Contains(txt, "Prefix cache: "+human.Bytes(st.Status.SnapshotBytes)+" / ") {
		t.Errorf("menu does not show the new cache size %d:\n%s", st.Status.SnapshotBytes, txt)
	}
	if st.Status.RequestsServed == 0 || !strings.Contains(txt, "Requests: ") {
		t.Errorf("requests served %d:\n%s", st.Status.RequestsServed, txt)
	}

	// Switch through the menu: the click returns once the daemon serves it.
	if err := c.Handle(ctx, UseAction("other")); err != nil {
		t.Fatalf("switch to other: %v", err)
	}
	st, txt = waitFor("switched", func(s MenuState, _ string) bool {
		return s.Status.State == api.StateReady && strings.HasSuffix(s.Status.Model.Path, string(filepath.Separator)+"other")
	})
	if !strings.Contains(txt, "✓ other") || strings.Contains(txt, "✓ demo") {
		t.Errorf("menu after the switch:\n%s", txt)
	}

	// The memory lines show what status reports, and it is real.
	m := st.Status.Memory
	if m.Resident <= m.Weights || m.Weights <= 0 || m.ScratchLimit <= 0 || m.CacheLimit != st.Status.SnapshotLimit {
		t.Errorf("memory status %+v", m)
	}
	for _, want := range []string{
		"Memory: " + human.Bytes(m.Resident) + " resident",
		"Scratch: " + human.Bytes(m.Scratch) + " / " + human.Bytes(m.ScratchLimit),
		"✓ After 30 Minutes", // the default
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("ready menu lacks %q:\n%s", want, txt)
		}
	}

	// Unload When Idle: the daemon takes it now, the settings file keeps it.
	if err := c.Handle(ctx, IdleUnloadAction(5*time.Minute)); err != nil {
		t.Fatalf("unload when idle: %v", err)
	}
	if st := c.State(); st.Status.IdleUnloadS != 300 {
		t.Errorf("after choosing 5 minutes the daemon unloads after %v s", st.Status.IdleUnloadS)
	}
	if s, err := settings.Load(settingsPath); err != nil || s.IdleUnload != "5m0s" {
		t.Errorf("settings file after choosing 5 minutes: %+v %v", s, err)
	}

	// Unload Model: the daemon keeps serving its socket without the model,
	// and the next decision loads it again.
	if err := c.Handle(ctx, ActionUnload); err != nil {
		t.Fatalf("unload: %v", err)
	}
	st, txt = waitFor("unloaded", func(s MenuState, _ string) bool { return s.Status.State == api.StateUnloaded })
	if !strings.Contains(txt, "Model other unloaded (idle since ") || !strings.Contains(txt, "Memory: "+human.Bytes(st.Status.Memory.Resident)+" resident") {
		t.Errorf("menu of an unloaded daemon:\n%s", txt)
	}
	if it, ok := c.Menu().Find(ActionUnload); !ok || it.Enabled {
		t.Errorf("an unloaded daemon's menu offers Unload Model:\n%s", txt)
	}
	if err := cl.Call(ctx, api.MethodDecide, longRequest(), nil); err != nil {
		t.Fatalf("decide after the unload: %v", err)
	}
	st, _ = waitFor("reloaded", func(s MenuState, _ string) bool {
		return s.Status.State == api.StateReady && strings.HasSuffix(s.Status.Model.Path, string(filepath.Separator)+"other")
	})

	// Use int8: the model in service reloads with int8 projections, the
	// menu names the kernel, the choice is saved.
	floatBytes := st.Status.Memory.Weights
	if err := c.Handle(ctx, ActionInt8); err != nil {
		t.Fatalf("use int8: %v", err)
	}
	st, txt = waitFor("int8 on", func(s MenuState, _ string) bool { return s.Status.State == api.StateReady && s.Status.Model.Int8 })
	if it, _ := c.Menu().Find(ActionInt8); !it.Checked || !strings.Contains(txt, "int8: on ("+st.Status.Model.Int8Kernel+")") || st.Status.Model.Int8Kernel == "" ||
		!strings.HasSuffix(st.Status.Model.Path, string(filepath.Separator)+"other") || st.Status.Memory.Weights >= floatBytes {
		t.Errorf("after Use int8 (float weights %d bytes): model %+v, weights %d bytes, menu:\n%s", floatBytes, st.Status.Model, st.Status.Memory.Weights, txt)
	}
	if s, err := settings.Load(settingsPath); err != nil || !s.Int8 || s.IdleUnload != "5m0s" {
		t.Errorf("settings after Use int8 (and 5 minutes before it): %+v, %v", s, err)
	}

	// Restart: a new process serves again, started in float with the
	// daemon's default arguments; Run brings it in line with the setting.
	pid := st.Status.PID
	if err := c.Handle(ctx, ActionRestart); err != nil {
		t.Fatal(err)
	}
	st, txt = waitFor("restarted", func(s MenuState, _ string) bool {
		return s.StatusErr == nil && s.Status.PID != pid && s.Status.State == api.StateReady
	})
	if st.Status.IdleUnloadS != 300 || !strings.Contains(txt, "✓ After 5 Minutes") {
		t.Errorf("after a restart the daemon unloads after %v s:\n%s", st.Status.IdleUnloadS, txt)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(runCtx) }()
	waitFor("int8 after the restart", func(s MenuState, _ string) bool {
		return s.Status.PID != pid && s.Status.State == api.StateReady && s.Status.Model.Int8
	})
	stopRun()
	<-ran

	// Stopped: the menu says so and offers to start it.
	if err := sys.Stop(); err != nil {
		t.Fatal(err)
	}
	_, txt = waitFor("stopped", func(s MenuState, _ string) bool { return s.StatusErr != nil })
	if !strings.Contains(txt, "Daemon not running") {
		t.Errorf("menu of a stopped daemon:\n%s", txt)
	}
	if it, ok := c.Menu().Find(ActionStart); !ok || !it.Enabled {
		t.Errorf("a stopped daemon's menu does not offer Start Daemon:\n%s", txt)
	}
}
