//go:build !mactest

package metal

import "github.com/startlux/startlux/tensor"

// openUnderTest opens the backend this package's tests run on: the kernel
// emulator (clang-19). Built with -tags mactest (./build.sh mac-test on a
// Mac), they run on the GPU instead (device_mac_test.go).
func openUnderTest() (tensor.Backend, error) { return NewEmulated(Options{}) }

// int8Required: the emulator models an M5 with Metal Performance
// Primitives, so the int8 kernels must be available under it.
const int8Required = true
