package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeSystemctl writes a systemctl stand-in that appends its arguments to
// log and fails "show-environment" when noManager is set.
func fakeSystemctl(t *testing.T, dir, log string, noManager bool) string {
	t.Helper()
	fail := ""
	if noManager {
		fail = `case "$*" in *show-environment*) exit 1;; esac` + "\n"
	}
	p := filepath.Join(dir, "systemctl")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\n" + fail + "exit 0\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// Only whole lines count: a stand-in may have opened the file and not
	// yet written its line, or be killed before finishing it.
	lines := strings.Split(string(b), "\n")
	lines = lines[:len(lines)-1]
	if len(lines) == 0 {
		return nil
	}
	return lines
}

func TestXDGLoginItem(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		systemctl bool
		noManager bool
		onCalls   []string
		offCalls  []string
	}{
		{"systemd", true, false,
			[]string{"--user show-environment", "--user daemon-reload", "--user enable startlux.service"},
			[]string{"--user disable startlux.service", "--user daemon-reload"}},
		{"systemctl without a user manager", true, true,
			[]string{"--user show-environment"},
			[]string{"--user disable startlux.service", "--user daemon-reload"}},
		{"no systemctl", false, false, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "calls")
			s := &XDGSystem{
				DaemonPath: "/opt/Start Lux/startlux",
				AppPath:    "/opt/Start Lux/startlux-app",
				DaemonArgs: []string{"--socket", "/run/x y/s.sock"},
				ConfigHome: filepath.Join(dir, "config"),
			}
			if tt.systemctl {
				s.Systemctl = fakeSystemctl(t, dir, log, tt.noManager)
			}
			if on, err := s.LoginItem(ctx); err != nil || on {
				t.Fatalf("fresh LoginItem = %v, %v", on, err)
			}
			if err := s.SetLoginItem(ctx, true); err != nil {
				t.Fatal(err)
			}
			if on, err := s.LoginItem(ctx); err != nil || !on {
				t.Fatalf("LoginItem after on = %v, %v", on, err)
			}
			unit, err := os.ReadFile(filepath.Join(dir, "config/systemd/user/startlux.service"))
			if err != nil {
				t.Fatal(err)
			}
			if want := "ExecStart=\"/opt/Start Lux/startlux\" serve --socket \"/run/x y/s.sock\"\n"; !strings.Contains(string(unit), want) {
				t.Errorf("unit lacks %q:\n%s", want, unit)
			}
			entry, err := os.ReadFile(filepath.Join(dir, "config/autostart/startlux-app.desktop"))
			if err != nil {
				t.Fatal(err)
			}
			if want := "Exec=\"/opt/Start Lux/startlux-app\"\n"; !strings.Contains(string(entry), want) {
				t.Errorf("autostart entry lacks %q:\n%s", want, entry)
			}
			if got := readLines(t, log); strings.Join(got, "|") != strings.Join(tt.onCalls, "|") {
				t.Errorf("systemctl calls turning on: %q, want %q", got, tt.onCalls)
			}
			os.Remove(log)
			if err := s.SetLoginItem(ctx, false); err != nil {
				t.Fatal(err)
			}
			if on, err := s.LoginItem(ctx); err != nil || on {
				t.Fatalf("LoginItem after off = %v, %v", on, err)
			}
			for _, p := range []string{"config/systemd/user/startlux.service", "config/autostart/startlux-app.desktop"} {
				if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
					t.Errorf("%s still there after turning off (%v)", p, err)
				}
			}
			if got := readLines(t, log); strings.Join(got, "|") != strings.Join(tt.offCalls, "|") {
				t.Errorf("systemctl calls turning off: %q, want %q", got, tt.offCalls)
			}
		})
	}
}

func TestQuoting(t *testing.T) {
	for _, tt := range []struct{ in, systemd, desktop string }{
		{"/usr/bin/startlux", "/usr/bin/startlux", "/usr/bin/startlux"},
		{"/a b/c", `"/a b/c"`, `"/a b/c"`},
		{`/a"b`, `"/a\"b"`, `"/a\\"b"`},
		{"/a$b%c", `"/a$$b%%c"`, `"/a\\$b%%c"`},
		{"", `""`, ""},
	} {
		if got := systemdQuote(tt.in); got != tt.systemd {
			t.Errorf("systemdQuote(%q) = %s, want %s", tt.in, got, tt.systemd)
		}
		if got := desktopQuote(tt.in); got != tt.desktop {
			t.Errorf("desktopQuote(%q) = %s, want %s", tt.in, got, tt.desktop)
		}
	}
}

// TestXDGChildDaemon runs a stand-in daemon (a shell script) as the child:
// started with "serve" and the extra arguments, restarted, stopped.
func TestXDGChildDaemon(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	argsLog := filepath.Join(dir, "args")
	daemon := filepath.Join(dir, "startlux")
	script := "#!/bin/sh\necho \"$$ $*\" >> " + argsLog + "\ntrap 'exit 0' TERM\nwhile :; do sleep 0.05; done\n"
	if err := os.WriteFile(daemon, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &XDGSystem{DaemonPath: daemon, DaemonArgs: []string{"--socket", "/tmp/s"}, ConfigHome: dir, LogFile: filepath.Join(dir, "log/daemon.log")}
	waitLines := func(n int) []string {
		deadline := time.Now().Add(5 * time.Second)
		for {
			if l := readLines(t, argsLog); len(l) >= n {
				return l
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stand-in daemon did not start %d times", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := s.StartDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	first := waitLines(1)
	if !strings.HasSuffix(first[0], " serve --socket /tmp/s") {
		t.Errorf("daemon ran with %q", first[0])
	}
	if _, err := s.StartDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.RestartDaemon(ctx, 0); err != nil {
		t.Fatal(err)
	}
	lines := waitLines(2)
	if len(lines) != 2 || lines[0] == lines[1] {
		t.Errorf("after a second start and a restart the daemon ran as %q; want two different processes", lines)
	}
	if !s.child.running() {
		t.Errorf("no child after the restart")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.child.running() {
		t.Errorf("child still running after Stop")
	}
	if _, err := os.Stat(s.LogFile); err != nil {
		t.Errorf("daemon log: %v", err)
	}
	s.DaemonPath = ""
	if _, err := s.StartDaemon(ctx); err == nil || !strings.Contains(err.Error(), "cannot find the startlux executable") {
		t.Errorf("start without an executable: %v", err)
	}
}
