//go:build !amd64

package cpu

func siluAVX2(dst, src *float32, n int)       { panic("cpu: no vector loops on this architecture") }
func sigmoidAVX2(dst, src *float32, n int)    { panic("cpu: no vector loops on this architecture") }
func bf16AVX2(dst *float32, src *byte, n int) { panic("cpu: no vector loops on this architecture") }
func expFlushAVX2(dst, src *float32, n int)   { panic("cpu: no vector loops on this architecture") }
func subScaledAVX2(dst, src *float32, n int, a float32) {
	panic("cpu: no vector loops on this architecture")
}
func scaleAVX2(dst, src *float32, n int, a float32) {
	panic("cpu: no vector loops on this architecture")
}

func conv4AVX2(o, w0, w1, w2, w3, x0, x1, x2, x3 *float32, n int) {
	panic("cpu: no vector loops on this architecture")
}

func maxAVX2(src *float32, n int) float32 { panic("cpu: no vector loops on this architecture") }
func expSubSumAVX2(dst, src *float32, n int, m float32, sum *[8]float32) {
	panic("cpu: no vector loops on this architecture")
}
func sumSqAVX2(x *float32, n int) float64 { panic("cpu: no vector loops on this architecture") }
func expSubSumAVX512(dst, src *float32, n int, m float32, sum *[16]float32) {
	panic("cpu: no vector loops on this architecture")
}
func maxAVX512(src *float32, n int) float32 { panic("cpu: no vector loops on this architecture") }
func siluAVX512(dst, src *float32, n int)   { panic("cpu: no vector loops on this architecture") }

func triSolve64AVX2(x *float32, ldx int, a *float32, lda int, n int) {
	panic("cpu: no vector loops on this architecture")
}

func addAVX2(dst, src *float32, n int)  { panic("cpu: no vector loops on this architecture") }
func mulAVX2(dst, a, b *float32, n int) { panic("cpu: no vector loops on this architecture") }
func scaleMulAVX2(dst, x, w *float32, n int, s float32) {
	panic("cpu: no vector loops on this architecture")
}

func deltaStepAVX2(st *float32, dk, dv int, k, q, v *float32, beta float32, o, kn *float32, dn float32, kv *float32) {
	panic("cpu: no vector loops on this architecture")
}

func deltaStepAVX512(st *float32, dk, dv int, k, q, v *float32, beta float32, o, kn *float32, dn float32, kv *float32) {
	panic("cpu: no vector loops on this architecture")
}
