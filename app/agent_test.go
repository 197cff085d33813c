package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/internal/objcrt"
)

func TestPlanAgent(t *testing.T) {
	a := &agentBuild{Plist: "p1", Executable: "e1"}
	same := &agentBuild{Plist: "p1", Executable: "e1"}
	newExe := &agentBuild{Plist: "p1", Executable: "e2"}
	newPlist := &agentBuild{Plist: "p2", Executable: "e1"}
	cases := []struct {
		name              string
		status            int
		recorded, current *agentBuild
		want              agentAction
	}{
		{"first run", smNotRegistered, nil, a, agentRegister},
		{"not found", smNotFound, a, a, agentRegister},
		{"unknown status", 7, a, a, agentRegister},
		{"enabled, same build", smEnabled, a, same, agentKeep},
		{"awaiting approval, same build", smRequiresApproval, a, same, agentKeep},
		{"enabled, executable updated", smEnabled, a, newExe, agentReregister},
		{"enabled, plist updated", smEnabled, a, newPlist, agentReregister},
		{"awaiting approval, updated", smRequiresApproval, a, newExe, agentReregister},
		// Registered by a build that recorded nothing (or a lost record):
		// nothing says it matches, so register again.
		{"enabled, nothing recorded", smEnabled, nil, a, agentReregister},
		// The bundle's files cannot be read: nothing to compare with.
		{"enabled, build unreadable", smEnabled, a, nil, agentKeep},
		{"not registered, build unreadable", smNotRegistered, nil, nil, agentRegister},
	}
	for _, c := range cases {
		if got := planAgent(c.status, c.recorded, c.current); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// fakeBundle lays out the files of a StartLux.app that the agent's build
// is read from.
func fakeBundle(t *testing.T, plist, exe string) string {
	t.Helper()
	app := filepath.Join(t.TempDir(), "StartLux.app")
	p, e := agentFiles(app)
	for path, content := range map[string]string{p: plist, e: exe} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return app
}

// TestAgentUpdate walks the life of a registration: the first run records
// the build; a later run of the same bundle keeps it; replacing the daemon
// executable (an update) makes the agent registered again.
func TestAgentUpdate(t *testing.T) {
	app := fakeBundle(t, "<plist>v1</plist>", "daemon v1")
	record := filepath.Join(t.TempDir(), "StartLux", "agent-registration.json")

	rec, err := loadAgentRecord(record)
	if rec != nil || err != nil {
		t.Fatalf("no record yet: got %v, %v", rec, err)
	}
	cur, err := readAgentBuild(app)
	if err != nil {
		t.Fatal(err)
	}
	if got := planAgent(smNotRegistered, rec, &cur); got != agentRegister {
		t.Fatalf("first run: %v", got)
	}
	if err := saveAgentRecord(record, cur); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(record); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("record file: %v, mode %v", err, st.Mode())
	}

	rec, err = loadAgentRecord(record)
	if err != nil || rec == nil || *rec != cur {
		t.Fatalf("record read back: %+v, %v; want %+v", rec, err, cur)
	}
	again, err := readAgentBuild(app)
	if err != nil {
		t.Fatal(err)
	}
	if got := planAgent(smEnabled, rec, &again); got != agentKeep {
		t.Errorf("same bundle: %v", got)
	}

	_, exe := agentFiles(app)
	if err := os.WriteFile(exe, []byte("daemon v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	updated, err := readAgentBuild(app)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Executable == cur.Executable || updated.Plist != cur.Plist {
		t.Fatalf("hashes after replacing the executable: %+v, before %+v", updated, cur)
	}
	if got := planAgent(smEnabled, rec, &updated); got != agentReregister {
		t.Errorf("after an update: %v", got)
	}

	if err := os.WriteFile(record, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rec, err := loadAgentRecord(record); rec != nil || err == nil {
		t.Errorf("corrupt record: %v, %v; want an error and no record", rec, err)
	}
	if _, err := readAgentBuild(filepath.Join(t.TempDir(), "Missing.app")); err == nil {
		t.Error("reading the build of a missing bundle did not fail")
	}
}

func TestRegisterFailure(t *testing.T) {
	sm := []string{"SMAppServiceErrorDomain", "com.apple.ServiceManagement"}
	invalidSig := &objcrt.NSError{Domain: "SMAppServiceErrorDomain", Code: smErrInvalidSignature, Text: "Invalid signature"}
	cases := []struct {
		name       string
		err        error
		sealed     bool
		domains    []string
		notSigned  bool
		noticePart string
	}{
		{"invalid signature, sealed bundle", invalidSig, true, sm, true, NotSignedNotice},
		{"invalid signature, wrapped", fmt.Errorf("register: %w", invalidSig), true, sm, true, NotSignedNotice},
		{"invalid signature, framework domain", &objcrt.NSError{Domain: "com.apple.ServiceManagement", Code: 3}, true, sm, true, NotSignedNotice},
		{"invalid signature, domains unknown", invalidSig, true, nil, true, NotSignedNotice},
		{"code 3 of another domain", &objcrt.NSError{Domain: "NSPOSIXErrorDomain", Code: 3, Text: "No such process"}, true, sm, false, "No such process"},
		{"unsealed bundle, any failure", &objcrt.NSError{Domain: "SMAppServiceErrorDomain", Code: 1, Text: "Operation not permitted"}, false, sm, true, NotSignedNotice},
		{"sealed bundle, other failure", &objcrt.NSError{Domain: "SMAppServiceErrorDomain", Code: 1, Text: "Operation not permitted"}, true, sm, false, "could not be registered: Operation not permitted"},
		{"a plain error", errors.New("status 3 after registering"), true, sm, false, "status 3 after registering; it runs as the app's child"},
	}
	for _, c := range cases {
		notice, notSigned := registerFailure(c.err, c.sealed, c.domains)
		if notSigned != c.notSigned || !strings.Contains(notice, c.noticePart) {
			t.Errorf("%s: %q, not signed %v; want %v and a notice containing %q", c.name, notice, notSigned, c.notSigned, c.noticePart)
		}
	}
	if NotSignedNotice != "Login item unavailable: the app is not signed; see docs/app.md" {
		t.Errorf("the notice reads %q", NotSignedNotice)
	}
}

func TestBundleSealed(t *testing.T) {
	app := fakeBundle(t, "p", "e")
	if bundleSealed(app) {
		t.Error("a bundle without _CodeSignature/CodeResources counts as sealed")
	}
	seal := filepath.Join(app, "Contents", "_CodeSignature", "CodeResources")
	if err := os.MkdirAll(filepath.Dir(seal), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seal, []byte("<plist/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !bundleSealed(app) {
		t.Error("a sealed bundle counts as unsealed")
	}
}

// TestNotSignedMenu: when the system reports the signature refused, the
// menu says so on top, the daemon it runs as a child is shown serving, and
// Start at Login is disabled.
func TestNotSignedMenu(t *testing.T) {
	d := &fakeDaemon{err: errors.New("connection refused")}
	sys := &fakeSystem{notice: NotSignedNotice, loginErr: errNotSigned}
	sys.onStart = func() {
		d.mu.Lock()
		d.err, d.status = nil, api.Status{State: api.StateReady, Model: api.ModelStatus{Name: "demo", Backend: "cpu"}}
		d.mu.Unlock()
	}
	c := New(d, sys, Options{})
	if err := c.Handle(context.Background(), ActionStart); err != nil {
		t.Fatal(err)
	}
	m := c.Menu()
	if len(m.Items) == 0 || m.Items[0].Title != "⚠ "+NotSignedNotice {
		t.Fatalf("top of the menu:\n%s", m.Text())
	}
	if !strings.Contains(m.Text(), "Model: demo") {
		t.Errorf("the child daemon is not shown serving:\n%s", m.Text())
	}
	if it, ok := m.Find(ActionLogin); !ok || it.Enabled {
		t.Errorf("Start at Login: %+v, %v; want it shown disabled", it, ok)
	}
}

func TestBundleOf(t *testing.T) {
	cases := map[string]string{
		"/Applications/StartLux.app/Contents/MacOS/StartLux": "/Applications/StartLux.app",
		"/Users/a/dist/StartLux.app/Contents/MacOS/StartLux": "/Users/a/dist/StartLux.app",
		"/usr/local/bin/startlux-app":                        "",
		"/tmp/MacOS/StartLux":                                "",
		"/tmp/X.app/MacOS/StartLux":                          "",
	}
	for exe, want := range cases {
		if got := bundleOf(exe); got != want {
			t.Errorf("bundleOf(%q) = %q, want %q", exe, got, want)
		}
	}
}
