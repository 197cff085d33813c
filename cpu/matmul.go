package cpu

import (
	"unsafe"

	"github.com/startlux/startlux/tensor"
)

// Tile shape of MatMul: up to Backend.tileRows weight rows by tileCols columns are
// widened to float32 at a time (so the scratch stays cache-sized whatever
// the weight's width) and multiplied with one sgemm call.
//
// Measured on 2 cores (Xeon, AVX-512 OpenBLAS) with the 0.8B shapes: tiles
// of 384–1024 rows ran 5–15% faster than 128–256 (each sgemm call packs all
// of x again, so fewer calls pay less), and blocking the columns at 1024
// rather than 4096 made no difference.
const (
	defaultTileRows = 768
	defaultTileCols = 4096
)

// rowTiles splits o weight rows into tiles of at most tileRows rows (a
// multiple of 16 where there are more), their number a multiple of the
// workers so that each gets the same share.
func rowTiles(o, workers, tileRows int) (nt, tiles int) {
	tiles = (o + tileRows - 1) / tileRows
	tiles = (tiles + workers - 1) / workers * workers
	nt = (o + tiles - 1) / tiles
	if nt > 16 {
		nt = (nt + 15) / 16 * 16
	}
	return nt, (o + nt - 1) / nt
}

// MatMul computes out[rows, O] = x[rows, I] · wᵀ. An int8 weight runs the
// W8A8 product of int8.go. Any other weight is widened to
// float32 a tile at a time into per-worker scratch and multiplied with
// sgemm, accumulating over column blocks; tiles of rows are spread over the
// workers. Float32 weights are used in place when aligned.
func (b *Backend) MatMul(out, x tensor.Tensor, w *tensor.Weight, rows int) {
	o, in := w.Rows(), w.Cols()
	xd, od := data(x)[:rows*in], data(out)[:rows*o]
	if rows == 0 || o == 0 {
		return
	}
	if in == 0 {
		clear(od)
		return
	}
	if w.DType == tensor.I8 {
		b.matMulInt8(od, xd, w, rows, o, in)
		return
	}
	direct := f32View(w)
	if rows >= smallRows && o*in <= smallWeight {
		b.matMulSmall(od, xd, w, direct, rows, o, in)
		return
	}
	// A product too small to be worth waking the helpers runs on the
	// calling goroutine.
	workers := b.threads
	if o*in <= inlineWeight && 2*rows*o*in < inlineFLOPs {
		workers = 1
	}
	nt, tiles := rowTiles(o, workers, b.tileRows)
	// Too few tiles to keep the workers busy: also split the rows of x.
	mParts := 1
	if tiles < workers && rows >= 2*workers {
		mParts = (workers + tiles - 1) / tiles
	}
	mStep := (rows + mParts - 1) / mParts
	kc := in
	if direct == nil && in > b.tileCols {
		// Blocks of about tileCols columns, whole quantisation groups.
		nb := (in + b.tileCols - 1) / b.tileCols
		kc = (in + nb - 1) / nb
		if w.Quant != nil {
			g := w.Quant.Group
			kc = (kc + g - 1) / g * g
		}
	}
	b.parallel(tiles*mParts, func(task int) {
		t, mp := task/mParts, task%mParts
		r0, r1 := t*nt, min(o, (t+1)*nt)
		m0, m1 := mp*mStep, min(rows, (mp+1)*mStep)
		if m0 >= m1 {
			return
		}
		if direct != nil {
			b.sgemm(false, true, m1-m0, r1-r0, in, 1, xd[m0*in:], in, direct[r0*in:], in, 0, od[m0*o+r0:], o)
			return
		}
		s := b.getScratch((r1 - r0) * kc)
		for c0 := 0; c0 < in; c0 += kc {
			c1 := min(in, c0+kc)
			convertTile(w, r0, r1, c0, c1, s.d)
			beta := float32(1)
			if c0 == 0 {
				beta = 0
			}
			b.sgemm(false, true, m1-m0, r1-r0, c1-c0, 1, xd[m0*in+c0:], in, s.d, c1-c0, beta, od[m0*o+r0:], o)
		}
		b.putScratch(s)
	})
}

// MatMul runs on the calling goroutine alone for a weight of at most
// inlineWeight elements (widening it takes a few µs) in a product of fewer
// than inlineFLOPs operations (2·rows·out·in; about 10 µs of sgemm): handing
// such work to the helpers and waiting for them costs more than it saves.
// The demo model's 4-wide DeltaNet gate projections are this small.
const (
	inlineWeight = 1 << 14
	inlineFLOPs  = 1 << 20
)

// f32View returns the elements of an F32 weight in place, or nil when w is
// not F32 or its bytes are not 4-aligned.
func f32View(w *tensor.Weight) []float32 {
	if w.Quant != nil || w.DType != tensor.F32 || len(w.Data) == 0 || !littleEndian {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(w.Data))
	if uintptr(p)%4 != 0 {
		return nil
	}
	return unsafe.Slice((*float32)(p), len(w.Data)/4)
}

// littleEndian reports whether float32 values in memory match the
// little-endian bytes of a checkpoint.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// A weight of at most smallWeight elements, multiplied with at least
// smallRows rows, is widened whole once per call and the rows of x are split
// into blocks of about rowBlock, each one sgemm against the whole weight:
// for the small models' narrow matrices, splitting the weight's rows instead
// left each call too little work per packed element of x.
const (
	smallWeight = 1 << 18
	smallRows   = 256
	rowBlock    = 512
)

// matMulSmall is MatMul for a small weight (see smallWeight).
func (b *Backend) matMulSmall(od, xd []float32, w *tensor.Weight, direct []float32, rows, o, in int) {
	wf := direct
	if wf == nil {
		s := b.getScratch(o * in)
		defer b.putScratch(s)
		wf = s.d
		b.parallelRange(o, max(1, elemGrain/in), func(lo, hi int) {
			convertRows(w, lo, hi, wf[lo*in:hi*in])
		})
	}
	blocks := max(b.threads, (rows+rowBlock-1)/rowBlock)
	blocks = (blocks + b.threads - 1) / b.threads * b.threads
	step := (rows + blocks - 1) / blocks
	b.parallel(blocks, func(p int) {
		m0, m1 := p*step, min(rows, (p+1)*step)
		if m0 < m1 {
			b.sgemm(false, true, m1-m0, o, in, 1, xd[m0*in:], in, wf, in, 0, od[m0*o:], o)
		}
	})
}
