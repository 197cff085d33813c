package cpu

// Vector loops of vec_amd64.s; they need AVX2 (haveKernel).

//go:noescape
func siluAVX2(dst, src *float32, n int)

//go:noescape
func sigmoidAVX2(dst, src *float32, n int)

//go:noescape
func bf16AVX2(dst *float32, src *byte, n int)

//go:noescape
func expFlushAVX2(dst, src *float32, n int)

//go:noescape
func subScaledAVX2(dst, src *float32, n int, a float32)

//go:noescape
func scaleAVX2(dst, src *float32, n int, a float32)

//go:noescape
func conv4AVX2(o, w0, w1, w2, w3, x0, x1, x2, x3 *float32, n int)

//go:noescape
func maxAVX2(src *float32, n int) float32

//go:noescape
func expSubSumAVX2(dst, src *float32, n int, m float32, sum *[8]float32)

//go:noescape
func sumSqAVX2(x *float32, n int) float64

//go:noescape
func expSubSumAVX512(dst, src *float32, n int, m float32, sum *[16]float32)

//go:noescape
func maxAVX512(src *float32, n int) float32

//go:noescape
func siluAVX512(dst, src *float32, n int)

//go:noescape
func triSolve64AVX2(x *float32, ldx int, a *float32, lda int, n int)

//go:noescape
func addAVX2(dst, src *float32, n int)

//go:noescape
func mulAVX2(dst, a, b *float32, n int)

//go:noescape
func scaleMulAVX2(dst, x, w *float32, n int, s float32)

//go:noescape
func deltaStepAVX2(st *float32, dk, dv int, k, q, v *float32, beta float32, o, kn *float32, dn float32, kv *float32)

//go:noescape
func deltaStepAVX512(st *float32, dk, dv int, k, q, v *float32, beta float32, o, kn *float32, dn float32, kv *float32)
