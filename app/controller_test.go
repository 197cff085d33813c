package app

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
)

// fakeDaemon is a Daemon whose answers the test sets.
type fakeDaemon struct {
	mu      sync.Mutex
	status  api.Status
	err     error
	models  []api.ModelEntry
	loads   []string
	int8s   []bool // each load's int8
	loadFn  func(name string) error
	unloads int
}

func (f *fakeDaemon) Status(ctx context.Context) (api.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status, f.err
}

func (f *fakeDaemon) Models(ctx context.Context) ([]api.ModelEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.models), f.err
}

func (f *fakeDaemon) Pull(ctx context.Context, repo string, useInt8 bool) error {
	return f.Load(ctx, "pull "+repo, useInt8)
}

func (f *fakeDaemon) Load(ctx context.Context, name string, useInt8 bool) error {
	f.mu.Lock()
	f.loads = append(f.loads, name)
	f.int8s = append(f.int8s, useInt8)
	fn := f.loadFn
	f.mu.Unlock()
	if fn != nil {
		return fn(name)
	}
	return nil
}

func (f *fakeDaemon) Unload(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unloads++
	if f.status.State == api.StateReady {
		f.status.State = api.StateUnloaded
	}
	return nil
}

func (f *fakeDaemon) SetIdleUnload(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status.IdleUnloadS = d.Seconds()
	return nil
}

// fakeSystem records what the controller asks of the system.
type fakeSystem struct {
	mu       sync.Mutex
	calls    []string
	login    bool
	loginErr error
	startErr error
	notice   string
	onStart  func()
	// answer, answerOK and askErr are what AskText returns.
	answer   string
	answerOK bool
	askErr   error
}

func (f *fakeSystem) record(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fakeSystem) StartDaemon(ctx context.Context) (string, error) {
	f.record("start")
	if f.onStart != nil {
		f.onStart()
	}
	return f.notice, f.startErr
}

func (f *fakeSystem) RestartDaemon(ctx context.Context, pid int) error {
	f.record("restart")
	return nil
}

func (f *fakeSystem) LoginItem(ctx context.Context) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.login, f.loginErr
}

func (f *fakeSystem) SetLoginItem(ctx context.Context, on bool) error {
	f.mu.Lock()
	f.login = on
	f.mu.Unlock()
	f.record("login")
	return nil
}

func (f *fakeSystem) OpenFolder(ctx context.Context, dir string) error {
	f.record("open " + dir)
	return nil
}

func (f *fakeSystem) AskText(ctx context.Context, title, prompt string) (string, bool, error) {
	f.record("ask " + title)
	return f.answer, f.answerOK, f.askErr
}

func (f *fakeSystem) Stop() error {
	f.record("stop")
	return nil
}

