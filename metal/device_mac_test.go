//go:build mactest

package metal

import "github.com/startlux/startlux/tensor"

// With -tags mactest (./build.sh mac-test) every test of this package that
// runs kernels runs them on the Mac's GPU, against the CPU backend and the
// goldens, instead of under the emulator; the emulator's own tests are left
// out. Off Apple Silicon New fails, and so does every such test: the tag
// never skips silently.
func openUnderTest() (tensor.Backend, error) { return New(Options{}) }

// int8Required: a Mac's GPU may lack what the int8 kernels need (an M5,
// macOS 26); the int8 tests then check the refusal instead.
const int8Required = false
