package tensor

import (
	"encoding/binary"
	"fmt"
)

// Weight is a read-only stored tensor: a view over its bytes in the dtype the
// checkpoint used. Linear weights follow PyTorch's convention, Shape [out, in]
// with y = x·Wᵀ; one-dimensional weights (norms, biases) have Shape [n].
//
// A quantised weight (Quant != nil) has DType U32 and Data holding each row's
// packed little-endian bit stream; Shape is still the logical [out, in].
//
// An int8 weight (DType I8) has Data holding the [out, in] int8 values
// row-major and Int8 their per-channel scales (see Int8 and QuantizeInt8).
//
// Data is usually a slice of an mmap'd file; it must not be written.
type Weight struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
	Quant *Quant
	Int8  *Int8

	// Handle is free for the backend that uses this weight to cache its own
	// form of it (for example a GPU buffer wrapping Data). The model never
	// reads it.
	Handle any
}

// Quant describes MLX affine quantisation: element (o, c) of the logical
// matrix is Scales[o, c/Group]·q + Biases[o, c/Group], where q is the Bits-bit
// unsigned integer at bit offset c·Bits of row o's packed stream.
type Quant struct {
	Bits   int
	Group  int
	Scales *Weight // [out, in/Group], F32, BF16 or F16
	Biases *Weight // [out, in/Group], same dtype as Scales
}

// Rows returns the number of rows (Shape[0]), or 1 for a vector.
func (w *Weight) Rows() int {
	if len(w.Shape) < 2 {
		return 1
	}
	return w.Shape[0]
}

// Cols returns the length of one row: the last dimension, or for a 3-D conv
// weight the product of the trailing dimensions.
func (w *Weight) Cols() int {
	if len(w.Shape) == 0 {
		return 0
	}
	n := 1
	start := 1
	if len(w.Shape) == 1 {
		start = 0
	}
	for _, d := range w.Shape[start:] {
		n *= d
	}
	return n
}

// Elems returns the number of logical elements.
func (w *Weight) Elems() int {
	n := 1
	for _, d := range w.Shape {
		n *= d
	}
	return n
}

// RowBytes returns the number of stored bytes of one row.
func (w *Weight) RowBytes() int {
	if w.Quant != nil {
		return w.Cols() * w.Quant.Bits / 8
	}
	return w.Cols() * w.DType.Size()
}

// Bytes returns the bytes the weight keeps: its data plus, when quantised,
// its scales and biases, or its int8 channel scales and sums. It is what a
// weight adds to a model's resident weight bytes.
func (w *Weight) Bytes() int64 {
	n := int64(len(w.Data))
	if q := w.Quant; q != nil {
		n += q.Scales.Bytes() + q.Biases.Bytes()
	}
	if q := w.Int8; q != nil {
		n += 4*int64(len(q.Scales)) + 4*int64(len(q.Sums))
	}
	return n
}

// Validate checks that Data, Shape, DType and Quant (or Int8) agree.
func (w *Weight) Validate() error {
	if w.DType == I8 || w.Int8 != nil {
		if w.DType != I8 {
			return fmt.Errorf("%s: int8 channel scales on a %s weight", w.Name, w.DType)
		}
		return w.validateInt8()
	}
	if w.Quant != nil {
		q := w.Quant
		switch q.Bits {
		case 2, 3, 4, 5, 6, 8:
		default:
			return fmt.Errorf("%s: unsupported quantisation bits %d", w.Name, q.Bits)
		}
		switch q.Group {
		case 32, 64, 128:
		default:
			return fmt.Errorf("%s: unsupported quantisation group size %d", w.Name, q.Group)
		}
		if len(w.Shape) != 2 || w.Shape[1]%q.Group != 0 {
			return fmt.Errorf("%s: quantised shape %v is not [out, in] with in a multiple of %d", w.Name, w.Shape, q.Group)
		}
		if w.DType != U32 {
			return fmt.Errorf("%s: quantised weight stored as %s, want U32", w.Name, w.DType)
		}
		for _, s := range []*Weight{q.Scales, q.Biases} {
			if s == nil {
				return fmt.Errorf("%s: quantised weight lacks scales or biases", w.Name)
			}
			if !s.DType.IsFloat() || len(s.Shape) != 2 || s.Shape[0] != w.Shape[0] || s.Shape[1] != w.Shape[1]/q.Group {
				return fmt.Errorf("%s: %s has shape %v %s, want [%d %d] float", w.Name, s.Name, s.Shape, s.DType, w.Shape[0], w.Shape[1]/q.Group)
			}
			if err := s.Validate(); err != nil {
				return err
			}
		}
		if want := w.Rows() * w.RowBytes(); len(w.Data) != want {
			return fmt.Errorf("%s: %d bytes of packed data, want %d", w.Name, len(w.Data), want)
		}
		return nil
	}
	if !w.DType.IsFloat() {
		return fmt.Errorf("%s: dtype %s is not a weight type", w.Name, w.DType)
	}
	if want := w.Elems() * w.DType.Size(); len(w.Data) != want {
		return fmt.Errorf("%s: %d bytes of data, want %d for %s %v", w.Name, len(w.Data), want, w.DType, w.Shape)
	}
	return nil
}

