package model

import (
	"math/rand/v2"
	"testing"

	"github.com/startlux/startlux/tensor"
)

// TestQuantizeRoundTrip packs random data at every supported width and group
// and checks, through tensor.Weight.Row (the reference dequantiser), that each
// value comes back within half a quantisation step (plus the rounding of the
// scale and bias to bf16), and that the integer codes survive packing.
func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, group := range []int{32, 64, 128} {
			out, in := 3, 256
			v := make([]float32, out*in)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			w, err := Quantize("w", v, out, in, bits, group, tensor.BF16)
			if err != nil {
				t.Fatal(err)
			}
			row := make([]float32, in)
			sc, bi := w.Quant.Scales.Float32s(), w.Quant.Biases.Float32s()
			ng := in / group
			for r := range out {
				w.Row(r, row)
				for c := range in {
					s, b := sc[r*ng+c/group], bi[r*ng+c/group]
					q := tensor.Unpack(w.Data[r*in*bits/8:], bits, c)
					if row[c] != s*float32(q)+b {
						t.Fatalf("bits %d: code %d does not dequantise to %v", bits, q, row[c])
					}
					tol := s*(0.5+float32(int(1)<<bits)/128) + abs32(b)/128
					if d := abs32(row[c] - v[r*in+c]); d > tol {
						t.Fatalf("bits %d group %d: (%d,%d) = %v, want %v ± %v", bits, group, r, c, row[c], v[r*in+c], tol)
					}
				}
			}
		}
	}
	codes := make([]byte, 72)
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		clear(codes)
		want := make([]uint32, 64)
		for c := range want {
			want[c] = uint32(rng.IntN(1 << bits))
			pack(codes, bits, c, want[c])
		}
		for c, q := range want {
			if got := tensor.Unpack(codes, bits, c); got != q {
				t.Fatalf("bits %d: code %d unpacked as %d, want %d", bits, c, got, q)
			}
		}
	}
	if _, err := Quantize("w", make([]float32, 96), 1, 96, 4, 64, tensor.BF16); err == nil {
		t.Error("group not dividing the row accepted")
	}
}
