package cpu

import "math"

// exp32 returns e^x in float32 to within about 2 ulp (Cephes expf: x =
// n·ln2 + r with |r| ≤ ln2/2, a degree-7 polynomial for e^r, and 2^n from
// the exponent bits). Inputs below −87.3 give 0, above 88.37 about 2.4e38; the
// callers (softmax, sigmoid, decays) never need more. It is several times
// faster than math.Exp, which the elementwise ops would otherwise spend most
// of their time in.
func exp32(x float32) float32 {
	const (
		hi     = 88.3762626647949
		lo     = -87.3365478515625
		log2e  = 1.44269504088896341
		c1     = 0.693359375
		c2     = -2.12194440e-4
		magic  = 12582912 // 1.5·2²³: adding it rounds to an integer
		p0     = 1.9875691500e-4
		p1     = 1.3981999507e-3
		p2     = 8.3334519073e-3
		p3     = 4.1665795894e-2
		p4     = 1.6666665459e-1
		p5     = 5.0000001201e-1
		expOne = 127 << 23
	)
	if x > hi {
		x = hi
	}
	if !(x >= lo) { // also NaN → 0
		if x != x {
			return x
		}
		return 0
	}
	t := x*log2e + magic
	n := t - magic
	r := x - n*c1 - n*c2
	r2 := r * r
	p := ((((p0*r+p1)*r+p2)*r+p3)*r+p4)*r + p5
	p = p*r2 + r + 1
	return p * math.Float32frombits(uint32(int32(math.Float32bits(t)&0x7fffff)-(1<<22))<<23+expOne)
}

// sigmoid returns 1 / (1 + e^−x) in float32.
func sigmoid(x float32) float32 { return 1 / (1 + exp32(-x)) }

// silu returns x · sigmoid(x), as x / (1 + e^−x).
func silu(x float32) float32 { return x / (1 + exp32(-x)) }

// flushBelow is where expFlush gives 0 instead of e^x (e^−60 ≈ 8.8e-27).
const flushBelow = -60

// expFlush returns e^x, or 0 for x < −60. Decay factors and softmax
// weights that small change nothing at float32 precision, but multiplied
// by other small values they become subnormal, and subnormal operands make
// sgemm many times slower on some CPUs (a 5× slower delta rule was seen).
func expFlush(x float32) float32 {
	if x < flushBelow {
		return 0
	}
	return exp32(x)
}
