package cpu

// siluVec sets dst[i] = silu(src[i]) for i < len(dst); dst may equal src.
func siluVec(dst, src []float32) {
	src = src[:len(dst)]
	i := 0
	if haveAVX512 && len(dst) >= 16 {
		i = len(dst) &^ 15
		siluAVX512(&dst[0], &src[0], i)
	}
	if haveKernel && len(dst)-i >= 8 {
		n := (len(dst) - i) &^ 7
		siluAVX2(&dst[i], &src[i], n)
		i += n
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

// expFlushVec sets dst[i] = expFlush(src[i]) for i < len(dst); dst may
// equal src.
func expFlushVec(dst, src []float32) {
	src = src[:len(dst)]
	i := 0
	if haveKernel && len(dst) >= 8 {
		i = len(dst) &^ 7
		expFlushAVX2(&dst[0], &src[0], i)
	}
	for ; i < len(dst); i++ {
		dst[i] = expFlush(src[i])
	}
}

// subScaled sets dst[i] −= a·src[i] for i < len(dst).
func subScaled(dst, src []float32, a float32) {
	src = src[:len(dst)]
	i := 0
	if haveKernel && len(dst) >= 8 {
		i = len(dst) &^ 7
		subScaledAVX2(&dst[0], &src[0], i, a)
	}
	for ; i < len(dst); i++ {
		dst[i] -= a * src[i]
	}
}

// scaleVec sets dst[i] = a·src[i] for i < len(dst); dst may equal src.
func scaleVec(dst, src []float32, a float32) {
	src = src[:len(dst)]
	i := 0
	if haveKernel && len(dst) >= 8 {
		i = len(dst) &^ 7
		scaleAVX2(&dst[0], &src[0], i, a)
	}
	for ; i < len(dst); i++ {
		dst[i] = a * src[i]
	}
}

// addVec sets dst[i] += src[i] for i < len(dst).
func addVec(dst, src []float32) {
	src = src[:len(dst)]
	i := 0
	if haveKernel && len(dst) >= 8 {
		i = len(dst) &^ 7
		addAVX2(&dst[0], &src[0], i)
	}
	for ; i < len(dst); i++ {
		dst[i] += src[i]
	}
}

// mulVec sets dst[i] = a[i]·b[i] for i < len(dst); dst may equal a or b.
func mulVec(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	i := 0
	if haveKernel && len(dst) >= 8 {
		i = len(dst) &^ 7
		mulAVX2(&dst[0], &a[0], &b[0], i)
	}
	for ; i < len(dst); i++ {
		dst[i] = a[i] * b[i]
	}
}

// scaleMulVec sets dst[i] = (x[i]·s)·w[i] for i < len(dst); dst may equal x.
func scaleMulVec(dst, x, w []float32, s float32) {
	x, w = x[:len(dst)], w[:len(dst)]
	i := 0
	if haveKernel && len(dst) >= 8 {
		i = len(dst) &^ 7
		scaleMulAVX2(&dst[0], &x[0], &w[0], i, s)
	}
	for ; i < len(dst); i++ {
		dst[i] = x[i] * s * w[i]
	}
}
