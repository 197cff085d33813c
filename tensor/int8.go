package tensor

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// # Int8 (W8A8) arithmetic
//
// This comment is the one definition every int8 implementation (the CPU
// kernels, the Metal kernels, tests) is held to. The integer part is exact
// and must agree bit for bit; Int8MatMul below is the reference in code.
//
// A vector v of n float32 values (one output channel of a weight, or one
// row of activations) is quantised to n int8 values q and one float32 scale:
//
//	amax  = max |v[i]|                      exact, order-independent
//	if amax is NaN or ±Inf:  not finite (a weight is refused; see below)
//	if amax < 2⁻¹⁰⁰ (an all-zero v included): scale = 0, q[i] = 0
//	else:
//	  scale = amax / 127                    float32 division, correctly rounded
//	  inv   = 127 / amax                    float32 division, correctly rounded
//	  q[i]  = clamp(rint(v[i] · inv), −127, 127)
//	                                        one float32 multiply, correctly
//	                                        rounded; rint rounds half to even
//
// so q is symmetric and never −128 (the clamp never binds: |v[i]·inv| is at
// most 127·(1+2⁻²³)², below 127.5). The 2⁻¹⁰⁰ floor keeps scale and inv
// normal numbers, so no subnormal arithmetic is involved anywhere (a GPU
// that flushes subnormals gets the same q). An implementation must compute
// both quotients with precise division (in MSL: no fast-math, or
// precise::divide), must not fuse or reorder the multiply with anything, and
// must round with rint (round to nearest, ties to even), not round() or a
// truncation.
//
// A weight [O, I] is quantised per output channel (row o gives Scales[o]);
// a non-finite weight is an error at conversion. A conversion may choose a
// channel's scale and values otherwise (QuantizeInt8Clip clips the range;
// a model may round with error compensation): any q in [−127, 127] with a
// finite scale ≥ 0 is a valid weight, and the product below holds for it. Activations [R, I] are
// quantised per row at run time (row r gives rowScale[r]); a row with a NaN
// or infinity gets rowScale NaN and q = 0, so its outputs are NaN rather
// than silently finite.
//
// The product of activation row r and weight channel o is
//
//	acc[r, o] = Σ_i int32(xq[r, i]) · int32(wq[o, i])     exact in int32
//
// (|acc| ≤ I·127·127 and I ≤ MaxInt8Cols, so it never overflows; kernels that
// offset activations to unsigned, u = xq + 128, compute Σ u·wq, which may
// wrap, and subtract 128·Sums[o] in wrapping int32 arithmetic: the result is
// exact because the true sum fits) and the output is
//
//	out[r, o] = (float32(acc[r, o]) · rowScale[r]) · chanScale[o]
//
// evaluated in exactly that order: acc converted to float32 rounding to
// nearest even (exact up to 2²⁴), then two float32 multiplies, each rounded,
// no fused operation. A result below the float32 normal range may be
// flushed to zero by a GPU; that is the only place a conforming
// implementation may differ.

// MaxInt8Cols is the largest number of in-features an int8 weight may have:
// it keeps every int32 accumulation in range (I·127·128 < 2³¹).
const MaxInt8Cols = 1 << 17

// int8Floor is the smallest amax that quantises to non-zero values (2⁻¹⁰⁰).
const int8Floor = 0x1p-100

// Int8 holds what an int8 weight needs beside its bytes. The weight's Data
// is [O, I] row-major, one byte per element, each the two's complement int8
// q[o, i]; element (o, i) of the logical matrix is Scales[o]·q[o, i].
type Int8 struct {
	// Scales holds one float32 scale per output channel.
	Scales []float32
	// Sums holds Σ_i q[o, i] per output channel, for kernels that offset
	// activations to unsigned (the correction 128·Sums[o]).
	Sums []int32
}

// QuantizeInt8Vec quantises v into dst[:len(v)] by the rule above and
// returns the scale; finite is false (and dst all zeros, scale NaN) when v
// holds a NaN or an infinity.
func QuantizeInt8Vec(dst []int8, v []float32) (scale float32, finite bool) {
	dst = dst[:len(v)]
	amax, ok := AbsMax(v)
	if !ok {
		clear(dst)
		return float32(math.NaN()), false
	}
	if amax < int8Floor {
		clear(dst)
		return 0, true
	}
	scale = amax / 127
	inv := 127 / amax
	for i, x := range v {
		dst[i] = int8(RoundInt8(x * inv))
	}
	return scale, true
}

// Int8ClipSteps is the number of clipping ratios QuantizeInt8Clip tries:
// c = 1 − k/100 for k = 0, ..., Int8ClipSteps−1 (1 down to 0.81).
const Int8ClipSteps = 20

