package cpu

import "sync"

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
// Backend.sgemm), with the vector kernel where the CPU has one.
func goSgemm(ta, tb bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	scaleC(m, n, beta, c, ldc)
	if alpha == 0 || k == 0 {
		return
	}
	if haveKernel {
		kernelSgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, c, ldc)
		return
	}
	mp := (m + goMR - 1) / goMR * goMR
	np := (n + goNR - 1) / goNR * goNR
	kc := min(k, goKC)
	bp := packBuffer(mp*kc + np*kc)
	defer packPool.Put(bp)
	pa := (*bp)[:mp*kc]
	pb := (*bp)[mp*kc : mp*kc+np*kc]
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

// Panel shape of kern6x16.
const (
	kMR = 6
	kNR = 16
)

// packPool holds the packing buffers of both GEMM loops, so that a call
// allocates nothing once the pool is warm.
var packPool sync.Pool

// packBuffer returns a buffer of at least n elements from packPool; the
// caller puts it back.
func packBuffer(n int) *[]float32 {
	bp, _ := packPool.Get().(*[]float32)
	if bp == nil || cap(*bp) < n {
		s := make([]float32, n)
		bp = &s
	}
	*bp = (*bp)[:cap(*bp)]
	return bp
}

// kernelSgemm adds alpha·op(a)·op(b) to c with kern6x16: op(a) packed in
// 6-row panels, op(b) in 16-column panels, goKC columns of k at a time.
func kernelSgemm(ta, tb bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, c []float32, ldc int) {
	_ = a[lastIndex(ta, m, k, lda)]
	_ = b[lastIndex(tb, k, n, ldb)]
	_ = c[(m-1)*ldc+n-1]
	mPanels := (m + kMR - 1) / kMR
	nPanels := (n + kNR - 1) / kNR
	kc := min(k, goKC)
	need := mPanels*kMR*kc + nPanels*kNR*kc + kMR*kNR
	bp := packBuffer(need)
	buf := (*bp)[:need]
	defer packPool.Put(bp)
	pa := buf[:mPanels*kMR*kc]
	pb := buf[len(pa) : len(pa)+nPanels*kNR*kc]
	tmp := buf[len(pa)+len(pb):]
	for k0 := 0; k0 < k; k0 += goKC {
		kb := min(goKC, k-k0)
		packA(pa, ta, a, lda, m, k0, kb)
		packB(pb, tb, b, ldb, n, k0, kb)
		for q := range nPanels {
			bq := &pb[q*kNR*kb]
			j0 := q * kNR
			nc := min(kNR, n-j0)
			for p := range mPanels {
				kern6x16(kb, &pa[p*kMR*kb], bq, &tmp[0])
				i0 := p * kMR
				for r := range min(kMR, m-i0) {
					crow := c[(i0+r)*ldc+j0 : (i0+r)*ldc+j0+nc]
					trow := tmp[r*kNR : r*kNR+nc]
					for j := range crow {
						crow[j] += alpha * trow[j]
					}
				}
			}
		}
	}
}

// packA packs rows [0, m) of op(a), columns [k0, k0+kb), into 6-row panels:
// panel p holds element (6p+r, k0+q) at p·6·kb + q·6 + r; rows past m are
// zero.
func packA(pa []float32, tr bool, a []float32, lda, m, k0, kb int) {
	mPanels := (m + kMR - 1) / kMR
	for p := range mPanels {
		panel := pa[p*kMR*kb : (p+1)*kMR*kb]
		for r := range kMR {
			i := p*kMR + r
			if i >= m {
				for q := range kb {
					panel[q*kMR+r] = 0
				}
				continue
			}
			if tr {
				for q := range kb {
					panel[q*kMR+r] = a[(k0+q)*lda+i]
				}
			} else {
				row := a[i*lda+k0 : i*lda+k0+kb]
				for q, v := range row {
					panel[q*kMR+r] = v
				}
			}
		}
	}
}

// packB packs columns [0, n) of op(b), rows [k0, k0+kb), into 16-column
// panels: panel q holds element (k0+s, 16q+j) at q·16·kb + s·16 + j;
// columns past n are zero.
func packB(pb []float32, tr bool, b []float32, ldb, n, k0, kb int) {
	nPanels := (n + kNR - 1) / kNR
	for q := range nPanels {
		panel := pb[q*kNR*kb : (q+1)*kNR*kb]
		j0 := q * kNR
		nc := min(kNR, n-j0)
		if !tr {
			for s := range kb {
				dst := panel[s*kNR : (s+1)*kNR]
				copy(dst, b[(k0+s)*ldb+j0:(k0+s)*ldb+j0+nc])
				clear(dst[nc:])
			}
			continue
		}
		for j := range kNR {
			if j >= nc {
				for s := range kb {
					panel[s*kNR+j] = 0
				}
				continue
			}
			col := b[(j0+j)*ldb+k0 : (j0+j)*ldb+k0+kb]
			for s, v := range col {
				panel[s*kNR+j] = v
			}
		}
	}
}
