//go:build mactest && !(darwin && arm64)

package metal

import (
	"runtime"
	"testing"
)

// TestMacNeedsAppleSilicon fails a mactest build anywhere but Apple
// Silicon, so that the Mac's tests are never skipped without a word.
func TestMacNeedsAppleSilicon(t *testing.T) {
	t.Fatalf("-tags mactest runs the Metal tests on the GPU; this is %s/%s, not Apple Silicon", runtime.GOOS, runtime.GOARCH)
}
