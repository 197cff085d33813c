package cpu

import (
	"math"

	"golang.org/x/sys/cpu"
)

// haveVNNI reports whether the avx512-vnni kernel can run here (AVX-512F
// with 256-bit forms, VNNI, and the OS saving the registers).
var haveVNNI = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

// archInt8Kernels returns the amd64 kernels, best first.
func archInt8Kernels() []int8Kernel {
	return []int8Kernel{
		{name: "avx512-vnni", env: "avx512vnni", mr: 4, nr: 6, kv: 64, offset: true, ok: haveVNNI, tile: int8TileVNNI},
		{name: "avx2", env: "avx2", mr: 3, nr: 3, kv: 32, ok: cpu.X86.HasAVX2, tile: int8TileAVX2, panel: int8PanelAVX2},
	}
}

// int8TileVNNI is the 4×6 avx512-vnni tile (kv 64; activations offset).
func int8TileVNNI(k int, a []byte, lda int, w []byte, ldw int, c []int32) {
	_, _, _ = a[3*lda+k-1], w[5*ldw+k-1], c[23]
	int8Tile4x6VNNI(k, &a[0], lda, &w[0], ldw, &c[0])
}

// int8TileAVX2 is the 3×3 avx2 tile (kv 32): a panel of one tile.
func int8TileAVX2(k int, a []byte, lda int, w []byte, ldw int, c []int32) {
	int8PanelAVX2(k, a, lda, w, ldw, 1, c, 3, false)
}

// int8PanelAVX2 runs nt 3×3 avx2 tiles side by side, accumulating in c
// (see int8Kernel.panel).
func int8PanelAVX2(k int, a []byte, lda int, w []byte, ldw, nt int, c []int32, ldc int, add bool) {
	_, _, _ = a[2*lda+k-1], w[(3*nt-1)*ldw+k-1], c[2*ldc+3*nt-1]
	int8Panel3x3AVX2(k, &a[0], lda, &w[0], ldw, nt, &c[0], ldc, add)
}

// int8Out is the epilogue: out[j] = (float32(acc[j])·rs)·cs[j].
func int8Out(out []float32, acc []int32, rs float32, cs []float32) {
	n := len(out)
	i := 0
	if haveKernel && n >= 8 {
		i = n &^ 7
		_, _ = acc[i-1], cs[i-1]
		int8OutAVX2(&out[0], &acc[0], &cs[0], i, rs)
	}
	if i < n {
		int8OutGo(out[i:], acc[i:n], rs, cs[i:n])
	}
}

// absMax is tensor.AbsMax.
func absMax(x []float32) (float32, bool) {
	var m uint32
	i := 0
	if haveKernel && len(x) >= 32 {
		i = len(x) &^ 31
		m = absMaxAVX2(&x[0], i)
	}
	for _, v := range x[i:] {
		m = max(m, math.Float32bits(v)&0x7fffffff)
	}
	return math.Float32frombits(m), m < 0x7f800000
}

// quantizeVec stores rint(x[i]·inv) clamped to ±127, XORed with xor, into
// dst[i].
func quantizeVec(dst []byte, x []float32, inv float32, xor byte) {
	i := 0
	if haveKernel && len(x) >= 32 {
		i = len(x) &^ 31
		_ = dst[i-1]
		quantizeAVX2(&dst[0], &x[0], i, inv, uint32(xor)*0x01010101)
	}
	quantizeVecGo(dst[i:], x[i:], inv, xor)
}

// Loops of int8_amd64.s.

//go:noescape
func int8Tile4x6VNNI(k int, a *byte, lda int, w *byte, ldw int, c *int32)

//go:noescape
func int8Panel3x3AVX2(k int, a *byte, lda int, w *byte, ldw, nt int, c *int32, ldc int, add bool)

//go:noescape
func int8OutAVX2(out *float32, acc *int32, cs *float32, n int, rs float32)

//go:noescape
func absMaxAVX2(x *float32, n int) uint32

//go:noescape
func quantizeAVX2(dst *byte, x *float32, n int, inv float32, xor uint32)
