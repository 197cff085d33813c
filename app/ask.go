package app

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// This file asks the user for a line of text with the desktop's own dialog
// program: osascript on macOS, zenity or kdialog elsewhere.

// errNoDialog is returned when no dialog program is installed.
var errNoDialog = errors.New("no dialog program (zenity or kdialog) is installed to ask with; use \"startlux pull REPO\" and \"startlux use NAME\" instead")

// dialogCommand is one way to ask: the program and its arguments for a
// title and a prompt. The program prints the answer on stdout and exits
// with status 1 when the user cancels.
type dialogCommand struct {
	name string
	args func(title, prompt string) []string
}

// macDialog asks through AppleScript's "display dialog", the title and
// prompt passed as arguments (never spliced into the script).
var macDialog = dialogCommand{"/usr/bin/osascript", func(title, prompt string) []string {
	return []string{
		"-e", "on run argv",
		"-e", `text returned of (display dialog (item 2 of argv) default answer "" with title (item 1 of argv) buttons {"Cancel", "OK"} default button "OK")`,
		"-e", "end run",
		title, prompt,
	}
}}

// linuxDialogs are tried in order.
var linuxDialogs = []dialogCommand{
	{"zenity", func(title, prompt string) []string {
		return []string{"--entry", "--title", title, "--text", prompt}
	}},
	{"kdialog", func(title, prompt string) []string {
		return []string{"--title", title, "--inputbox", prompt}
	}},
}

// askWith runs the first of cmds whose program is found (look finds it, as
// exec.LookPath) and returns the line the user typed; ok is false when
// they cancelled.
func askWith(ctx context.Context, cmds []dialogCommand, look func(string) (string, error), title, prompt string) (string, bool, error) {
	for _, c := range cmds {
		path, err := look(c.name)
		if err != nil {
			continue
		}
		out, err := exec.CommandContext(ctx, path, c.args(title, prompt)...).Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return "", false, nil // cancelled
		}
		if err != nil {
			msg := ""
			if ee != nil {
				msg = strings.TrimSpace(string(ee.Stderr))
			}
			return "", false, fmt.Errorf("ask with %s: %w %s", c.name, err, msg)
		}
		return strings.TrimRight(string(out), "\r\n"), true, nil
	}
	return "", false, errNoDialog
}
