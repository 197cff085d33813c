package app

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAskWith runs stand-ins for the dialog programs (shell scripts that
// answer as zenity does) and checks the answer, a cancel, a failure, the
// arguments given and the fallback order.
func TestAskWith(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	script := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script("answer", `echo "$@" > "$0.args"; printf 'owner/name@v1\n'`)
	script("cancel", `exit 1`)
	script("broken", `echo "cannot open display" >&2; exit 5`)
	look := func(name string) (string, error) {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return "", exec.ErrNotFound
		}
		return p, nil
	}
	cmd := func(name string) dialogCommand {
		return dialogCommand{name, func(title, prompt string) []string { return []string{"--title", title, "--text", prompt} }}
	}
	ctx := context.Background()
	got, ok, err := askWith(ctx, []dialogCommand{cmd("missing"), cmd("answer")}, look, "Add Model", "Repository?")
	if err != nil || !ok || got != "owner/name@v1" {
		t.Errorf("answer: %q, %v, %v", got, ok, err)
	}
	if args, _ := os.ReadFile(filepath.Join(dir, "answer.args")); strings.TrimSpace(string(args)) != "--title Add Model --text Repository?" {
		t.Errorf("arguments %q", args)
	}
	if got, ok, err := askWith(ctx, []dialogCommand{cmd("cancel"), cmd("answer")}, look, "t", "p"); err != nil || ok || got != "" {
		t.Errorf("cancel: %q, %v, %v", got, ok, err)
	}
	if _, _, err := askWith(ctx, []dialogCommand{cmd("broken")}, look, "t", "p"); err == nil || !strings.Contains(err.Error(), "cannot open display") {
		t.Errorf("broken: %v, want its stderr", err)
	}
	if _, _, err := askWith(ctx, linuxDialogs, func(string) (string, error) { return "", exec.ErrNotFound }, "t", "p"); !errors.Is(err, errNoDialog) {
		t.Errorf("none installed: %v", err)
	}
	// The real commands' arguments carry the title and prompt apart from
	// any script text.
	for _, c := range append([]dialogCommand{macDialog}, linuxDialogs...) {
		args := c.args(`T "x"`, `P'; do shell script "rm"`)
		if !strings.Contains(strings.Join(args, "\x00"), "\x00"+`P'; do shell script "rm"`) {
			t.Errorf("%s: the prompt is not its own argument: %q", c.name, args)
		}
	}
}
