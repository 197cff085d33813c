package app

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/internal/settings"
)

// TestControllerInt8 checks "Use int8": the checkbox reloads the model in
// service with int8 toggled and keeps the choice in the settings file,
// model switches load with it, a refused reload leaves it (and the check
// mark) as it was and says why, and a new controller reads it back.
func TestControllerInt8(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "settings.json")
	d := &fakeDaemon{
		status: api.Status{State: api.StateReady, PID: 7, Model: api.ModelStatus{Name: "demo"}},
		models: []api.ModelEntry{{Name: "demo", Embedded: true, Current: true}, {Name: "other", Path: "/m/other"}},
	}
	d.loadFn = func(name string) error {
		d.mu.Lock()
		d.status.Model.Int8 = d.int8s[len(d.int8s)-1]
		d.mu.Unlock()
		return nil
	}
	c := New(d, &fakeSystem{}, Options{SettingsFile: file})
	c.Poll(ctx)
	if it, ok := c.Menu().Find(ActionInt8); !ok || !it.Enabled || it.Checked || !it.Checkable {
		t.Fatalf("Use int8 before: %+v %v", it, ok)
	}
	if err := c.Handle(ctx, ActionInt8); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.loads, []string{"demo"}) || !slices.Equal(d.int8s, []bool{true}) {
		t.Fatalf("loads %v, int8 %v; want the current model reloaded with int8", d.loads, d.int8s)
	}
	if it, _ := c.Menu().Find(ActionInt8); !it.Checked {
		t.Errorf("Use int8 is not checked after turning it on:\n%s", c.Menu().Text())
	}
	if s, err := settings.Load(file); err != nil || !s.Int8 {
		t.Errorf("settings file after turning int8 on: %+v, %v", s, err)
	}
	if err := c.Handle(ctx, UseAction("other")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.loads, []string{"demo", "other"}) || !slices.Equal(d.int8s, []bool{true, true}) {
		t.Errorf("a model switch loaded %v with int8 %v; want it kept on", d.loads, d.int8s)
	}

	d.mu.Lock()
	d.models = []api.ModelEntry{{Name: "demo", Embedded: true}, {Name: "other", Path: "/m/other", Current: true}}
	d.loadFn = func(string) error { return errors.New("model_load_failed: the disk is gone") }
	d.mu.Unlock()
	c.Poll(ctx)
	if err := c.Handle(ctx, ActionInt8); err == nil {
		t.Fatal("a refused reload returned no error")
	}
	if d.loads[2] != "/m/other" || d.int8s[2] {
		t.Errorf("turning int8 off loaded %q with int8 %v; want /m/other in float", d.loads[2], d.int8s[2])
	}
	txt := c.Menu().Text()
	if it, _ := c.Menu().Find(ActionInt8); !it.Checked || !strings.Contains(txt, "⚠ turn int8 off: model_load_failed: the disk is gone") {
		t.Errorf("after a refused reload:\n%s", txt)
	}
	if s, _ := settings.Load(file); !s.Int8 {
		t.Error("the refused reload changed the settings file")
	}
	if it, _ := New(d, &fakeSystem{}, Options{SettingsFile: file}).Menu().Find(ActionInt8); !it.Checked {
		t.Error("a new controller does not read the setting back")
	}
}

// TestControllerInt8AfterRestart checks that Run brings a daemon that
// serves against the setting (a daemon restarted without it) in line,
// once per daemon process, and leaves alone a daemon whose backend has no
// int8.
func TestControllerInt8AfterRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "settings.json")
	if err := settings.Save(file, settings.Settings{Int8: true}); err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{
		status: api.Status{State: api.StateReady, PID: 7, Model: api.ModelStatus{Name: "demo"}},
		models: []api.ModelEntry{{Name: "demo", Embedded: true, Current: true}},
	}
	c := New(d, &fakeSystem{}, Options{SettingsFile: file, Interval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	loads := func() int {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.loads)
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitUntil("the reload with int8", func() bool { return loads() == 1 })
	time.Sleep(30 * time.Millisecond) // several polls: the float model is still served
	d.mu.Lock()
	if len(d.loads) != 1 || !d.int8s[0] || d.loads[0] != "demo" {
		t.Errorf("loads %v int8 %v; want one reload of demo with int8", d.loads, d.int8s)
	}
	// A new daemon process on a backend without int8: left alone.
	d.status = api.Status{State: api.StateReady, PID: 8, Model: api.ModelStatus{Name: "demo", Int8Unavailable: "backend x has no int8 matrix products"}}
	d.mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	if loads() != 1 {
		t.Errorf("a daemon that cannot run int8 was reloaded")
	}
	d.mu.Lock()
	d.status = api.Status{State: api.StateReady, PID: 9, Model: api.ModelStatus{Name: "demo"}}
	d.mu.Unlock()
	waitUntil("the reload of the next daemon process", func() bool { return loads() == 2 })
	cancel()
	<-done
}