// QuantizeInt8Clip quantises v into dst[:len(v)] like QuantizeInt8Vec, but
// over the range a = c·amax, with c the ratio of Int8ClipSteps whose
// rounding leaves the least squared error Σ (v[i] − scale·q[i])² (computed
// in float64; the largest c on a tie): scale = a/127, inv = 127/a (float32
// divisions), q[i] = clamp(rint(v[i]·inv), −127, 127), the clamp binding on
// the values beyond a. The result is a weight channel of the same format;
// c = 1 gives QuantizeInt8Vec's.
func QuantizeInt8Clip(dst []int8, v []float32) (scale float32, finite bool) {
	dst = dst[:len(v)]
	scale, finite = QuantizeInt8Vec(dst, v)
	if !finite || scale == 0 {
		return scale, finite
	}
	amax, _ := AbsMax(v)
	sqErr := func(s, inv float32, out []int8) float64 {
		var e float64
		for i, x := range v {
			q := RoundInt8(x * inv)
			if out != nil {
				out[i] = int8(q)
			}
			d := float64(x) - float64(s)*float64(q)
			e += d * d
		}
		return e
	}
	best, bestC := sqErr(scale, 127/amax, nil), float32(1)
	for k := 1; k < Int8ClipSteps; k++ {
		a := amax * (1 - float32(k)/100)
		if e := sqErr(a/127, 127/a, nil); e < best {
			best, bestC = e, 1-float32(k)/100
		}
	}
	if bestC == 1 {
		return scale, true
	}
	a := amax * bestC
	scale = a / 127
	sqErr(scale, 127/a, dst)
	return scale, true
}

// AbsMax returns max |v[i]| (0 for an empty v), exactly; finite is false
// when v holds a NaN or an infinity. It compares bit patterns with the sign
// cleared, which order as the magnitudes do.
func AbsMax(v []float32) (amax float32, finite bool) {
	var m uint32
	for _, x := range v {
		m = max(m, math.Float32bits(x)&0x7fffffff)
	}
	return math.Float32frombits(m), m < 0x7f800000
}

// RoundInt8 returns rint(p) clamped to [−127, 127]: the rounding step of
// the quantisation rule, for a product p = v·inv.
func RoundInt8(p float32) int32 {
	r := math.RoundToEven(float64(p))
	return int32(max(-127, min(127, r)))
}

// Int8Output is the epilogue of the rule: (float32(acc)·rowScale)·chanScale.
func Int8Output(acc int32, rowScale, chanScale float32) float32 {
	t := float32(acc) * rowScale
	return t * chanScale
}

// QuantizeInt8 returns w converted to an int8 weight: its quantised bytes,
// one scale per output channel and the channel sums. w may be F32, BF16,
// F16 or MLX affine-quantised (each group is dequantised by Weight.Row, then
// the row is requantised per channel); it must be a matrix [O, I] with
// I ≤ MaxInt8Cols. An int8 weight is returned as it is. The conversion
// runs blocks of rows on up to GOMAXPROCS goroutines, each widening one row
// at a time, so no float32 copy of the matrix exists; the
// result does not refer to w's bytes, which may be unmapped afterwards. The
// name is kept.
//
// A model converts each large projection with it at load and hands the
// result to the backend's MatMul in place of the float weight.
func QuantizeInt8(w *Weight) (*Weight, error) { return QuantizeInt8Cols(w, nil) }

// QuantizeInt8Cols is QuantizeInt8 of w with column i multiplied by
// cols[i] (a float32 multiply of each widened element, before the row is
// quantised): the weight W·diag(cols) that SmoothQuant multiplies by. A nil
// cols is QuantizeInt8; otherwise it needs len(cols) = in-features, every
// factor finite, and w not already int8.
func QuantizeInt8Cols(w *Weight, cols []float32) (*Weight, error) {
	return quantizeInt8(w, cols, QuantizeInt8Vec)
}

// QuantizeInt8ColsClip is QuantizeInt8Cols with each channel's scale chosen
// by QuantizeInt8Clip (the clipping ratio of least squared rounding error)
// instead of the absmax rule; the format is the same. It does
// Int8ClipSteps passes over each row, so it converts about that many times
// slower.
func QuantizeInt8ColsClip(w *Weight, cols []float32) (*Weight, error) {
	return quantizeInt8(w, cols, QuantizeInt8Clip)
}

