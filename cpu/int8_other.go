//go:build !amd64 && !arm64

package cpu

// archInt8Kernels returns no kernels: this architecture runs the portable
// one.
func archInt8Kernels() []int8Kernel { return nil }