// Row dequantises or widens row i (0 ≤ i < Rows()) into dst[:Cols()].
// It is the reference every backend's conversion is held to, and what small
// gathers (embedding rows, letter rows) use directly.
func (w *Weight) Row(i int, dst []float32) {
	n := w.Cols()
	dst = dst[:n]
	rb := w.RowBytes()
	src := w.Data[i*rb : (i+1)*rb]
	if w.Quant != nil {
		q := w.Quant
		groups := n / q.Group
		scales := make([]float32, groups)
		biases := make([]float32, groups)
		q.Scales.Row(i, scales)
		q.Biases.Row(i, biases)
		for c := range n {
			g := c / q.Group
			dst[c] = scales[g]*float32(Unpack(src, q.Bits, c)) + biases[g]
		}
		return
	}
	if w.DType == I8 {
		s := w.Int8.Scales[i]
		for c, v := range int8View(src) {
			dst[c] = s * float32(v)
		}
		return
	}
	ConvertRow(dst, src, w.DType)
}

// ConvertRow widens len(dst) stored elements of dtype d from src into dst.
func ConvertRow(dst []float32, src []byte, d DType) {
	switch d {
	case F32:
		for c := range dst {
			dst[c] = float32frombytes(src[4*c:])
		}
	case BF16:
		for c := range dst {
			dst[c] = BF16ToF32(binary.LittleEndian.Uint16(src[2*c:]))
		}
	case F16:
		for c := range dst {
			dst[c] = F16ToF32(binary.LittleEndian.Uint16(src[2*c:]))
		}
	default:
		panic(fmt.Sprintf("tensor: ConvertRow of %s", d))
	}
}

// Unpack returns the bits-wide unsigned integer at bit offset c·bits of the
// little-endian bit stream row (LSB first, crossing byte boundaries for 3, 5
// and 6 bits), as MLX packs affine-quantised weights.
func Unpack(row []byte, bits, c int) uint32 {
	off := c * bits
	b := off >> 3
	sh := uint(off & 7)
	v := uint32(row[b])
	if int(sh)+bits > 8 {
		v |= uint32(row[b+1]) << 8
	}
	return (v >> sh) & (1<<uint(bits) - 1)
}

// Float32s returns all elements of a float weight as float32 (for vectors and
// small tensors such as norms; never call it on a large matrix in a hot path).
func (w *Weight) Float32s() []float32 {
	out := make([]float32, w.Elems())
	if w.Quant != nil || w.DType == I8 {
		n := w.Cols()
		for i := range w.Rows() {
			w.Row(i, out[i*n:(i+1)*n])
		}
		return out
	}
	ConvertRow(out, w.Data, w.DType)
	return out
}

// SelectRows returns a new weight holding only the given rows of w, in that
// order and in w's stored form (packed, with matching scales and biases, when
// quantised, or int8 with matching scales and sums). It is how the letter
// rows of an LM head are taken.
func (w *Weight) SelectRows(name string, rows []int) *Weight {
	rb := w.RowBytes()
	data := make([]byte, 0, rb*len(rows))
	for _, r := range rows {
		data = append(data, w.Data[r*rb:(r+1)*rb]...)
	}
	out := &Weight{Name: name, DType: w.DType, Shape: append([]int{len(rows)}, w.Shape[1:]...), Data: data}
	if w.Quant != nil {
		out.Quant = &Quant{
			Bits:   w.Quant.Bits,
			Group:  w.Quant.Group,
			Scales: w.Quant.Scales.SelectRows(name+".scales", rows),
			Biases: w.Quant.Biases.SelectRows(name+".biases", rows),
		}
	}
	if q := w.Int8; q != nil {
		out.Int8 = &Int8{Scales: make([]float32, len(rows)), Sums: make([]int32, len(rows))}
		for i, r := range rows {
			out.Int8.Scales[i], out.Int8.Sums[i] = q.Scales[r], q.Sums[r]
		}
	}
	return out
}

// FromFloat32 makes an in-memory weight of dtype d (F32, BF16 or F16) from
// float32 values, rounding to nearest even. It is used by tests, by the
// benchmark's random checkpoints and by LoRA merging.
func FromFloat32(name string, d DType, shape []int, v []float32) *Weight {
	data := make([]byte, len(v)*d.Size())
	for i, f := range v {
		switch d {
		case F32:
			binary.LittleEndian.PutUint32(data[4*i:], float32bits(f))
		case BF16:
			binary.LittleEndian.PutUint16(data[2*i:], F32ToBF16(f))
		case F16:
			binary.LittleEndian.PutUint16(data[2*i:], F32ToF16(f))
		default:
			panic(fmt.Sprintf("tensor: FromFloat32 to %s", d))
		}
	}
	return &Weight{Name: name, DType: d, Shape: append([]int(nil), shape...), Data: data}
}
