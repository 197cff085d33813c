//go:build mactest

package decide

import (
	"testing"

	"github.com/startlux/startlux/cpu"
)

// TestMacAccelerateLoaded (./build.sh mac-test) checks that this package's
// tests, which hold the demo model's decisions to decide-demo.json on the
// CPU backend, run on Accelerate on the Mac; anywhere else it fails, never
// skips.
func TestMacAccelerateLoaded(t *testing.T) {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if be.BLAS() != "accelerate" {
		t.Fatalf("the CPU backend loaded %q, want accelerate (mactest runs on a Mac)", be.BLAS())
	}
}
