package cpu

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/startlux/startlux/tensor"
)

// convertTile widens columns [c0, c1) of rows [r0, r1) of w into dst,
// row-major with c1−c0 columns: the tile a MatMul multiplies. It handles
// every stored form (F32, BF16, F16, int8 and MLX affine-quantised U32, where c0
// and c1 are multiples of the group size unless c1 is the row's end) and
// agrees exactly with tensor.Weight.Row. A new quantised format only needs
// a case here.
func convertTile(w *tensor.Weight, r0, r1, c0, c1 int, dst []float32) {
	n := c1 - c0
	rb := w.RowBytes()
	if w.Quant != nil {
		for r := r0; r < r1; r++ {
			dequantRow(w, r, c0, c1, dst[(r-r0)*n:(r-r0+1)*n])
		}
		return
	}
	if w.DType == tensor.I8 {
		for r := r0; r < r1; r++ {
			s := w.Int8.Scales[r]
			src := w.Data[r*rb+c0 : r*rb+c1]
			d := dst[(r-r0)*n : (r-r0+1)*n]
			for c, v := range src {
				d[c] = s * float32(int8(v))
			}
		}
		return
	}
	es := w.DType.Size()
	for r := r0; r < r1; r++ {
		src := w.Data[r*rb+c0*es : r*rb+c1*es]
		d := dst[(r-r0)*n : (r-r0+1)*n]
		switch w.DType {
		case tensor.BF16:
			bf16ToF32(d, src)
		case tensor.F16:
			f16ToF32(d, src)
		case tensor.F32:
			f32FromBytes(d, src)
		default:
			tensor.ConvertRow(d, src, w.DType) // panics with the dtype
		}
	}
}

// convertRows widens whole rows [r0, r1) of w into dst.
func convertRows(w *tensor.Weight, r0, r1 int, dst []float32) {
	convertTile(w, r0, r1, 0, w.Cols(), dst)
}

// bf16ToF32 widens len(dst) bfloat16 values from src.
func bf16ToF32(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	i := 0
	if haveKernel && len(dst) >= 16 {
		i = len(dst) &^ 15
		bf16AVX2(&dst[0], &src[0], i)
	}
	for ; i+4 <= len(dst); i += 4 {
		v := binary.LittleEndian.Uint64(src[2*i:])
		d := dst[i : i+4 : i+4]
		d[0] = math.Float32frombits(uint32(v) << 16)
		d[1] = math.Float32frombits(uint32(v>>16) << 16)
		d[2] = math.Float32frombits(uint32(v>>32) << 16)
		d[3] = math.Float32frombits(uint32(v>>48) << 16)
	}
	for ; i < len(dst); i++ {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
}

// f16Table maps every IEEE half bit pattern to its float32 value.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = tensor.F16ToF32(uint16(i))
	}
	return &t
})

// f16ToF32 widens len(dst) half-precision values from src.
func f16ToF32(dst []float32, src []byte) {
	t := f16Table()
	src = src[:2*len(dst)]
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		v := binary.LittleEndian.Uint64(src[2*i:])
		d := dst[i : i+4 : i+4]
		d[0] = t[uint16(v)]
		d[1] = t[uint16(v>>16)]
		d[2] = t[uint16(v>>32)]
		d[3] = t[uint16(v>>48)]
	}
	for ; i < len(dst); i++ {
		dst[i] = t[binary.LittleEndian.Uint16(src[2*i:])]
	}
}

// f32FromBytes copies len(dst) little-endian float32 values from src.
func f32FromBytes(dst []float32, src []byte) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

// dequantRow widens columns [c0, c1) of row r of an MLX affine-quantised
// weight into dst; c0 is a multiple of the group size. Only the scales and
// biases of those columns' groups are widened, a stack buffer's worth at a
// time, so that nothing is allocated however wide the row.
func dequantRow(w *tensor.Weight, r, c0, c1 int, dst []float32) {
	q := w.Quant
	gs := q.Group
	var sc, bi [256]float32
	rb := w.RowBytes()
	src := w.Data[r*rb : (r+1)*rb]
	for ga, gEnd := c0/gs, (c1+gs-1)/gs; ga < gEnd; ga += len(sc) {
		gb := min(gEnd, ga+len(sc))
		convertTile(q.Scales, r, r+1, ga, gb, sc[:gb-ga])
		convertTile(q.Biases, r, r+1, ga, gb, bi[:gb-ga])
		dequantGroups(src, q.Bits, gs, ga, gb, c0, c1, sc[:gb-ga], bi[:gb-ga], dst)
	}
}

// dequantGroups widens groups [g0, g1) of a quantised row's packed bytes
// src, clipped to columns [c0, c1), into dst (which starts at column c0),
// with the groups' scales sc and biases bi.
func dequantGroups(src []byte, bits, gs, g0, g1, c0, c1 int, sc, bi, dst []float32) {
	for g := g0; g < g1; g++ {
		s, b := sc[g-g0], bi[g-g0]
		gc0 := g * gs
		d := dst[gc0-c0 : min(c1, gc0+gs)-c0]
		switch bits {
		case 8:
			p := src[gc0 : gc0+len(d)]
			for c := range d {
				d[c] = s*float32(p[c]) + b
			}
		case 4:
			p := src[gc0/2 : gc0/2+gs/2]
			for c := 0; c+1 < len(d); c += 2 {
				v := p[c/2]
				d[c] = s*float32(v&15) + b
				d[c+1] = s*float32(v>>4) + b
			}
		case 2:
			p := src[gc0/4 : gc0/4+gs/4]
			for c := 0; c+3 < len(d); c += 4 {
				v := p[c/4]
				d[c] = s*float32(v&3) + b
				d[c+1] = s*float32(v>>2&3) + b
				d[c+2] = s*float32(v>>4&3) + b
				d[c+3] = s*float32(v>>6) + b
			}
		default:
			for c := range d {
				d[c] = s*float32(tensor.Unpack(src, bits, gc0+c)) + b
			}
		}
	}
}

// weightRow widens row r of w into dst (any stored form).
func weightRow(w *tensor.Weight, r int, dst []float32) { convertRows(w, r, r+1, dst) }

// vec returns all elements of a small weight (norm scales, biases, conv
// kernels) as float32.
func vec(w *tensor.Weight) []float32 {
	out := make([]float32, w.Elems())
	if w.Quant != nil {
		n := w.Cols()
		for r := range w.Rows() {
			dequantRow(w, r, 0, n, out[r*n:(r+1)*n])
		}
		return out
	}
	convertRows(&tensor.Weight{DType: w.DType, Shape: []int{len(out)}, Data: w.Data}, 0, 1, out)
	return out
}
