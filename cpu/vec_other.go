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
