package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServiceStatusName(t *testing.T) {
	want := map[int]string{0: "not registered", 1: "enabled", 2: "requires approval", 3: "not found", 9: "unknown status 9"}
	for st, name := range want {
		if got := serviceStatusName(st); got != name {
			t.Errorf("status %d: %q, want %q", st, got, name)
		}
	}
}

func TestAgentRecordDetail(t *testing.T) {
	a, b := &agentBuild{"p", "e"}, &agentBuild{"p", "f"}
	for _, c := range []struct {
		rec, cur *agentBuild
		part     string
	}{
		{a, a, "this build"}, {a, b, "another build"}, {nil, a, "no registration recorded"}, {a, nil, "cannot be read"},
	} {
		if got := agentRecordDetail(c.rec, c.cur); !strings.Contains(got, c.part) {
			t.Errorf("%v %v: %q, want %q in it", c.rec, c.cur, got, c.part)
		}
	}
}

// TestXDGLoginItems: the autostart entry and the unit are reported absent,
// then present after Start at Login is turned on (with systemd's answer
// where systemctl reaches a user manager).
func TestXDGLoginItems(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	ctl := filepath.Join(dir, "systemctl")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\ncase \"$*\" in *is-enabled*) echo enabled;; esac\nexit 0\n"
	if err := os.WriteFile(ctl, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &XDGSystem{DaemonPath: "/opt/startlux", AppPath: "/opt/startlux-app", ConfigHome: filepath.Join(dir, "config"), Systemctl: ctl}
	items, err := s.LoginItems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[0].State != "absent" || items[1].State != "absent" {
		t.Fatalf("before: %+v", items)
	}
	if err := s.SetLoginItem(ctx, true); err != nil {
		t.Fatal(err)
	}
	items, err = s.LoginItems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if items[0].State != "present" || items[0].Path != filepath.Join(dir, "config", "autostart", AutostartEntry) {
		t.Errorf("autostart entry: %+v", items[0])
	}
	if items[1].State != "present, enabled" || items[1].Kind != "systemd user unit" {
		t.Errorf("unit: %+v", items[1])
	}
}
