package cpu

import "runtime"

func getMXCSR() uint32

func setMXCSR(x uint32)

// MXCSR bits: flush results to zero, treat subnormal operands as zero.
const mxcsrFTZDAZ = 1<<15 | 1<<6

// flushSubnormals runs fn with subnormal floats flushed to zero on the
// current thread (pinned for the duration), restoring the mode afterwards.
//
// The delta rule multiplies decay factors down to e^−60 with small keys and
// values; the products underflow into subnormals, and sgemm on such operands
// runs several times slower on many x86 CPUs. Flushed values are below
// 1.2e-38, far under float32 precision of anything they are added to.
// OpenBLAS, called on the same thread, inherits the mode.
func flushSubnormals(fn func()) {
	runtime.LockOSThread()
	old := getMXCSR()
	setMXCSR(old | mxcsrFTZDAZ)
	defer func() {
		setMXCSR(old)
		runtime.UnlockOSThread()
	}()
	fn()
}
