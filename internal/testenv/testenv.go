// Package testenv is what tests use when they need something from the
// machine (a tool, root): off CI such a test skips saying what is missing and
// how to get it; in CI (CI=true, where ./build.sh test installs everything)
// it fails, so that a missing piece can never pass unnoticed as a skip.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// InCI reports whether the tests run in CI: the CI environment variable is
// set to a true value (CI=true, as CI services set it).
func InCI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// Missing ends a test that cannot run on this machine: it fails in CI and
// skips elsewhere, with the message either way.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s (CI=true: a missing tool fails the test; ./build.sh test installs it on Debian)", msg)
	}
	t.Skip(msg)
}

// LookPath returns the path of the program tool, or ends the test with
// [Missing], naming what to install (install says how, e.g. "apt-get install
// nodejs").
func LookPath(t testing.TB, tool, install string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		Missing(t, "%s is not installed (%s)", tool, install)
	}
	return p
}

// Root ends the test with [Missing] unless it runs as root; why says what
// root is needed for.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Getuid() != 0 {
		Missing(t, "not running as root, which %s needs", why)
	}
}
