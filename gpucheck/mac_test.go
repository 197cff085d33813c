//go:build mactest

package gpucheck

import (
	"testing"

	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/tensor"
)

// onGPU: built with -tags mactest (./build.sh mac-test), the tests run on
// the Mac's GPU, the demo model's pass included.
const onGPU = true

// backendUnderTest is the Mac's GPU; without one the test fails (mac-test
// runs only where there is one).
func backendUnderTest(t *testing.T) tensor.Backend {
	t.Helper()
	be, err := metal.New(metal.Options{})
	if err != nil {
		t.Fatalf("the Mac's GPU: %v", err)
	}
	return be
}
