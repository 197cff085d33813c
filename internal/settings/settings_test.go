package settings

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", File)
	s, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.IdleUnloadDuration(); ok {
		t.Fatal("a missing file has an idle-unload setting")
	}
	for _, d := range []time.Duration{0, 5 * time.Minute, 2 * time.Hour} {
		if err := Update(p, func(s *Settings) { s.SetIdleUnload(d) }); err != nil {
			t.Fatal(err)
		}
		s, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok, err := s.IdleUnloadDuration(); !ok || err != nil || got != d {
			t.Errorf("saved %v, read %v, %v, %v", d, got, ok, err)
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("settings file mode %v, %v", fi.Mode(), err)
	}
}

// TestSettingsApart checks that changing one setting keeps the other: the
// menu's "Use int8" and "Unload When Idle" share the file.
func TestSettingsApart(t *testing.T) {
	p := filepath.Join(t.TempDir(), File)
	if err := Update(p, func(s *Settings) { s.SetIdleUnload(5 * time.Minute) }); err != nil {
		t.Fatal(err)
	}
	if err := Update(p, func(s *Settings) { s.Int8 = true }); err != nil {
		t.Fatal(err)
	}
	s, err := Load(p)
	if d, ok, _ := s.IdleUnloadDuration(); err != nil || !s.Int8 || !ok || d != 5*time.Minute {
		t.Errorf("after setting idle unload, then int8: %+v, %v", s, err)
	}
	if err := Update(p, func(s *Settings) { s.SetIdleUnload(0) }); err != nil {
		t.Fatal(err)
	}
	if s, err := Load(p); err != nil || !s.Int8 || s.IdleUnload != "0s" {
		t.Errorf("after setting idle unload to never: %+v, %v", s, err)
	}
}

func TestBadFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ body, want string }{
		{`{"idle_unload": "soon"}`, `idle_unload "soon"`},
		{`{"idle_unload": "-5m"}`, `idle_unload "-5m"`},
		{`not json`, "invalid character"},
		{`{"int8": "yes"}`, "int8"},
	} {
		p := filepath.Join(dir, File)
		os.WriteFile(p, []byte(tc.body), 0o600)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.body, err, tc.want)
		}
	}
}

func TestPath(t *testing.T) {
	for _, tc := range []struct{ goos, home, xdg, want string }{
		{"darwin", "/Users/a", "/x", "/Users/a/Library/Application Support/StartLux/settings.json"},
		{"linux", "/home/a", "/cfg", "/cfg/startlux/settings.json"},
		{"linux", "/home/a", "rel", "/home/a/.config/startlux/settings.json"},
	} {
		if got := path(tc.goos, tc.home, tc.xdg); got != tc.want {
			t.Errorf("path(%s, %s, %s) = %s, want %s", tc.goos, tc.home, tc.xdg, got, tc.want)
		}
	}
}
