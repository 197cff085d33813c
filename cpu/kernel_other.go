//go:build !amd64

package cpu

// haveKernel is false: there is no vector GEMM kernel for this architecture,
// so the pure-Go GEMM uses its portable loops.
var haveKernel = false

func kern6x16(k int, a, b, c *float32) { panic("cpu: no GEMM kernel on this architecture") }

// haveAVX512 is false: no 16-lane loops on this architecture.
var haveAVX512 = false