func quantizeInt8(w *Weight, cols []float32, quant func(dst []int8, v []float32) (float32, bool)) (*Weight, error) {
	if w.DType == I8 {
		if cols != nil {
			return nil, fmt.Errorf("int8: %s: column factors on a weight that is int8 already", w.Name)
		}
		return w, w.Validate()
	}
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("int8: %w", err)
	}
	if len(w.Shape) != 2 {
		return nil, fmt.Errorf("int8: %s: shape %v is not a matrix [out, in]", w.Name, w.Shape)
	}
	o, n := w.Shape[0], w.Shape[1]
	if n > MaxInt8Cols {
		return nil, fmt.Errorf("int8: %s: %d in-features, at most %d", w.Name, n, MaxInt8Cols)
	}
	if cols != nil {
		if len(cols) != n {
			return nil, fmt.Errorf("int8: %s: %d column factors for %d in-features", w.Name, len(cols), n)
		}
		if _, ok := AbsMax(cols); !ok {
			return nil, fmt.Errorf("int8: %s: a column factor is a NaN or an infinity", w.Name)
		}
	}
	data := make([]byte, o*n)
	q := &Int8{Scales: make([]float32, o), Sums: make([]int32, o)}
	// Blocks of rows on up to GOMAXPROCS goroutines, each widening one row
	// at a time; bad[p] is the first bad row of block p, or −1.
	parts := max(1, min(runtime.GOMAXPROCS(0), o*n/(1<<16), o))
	step := (o + parts - 1) / parts
	bad := make([]int, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bad[p] = -1
			row := make([]float32, n)
			for r := p * step; r < min(o, (p+1)*step); r++ {
				w.Row(r, row)
				if cols != nil {
					for i, f := range cols {
						row[i] *= f
					}
				}
				dst := int8View(data[r*n : (r+1)*n])
				s, ok := quant(dst, row)
				if !ok {
					bad[p] = r
					return
				}
				q.Scales[r] = s
				q.Sums[r] = sumInt8(dst)
			}
		}()
	}
	wg.Wait()
	for _, r := range bad {
		if r >= 0 {
			return nil, fmt.Errorf("int8: %s: row %d holds a NaN or an infinity", w.Name, r)
		}
	}
	return &Weight{Name: w.Name, DType: I8, Shape: []int{o, n}, Data: data, Int8: q}, nil
}

// Int8FromValues makes an int8 weight [o, n] from given quantised values and
// channel scales (computing the sums); for tests and benchmarks that need
// exact values, such as the extremes −128 and 127, which QuantizeInt8 never
// produces.
func Int8FromValues(name string, o, n int, q []int8, scales []float32) *Weight {
	data := make([]byte, o*n)
	copy(int8View(data), q[:o*n])
	iq := &Int8{Scales: append([]float32(nil), scales[:o]...), Sums: make([]int32, o)}
	for r := range o {
		iq.Sums[r] = sumInt8(int8View(data[r*n : (r+1)*n]))
	}
	return &Weight{Name: name, DType: I8, Shape: []int{o, n}, Data: data, Int8: iq}
}

// Int8Row returns row o of an int8 weight as int8 values (a view of Data).
func (w *Weight) Int8Row(o int) []int8 {
	n := w.Cols()
	return int8View(w.Data[o*n : (o+1)*n])
}

// Int8MatMul is the reference W8A8 product: out[rows, O] = x[rows, I] · wᵀ
// for an int8 weight w, by the rule above (activations quantised per row,
// exact int32 dot products, the float32 epilogue). It is plain and slow;
// every backend's int8 MatMul is held to it.
func Int8MatMul(out, x []float32, w *Weight, rows int) {
	o, n := w.Rows(), w.Cols()
	xq := make([]int8, n)
	for r := range rows {
		rs, _ := QuantizeInt8Vec(xq, x[r*n:(r+1)*n])
		for c := range o {
			wq := w.Int8Row(c)
			var acc int32
			for i, a := range xq {
				acc += int32(a) * int32(wq[i])
			}
			out[r*o+c] = Int8Output(acc, rs, w.Int8.Scales[c])
		}
	}
}

// validateInt8 checks an I8 weight's shape, bytes, scales and sums.
func (w *Weight) validateInt8() error {
	if len(w.Shape) != 2 {
		return fmt.Errorf("%s: int8 shape %v is not [out, in]", w.Name, w.Shape)
	}
	if w.Quant != nil {
		return fmt.Errorf("%s: int8 weight with MLX quantisation parameters", w.Name)
	}
	o, n := w.Shape[0], w.Shape[1]
	if n > MaxInt8Cols {
		return fmt.Errorf("%s: int8 weight with %d in-features, at most %d", w.Name, n, MaxInt8Cols)
	}
	if len(w.Data) != o*n {
		return fmt.Errorf("%s: %d bytes of int8 data, want %d for %v", w.Name, len(w.Data), o*n, w.Shape)
	}
	q := w.Int8
	if q == nil {
		return fmt.Errorf("%s: int8 weight lacks its channel scales", w.Name)
	}
	if len(q.Scales) != o || len(q.Sums) != o {
		return fmt.Errorf("%s: int8 weight has %d scales and %d sums, want %d each", w.Name, len(q.Scales), len(q.Sums), o)
	}
	for r := range o {
		if s := q.Scales[r]; !(s >= 0 && s <= math.MaxFloat32) {
			return fmt.Errorf("%s: int8 channel %d has scale %g", w.Name, r, s)
		}
		if got := sumInt8(w.Int8Row(r)); got != q.Sums[r] {
			return fmt.Errorf("%s: int8 channel %d sums to %d, recorded %d", w.Name, r, got, q.Sums[r])
		}
	}
	return nil
}

func sumInt8(v []int8) int32 {
	var s int32
	for _, x := range v {
		s += int32(x)
	}
	return s
}

// int8View returns b's bytes as int8 values, in place.
func int8View(b []byte) []int8 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}
