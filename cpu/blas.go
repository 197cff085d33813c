package cpu

import (
	"sync"
	"unsafe"
)

// CBLAS enumerations (cblas.h).
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// blasLib is a system BLAS loaded with purego.
type blasLib struct {
	name string
	// sgemm is cblas_sgemm.
	sgemm func(order, transA, transB, m, n, k int32, alpha float32, a *float32, lda int32,
		b *float32, ldb int32, beta float32, c *float32, ldc int32)
	// setThreads is openblas_set_num_threads, or nil where the library has
	// no such control.
	setThreads func(n int32)
}

// systemBLAS loads the system BLAS once per process.
var systemBLAS = sync.OnceValue(loadBLAS)

type blasCandidate struct{ path, name string }

// sgemm computes, row-major, c[m,n] = alpha·op(a)[m,k]·op(b)[k,n] + beta·c,
// where op transposes when ta / tb are set (a is then stored [k,m], b [n,k]).
// It uses the system BLAS when loaded and the pure-Go GEMM otherwise, and is
// single-threaded: callers parallelise around it.
func (b *Backend) sgemm(ta, tb bool, m, n, k int, alpha float32, a []float32, lda int,
	bm []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	if b.blas == nil {
		goSgemm(ta, tb, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc)
		return
	}
	// Touch the last element of each operand so that a short slice panics
	// here rather than letting BLAS read or write out of bounds.
	_ = a[lastIndex(ta, m, k, lda)]
	_ = bm[lastIndex(tb, k, n, ldb)]
	_ = c[(m-1)*ldc+n-1]
	t := func(tr bool) int32 {
		if tr {
			return cblasTrans
		}
		return cblasNoTrans
	}
	b.blas.sgemm(cblasRowMajor, t(ta), t(tb), int32(m), int32(n), int32(k), alpha,
		unsafe.SliceData(a), int32(lda), unsafe.SliceData(bm), int32(ldb), beta, unsafe.SliceData(c), int32(ldc))
}

// lastIndex returns the index of the last element of op(x), an [r, c] matrix
// stored with leading dimension ld (transposed: stored [c, r]).
func lastIndex(tr bool, r, c, ld int) int {
	if tr {
		return (c-1)*ld + r - 1
	}
	return (r-1)*ld + c - 1
}

// scaleC computes c[m,n] *= beta (beta 0 clears, as BLAS does).
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}
