//go:build !amd64

package cpu

// The row loops of int8 products: the portable ones on this architecture.

func int8Out(out []float32, acc []int32, rs float32, cs []float32) { int8OutGo(out, acc, rs, cs) }

func absMax(x []float32) (float32, bool) { return absMaxGo(x) }

func quantizeVec(dst []byte, x []float32, inv float32, xor byte) {
	quantizeVecGo(dst, x, inv, xor)
}
