package model

import (
	"fmt"
	"math"

	"github.com/startlux/startlux/tensor"
)

// QuantizeRow quantises one row with MLX affine quantisation (qwen35.md
// §2.3): for each group of group values, scale = (max − min)/(2^bits − 1),
// bias = min, q = round((x − bias)/scale). It writes the packed
// little-endian bit stream (len(row)·bits/8 bytes) into packed and the
// group's scale and bias, rounded to sd (the dtype they will be stored in,
// which dequantisation then uses), into scales and biases.
func QuantizeRow(packed []byte, scales, biases, row []float32, bits, group int, sd tensor.DType) {
	clear(packed[:len(row)*bits/8])
	levels := float32(int(1)<<bits - 1)
	for g := 0; g*group < len(row); g++ {
		x := row[g*group : (g+1)*group]
		lo, hi := x[0], x[0]
		for _, v := range x {
			lo, hi = min(lo, v), max(hi, v)
		}
		s := roundTo((hi-lo)/levels, sd)
		b := roundTo(lo, sd)
		scales[g], biases[g] = s, b
		for i, v := range x {
			q := float32(0)
			if s != 0 {
				q = float32(math.Round(float64((v - b) / s)))
			}
			q = min(max(q, 0), levels)
			pack(packed, bits, g*group+i, uint32(q))
		}
	}
}

// roundTo rounds v to the nearest value of dtype d.
func roundTo(v float32, d tensor.DType) float32 {
	switch d {
	case tensor.BF16:
		return tensor.BF16ToF32(tensor.F32ToBF16(v))
	case tensor.F16:
		return tensor.F16ToF32(tensor.F32ToF16(v))
	}
	return v
}

// pack stores the bits-wide value q at bit offset c·bits of the stream.
func pack(stream []byte, bits, c int, q uint32) {
	off := c * bits
	for done := 0; done < bits; {
		b, sh := (off+done)>>3, (off+done)&7
		n := min(8-sh, bits-done)
		stream[b] |= byte((q>>done)&(1<<n-1)) << sh
		done += n
	}
}

// Quantize returns the MLX affine quantisation of v, a row-major [out, in]
// matrix, as a weight with scales and biases stored in sd.
func Quantize(name string, v []float32, out, in, bits, group int, sd tensor.DType) (*tensor.Weight, error) {
	if len(v) != out*in {
		return nil, fmt.Errorf("quantize %s: %d values for [%d %d]", name, len(v), out, in)
	}
	switch {
	case bits != 2 && bits != 3 && bits != 4 && bits != 5 && bits != 6 && bits != 8:
		return nil, fmt.Errorf("quantize %s: unsupported bits %d", name, bits)
	case group != 32 && group != 64 && group != 128, in%group != 0:
		return nil, fmt.Errorf("quantize %s: group %d does not divide %d (want 32, 64 or 128)", name, group, in)
	}
	rb := in * bits / 8
	data := make([]byte, out*rb)
	ng := in / group
	sc, bi := make([]float32, out*ng), make([]float32, out*ng)
	for r := range out {
		QuantizeRow(data[r*rb:(r+1)*rb], sc[r*ng:(r+1)*ng], bi[r*ng:(r+1)*ng], v[r*in:(r+1)*in], bits, group, sd)
	}
	w := &tensor.Weight{Name: name, DType: tensor.U32, Shape: []int{out, in}, Data: data, Quant: &tensor.Quant{
		Bits: bits, Group: group,
		Scales: tensor.FromFloat32(name+".scales", sd, []int{out, ng}, sc),
		Biases: tensor.FromFloat32(name+".biases", sd, []int{out, ng}, bi),
	}}
	return w, w.Validate()
}
