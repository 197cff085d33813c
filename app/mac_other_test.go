//go:build mactest && !darwin

package app

import (
	"runtime"
	"testing"
)

// TestMacNeedsMacOS fails a mactest build off macOS, so that the app's Mac
// tests are never skipped without a word.
func TestMacNeedsMacOS(t *testing.T) {
	t.Fatalf("-tags mactest runs the app's AppKit and SMAppService tests; this is %s, not macOS", runtime.GOOS)
}
