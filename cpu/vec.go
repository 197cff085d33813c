package cpu

// siluVec sets dst[i] = silu(src[i]) for i < len(dst); dst may equal src.
func siluVec(dst, src []float32) {
	src = src[:len(dst)]
	i := 0
	if haveKernel && len(dst) >= 8 {
		i = len(dst) &^ 7
		siluAVX2(&dst[0], &src[0], i)
	}
	for ; i < len(dst); i++ {
		dst[i] = silu(src[i])
	}
}

// sigmoidVec sets dst[i] = sigmoid(src[i]) for i < len(dst); dst may equal
// src.
func sigmoidVec(dst, src []float32) {
	src = src[:len(dst)]
	i := 0
	if haveKernel && len(dst) >= 8 {
		i = len(dst) &^ 7
		sigmoidAVX2(&dst[0], &src[0], i)
	}
	for ; i < len(dst); i++ {
		dst[i] = sigmoid(src[i])
	}
}
