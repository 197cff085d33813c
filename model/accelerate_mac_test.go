//go:build mactest

package model

import (
	"testing"

	"github.com/startlux/startlux/cpu"
)

// TestMacAccelerateLoaded (./build.sh mac-test) checks that this package's
// tests, which hold the CPU backend to the transformers goldens, run on
// Accelerate on the Mac; anywhere else it fails, never skips.
func TestMacAccelerateLoaded(t *testing.T) {
	if b := newBackend(t).(*cpu.Backend).BLAS(); b != "accelerate" {
		t.Fatalf("the CPU backend loaded %q, want accelerate (mactest runs on a Mac)", b)
	}
}
