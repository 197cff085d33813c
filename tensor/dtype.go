package tensor

import (
	"fmt"
	"math"
)

// DType is the element type of stored data.
type DType uint8

// The element types a checkpoint may store.
const (
	Invalid DType = iota
	F32
	BF16
	F16
	U32 // packed MLX affine-quantised weights
	I32
	I64
	U8
	I8 // int8 weights with per-channel scales (see Int8)
)

var dtypeNames = [...]string{Invalid: "invalid", F32: "F32", BF16: "BF16", F16: "F16", U32: "U32", I32: "I32", I64: "I64", U8: "U8", I8: "I8"}
var dtypeSizes = [...]int{Invalid: 0, F32: 4, BF16: 2, F16: 2, U32: 4, I32: 4, I64: 8, U8: 1, I8: 1}

// String returns the safetensors spelling of d ("F32", "BF16", ...).
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", d)
}

// Size returns the size of one element in bytes.
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// IsFloat reports whether d is one of the float types a weight may use directly.
func (d DType) IsFloat() bool { return d == F32 || d == BF16 || d == F16 }

// ParseDType parses a safetensors dtype name.
func ParseDType(s string) (DType, error) {
	for d, n := range dtypeNames {
		if n == s && d != int(Invalid) {
			return DType(d), nil
		}
	}
	return Invalid, fmt.Errorf("unsupported dtype %q", s)
}

// BF16ToF32 widens a bfloat16 bit pattern to float32 exactly.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds a float32 to the nearest bfloat16 (ties to even), as
// PyTorch does; NaN stays NaN.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// F16ToF32 widens an IEEE half-precision bit pattern to float32 exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: renormalise
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		man &= 0x3ff
		return math.Float32frombits(sign | e<<23 | man<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// F32ToF16 rounds a float32 to the nearest IEEE half (ties to even).
func F32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23&0xff) - 127 + 15
	man := u & 0x7fffff
	if u&0x7fffffff >= 0x7f800000 { // inf or nan
		if u&0x7fffffff > 0x7f800000 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	if exp >= 0x1f {
		return sign | 0x7c00
	}
	if exp <= 0 {
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint32(14 - exp)
		half := uint32(1) << (shift - 1)
		r := man >> shift
		rem := man & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(exp)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

func float32frombytes(b []byte) float32 {
	return math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}

func float32bits(f float32) uint32 { return math.Float32bits(f) }
