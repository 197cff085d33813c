// Package metaltest opens the Metal backend under the kernel emulator for
// the tests of the packages above metal (the GPU check, doctor, the
// daemon): one place for the "no clang-19 here" rule.
package metaltest

import (
	"errors"
	"testing"

	"github.com/startlux/startlux/internal/testenv"
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/tensor"
)

// Emulated returns the Metal backend under the emulator with opts. Without
// the emulator's compiler the test ends through [testenv.Missing] (a
// failure in CI, a skip elsewhere); any other error fails it.
func Emulated(t testing.TB, opts metal.Options) tensor.Backend {
	t.Helper()
	be, err := metal.NewEmulated(opts)
	if errors.Is(err, metal.ErrNoCompiler) {
		testenv.Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return be
}
