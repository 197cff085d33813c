//go:build !mactest

package metal

import "github.com/startlux/startlux/tensor"

// openUnderTest opens the backend this package's tests run on: the kernel
// emulator (clang-19). Built with -tags mactest (./build.sh mac-test on a
// Mac), they run on the GPU instead (device_mac_test.go).
func openUnderTest() (tensor.Backend, error) { return NewEmulated(Options{}) }
