//go:build !amd64

package cpu

// flushSubnormals runs fn. Arm64 CPUs handle subnormals at full speed, so
// there is nothing to gain from changing the floating-point mode there.
func flushSubnormals(fn func()) { fn() }
