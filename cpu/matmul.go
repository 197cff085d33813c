package cpu

import (
	"github.com/startlux/startlux/tensor"
)

// tileRows is the number of weight rows converted to float32 at a time.
const tileRows = 128

// MatMul computes out[rows, O] = x[rows, I] · wᵀ. The weight is widened to
// float32 a tile of rows at a time into per-worker scratch and multiplied
// with sgemm; tiles are spread over the workers.
func (b *Backend) MatMul(out, x tensor.Tensor, w *tensor.Weight, rows int) {
	o, in := w.Rows(), w.Cols()
	xd, od := data(x)[:rows*in], data(out)[:rows*o]
	if rows == 0 || o == 0 {
		return
	}
	nt := min(tileRows, o)
	tiles := (o + nt - 1) / nt
	// Too few tiles to keep the workers busy: also split the rows of x.
	mParts := 1
	if tiles < b.threads && rows >= 2*b.threads {
		mParts = (b.threads + tiles - 1) / tiles
	}
	mStep := (rows + mParts - 1) / mParts
	b.parallel(tiles*mParts, func(task int) {
		t, mp := task/mParts, task%mParts
		r0, r1 := t*nt, min(o, (t+1)*nt)
		m0, m1 := mp*mStep, min(rows, (mp+1)*mStep)
		if m0 >= m1 {
			return
		}
		s := b.getScratch((r1 - r0) * in)
		convertRows(w, r0, r1, s.d)
		b.sgemm(false, true, m1-m0, r1-r0, in, 1, xd[m0*in:], in, s.d, in, 0, od[m0*o+r0:], o)
		b.putScratch(s)
	})
}
