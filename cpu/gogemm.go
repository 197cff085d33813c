package cpu

// The pure-Go GEMM: used when no system BLAS is loaded. It packs op(a) and
// op(b) into k-contiguous panels and computes 4×4 blocks of dot products, a
// cache block of kc columns at a time. It is single-threaded; callers split
// the work.

const (
	goKC = 256 // k block
	goMR = 4   // rows of a register block
	goNR = 4   // columns of a register block
)

// goSgemm computes, row-major, c[m,n] = alpha·op(a)·op(b) + beta·c (see
// Backend.sgemm).
func goSgemm(ta, tb bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	scaleC(m, n, beta, c, ldc)
	if alpha == 0 || k == 0 {
		return
	}
	mp := (m + goMR - 1) / goMR * goMR
	np := (n + goNR - 1) / goNR * goNR
	kc := min(k, goKC)
	pa := make([]float32, mp*kc)
	pb := make([]float32, np*kc)
	for k0 := 0; k0 < k; k0 += goKC {
		kb := min(goKC, k-k0)
		packRows(pa, ta, a, lda, m, mp, k0, kb)
		packCols(pb, tb, b, ldb, n, np, k0, kb)
		for i := 0; i < m; i += goMR {
			a0 := pa[(i+0)*kb : (i+1)*kb]
			a1 := pa[(i+1)*kb : (i+2)*kb]
			a2 := pa[(i+2)*kb : (i+3)*kb]
			a3 := pa[(i+3)*kb : (i+4)*kb]
			for j := 0; j < n; j += goNR {
				var blk [goMR][goNR]float32
				dot4x4(&blk, a0, a1, a2, a3,
					pb[(j+0)*kb:(j+1)*kb], pb[(j+1)*kb:(j+2)*kb], pb[(j+2)*kb:(j+3)*kb], pb[(j+3)*kb:(j+4)*kb])
				for r := 0; r < goMR && i+r < m; r++ {
					row := c[(i+r)*ldc:]
					for s := 0; s < goNR && j+s < n; s++ {
						row[j+s] += alpha * blk[r][s]
					}
				}
			}
		}
	}
}

// packRows writes rows [0, m) of op(a), columns [k0, k0+kb), into p as m
// k-contiguous rows of kb, zero rows up to mp.
func packRows(p []float32, tr bool, a []float32, lda, m, mp, k0, kb int) {
	for i := range m {
		dst := p[i*kb : (i+1)*kb]
		if !tr {
			copy(dst, a[i*lda+k0:i*lda+k0+kb])
			continue
		}
		for q := range dst {
			dst[q] = a[(k0+q)*lda+i]
		}
	}
	clear(p[m*kb : mp*kb])
}

// packCols writes columns [0, n) of op(b), rows [k0, k0+kb), into p as n
// k-contiguous rows of kb, zero rows up to np.
func packCols(p []float32, tr bool, b []float32, ldb, n, np, k0, kb int) {
	for j := range n {
		dst := p[j*kb : (j+1)*kb]
		if tr {
			copy(dst, b[j*ldb+k0:j*ldb+k0+kb])
			continue
		}
		for q := range dst {
			dst[q] = b[(k0+q)*ldb+j]
		}
	}
	clear(p[n*kb : np*kb])
}

// dot4x4 sets blk[r][s] to the dot product of a_r and b_s.
func dot4x4(blk *[goMR][goNR]float32, a0, a1, a2, a3, b0, b1, b2, b3 []float32) {
	n := len(a0)
	a1, a2, a3 = a1[:n], a2[:n], a3[:n]
	b0, b1, b2, b3 = b0[:n], b1[:n], b2[:n], b3[:n]
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	var c20, c21, c22, c23, c30, c31, c32, c33 float32
	for p := range n {
		x0, x1, x2, x3 := a0[p], a1[p], a2[p], a3[p]
		y0, y1, y2, y3 := b0[p], b1[p], b2[p], b3[p]
		c00 += x0 * y0
		c01 += x0 * y1
		c02 += x0 * y2
		c03 += x0 * y3
		c10 += x1 * y0
		c11 += x1 * y1
		c12 += x1 * y2
		c13 += x1 * y3
		c20 += x2 * y0
		c21 += x2 * y1
		c22 += x2 * y2
		c23 += x2 * y3
		c30 += x3 * y0
		c31 += x3 * y1
		c32 += x3 * y2
		c33 += x3 * y3
	}
	*blk = [goMR][goNR]float32{
		{c00, c01, c02, c03},
		{c10, c11, c12, c13},
		{c20, c21, c22, c23},
		{c30, c31, c32, c33},
	}
}