func (f *fakeSystem) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func TestControllerActions(t *testing.T) {
	ctx := context.Background()
	d := &fakeDaemon{
		status: api.Status{State: api.StateReady, Model: api.ModelStatus{Name: "demo", Calibrated: true}},
		models: []api.ModelEntry{{Name: "demo", Current: true, Calibrated: true}, {Name: "other", Calibrated: true}},
	}
	sys := &fakeSystem{}
	quit := false
	c := New(d, sys, Options{ModelsDir: "/models", OnQuit: func() { quit = true }})
	var seen []Menu
	c.OnChange(func(m Menu) { seen = append(seen, m) })

	if len(seen) != 1 || !strings.Contains(seen[0].Text(), "Daemon starting") {
		t.Fatalf("OnChange did not get the current menu at once: %v", seen)
	}
	m := c.Poll(ctx)
	if it, ok := m.Find(UseAction("other")); !ok || !it.Enabled {
		t.Fatalf("switch item for other: %+v %v", it, ok)
	}
	c.Poll(ctx)
	if len(seen) != 2 || !reflect.DeepEqual(seen[1], m) {
		t.Errorf("after two identical polls the listener got %d menus, want the polled one once", len(seen)-1)
	}

	// Switching: while the load runs, the menu says so and disables the
	// model items; afterwards the daemon reports the new model.
	d.loadFn = func(name string) error {
		m := c.Menu()
		if !strings.Contains(m.Text(), "Switching to other…") {
			t.Errorf("menu during the switch:\n%s", m.Text())
		}
		if it, _ := m.Find(UseAction("demo")); it.Enabled {
			t.Errorf("model items stay enabled during a switch")
		}
		d.mu.Lock()
		d.status.Model.Name = name
		d.models = []api.ModelEntry{{Name: "demo", Calibrated: true}, {Name: "other", Current: true, Calibrated: true}}
		d.mu.Unlock()
		return nil
	}
	if err := c.Handle(ctx, UseAction("other")); err != nil {
		t.Fatal(err)
	}
	if got := d.loads; !slices.Equal(got, []string{"other"}) {
		t.Errorf("loads %v", got)
	}
	if it, _ := c.Menu().Find(UseAction("other")); !it.Checked {
		t.Errorf("other is not checked after the switch:\n%s", c.Menu().Text())
	}

	// A failed switch is reported on top of the menu.
	d.loadFn = func(string) error { return errors.New("model_load_failed: no such model") }
	if err := c.Handle(ctx, UseAction("gone")); err == nil {
		t.Fatal("failed switch returned no error")
	}
	if txt := c.Menu().Text(); !strings.HasPrefix(txt, "[⚠ switch model: model_load_failed: no such model]") {
		t.Errorf("menu after a failed switch:\n%s", txt)
	}

	for _, a := range []string{ActionLogin, ActionOpenModels, ActionRestart} {
		if err := c.Handle(ctx, a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	if txt := c.Menu().Text(); strings.Contains(txt, "⚠") {
		t.Errorf("the notice outlived a later action:\n%s", txt)
	}
	if it, _ := c.Menu().Find(ActionLogin); !it.Checked {
		t.Errorf("Start at Login not checked after turning it on")
	}
	if err := c.Handle(ctx, ActionLogin); err != nil {
		t.Fatal(err)
	}
	if it, _ := c.Menu().Find(ActionLogin); it.Checked {
		t.Errorf("Start at Login still checked after turning it off")
	}
	if err := c.Handle(ctx, ActionQuit); err != nil {
		t.Fatal(err)
	}
	if !quit {
		t.Errorf("quit did not call OnQuit")
	}
	want := []string{"login", "open /models", "restart", "login", "stop"}
	if got := sys.Calls(); !slices.Equal(got, want) {
		t.Errorf("system calls %q, want %q", got, want)
	}
	if err := c.Handle(ctx, "bogus"); err == nil || !strings.Contains(err.Error(), `unknown menu action "bogus"`) {
		t.Errorf("bogus action: %v", err)
	}
}

func TestControllerStartsDownDaemon(t *testing.T) {
	d := &fakeDaemon{err: errors.New("no daemon is listening on /x")}
	sys := &fakeSystem{notice: "approve me"}
	sys.onStart = func() {
		d.mu.Lock()
		d.err = nil
		d.status = api.Status{State: api.StateWarming, Model: api.ModelStatus{Name: "demo", Calibrated: true}}
		d.mu.Unlock()
	}
	c := New(d, sys, Options{Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(c.Menu().Text(), "Daemon warming up demo") {
		if time.Now().After(deadline) {
			t.Fatalf("menu never showed the warming daemon:\n%s", c.Menu().Text())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if got := sys.Calls(); !slices.Equal(got, []string{"start"}) {
		t.Errorf("system calls %q, want one start", got)
	}
	if txt := c.Menu().Text(); !strings.Contains(txt, "⚠ approve me") {
		t.Errorf("the start notice is not shown:\n%s", txt)
	}
}

func TestControllerStartTimeout(t *testing.T) {
	d := &fakeDaemon{err: errors.New("no daemon")}
	sys := &fakeSystem{}
	c := New(d, sys, Options{StartTimeout: time.Millisecond})
	ctx := context.Background()
	if err := c.Handle(ctx, ActionStart); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	txt := c.Poll(ctx).Text()
	if !strings.Contains(txt, "did not start within") || !strings.Contains(txt, "Start Daemon") {
		t.Errorf("menu after a start that never came up:\n%s", txt)
	}
	sys.startErr = errors.New("exec failed")
	if err := c.Handle(ctx, ActionStart); err == nil {
		t.Fatal("a failed start returned no error")
	}
	if txt := c.Menu().Text(); !strings.Contains(txt, "⚠ start the daemon: exec failed") {
		t.Errorf("menu after a failed start:\n%s", txt)
	}
}

// TestControllerAddModel: "Add Model…" asks for a repository and has the
// daemon pull it; a cancelled dialog does nothing, and a failed dialog or
// pull shows on the menu.
func TestControllerAddModel(t *testing.T) {
	ctx := context.Background()
	d := &fakeDaemon{status: api.Status{State: api.StateReady, Model: api.ModelStatus{Name: "demo", Calibrated: true}}}
	sys := &fakeSystem{answer: " Qwen/Qwen3.5-0.8B@main \n", answerOK: true}
	c := New(d, sys, Options{})
	c.Poll(ctx)
	if it, ok := c.Menu().Find(ActionAddModel); !ok || !it.Enabled || it.Title != "Add Model…" {
		t.Fatalf("Add Model… item: %+v, %v", it, ok)
	}
	if err := c.Handle(ctx, ActionAddModel); err != nil {
		t.Fatal(err)
	}
	if got := d.loads; !slices.Equal(got, []string{"pull Qwen/Qwen3.5-0.8B@main"}) {
		t.Errorf("daemon asked %q, want the pull of the repository typed", got)
	}
	sys.answerOK = false
	if err := c.Handle(ctx, ActionAddModel); err != nil || len(d.loads) != 1 || c.State().Notice != "" {
		t.Errorf("cancelled: %v, loads %q, notice %q", err, d.loads, c.State().Notice)
	}
	sys.askErr = errNoDialog
	if err := c.Handle(ctx, ActionAddModel); err == nil || !strings.Contains(c.State().Notice, "no dialog program") {
		t.Errorf("no dialog: %v, notice %q", err, c.State().Notice)
	}
	sys.askErr, sys.answerOK, sys.answer = nil, true, "owner/moe"
	d.loadFn = func(string) error {
		return &api.Error{Code: api.CodePullFailed, Message: "pull owner/moe@main: mixture-of-experts"}
	}
	if err := c.Handle(ctx, ActionAddModel); err == nil || !strings.Contains(c.State().Notice, "add model owner/moe: pull_failed: pull owner/moe@main: mixture-of-experts") {
		t.Errorf("failed pull: %v, notice %q", err, c.State().Notice)
	}
	if calls := sys.Calls(); len(calls) != 4 || calls[0] != "ask "+AddModelTitle {
		t.Errorf("system calls %q", calls)
	}
}
