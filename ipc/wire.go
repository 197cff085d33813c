package ipc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// maxDepth bounds how deeply arrays and maps may nest inside one frame. A
// frame of 64 MiB could otherwise nest millions of levels and exhaust the
// stack of whoever walks it.
const maxDepth = 128

// kind is the class of one msgpack value.
type kind uint8

const (
	kNil kind = iota
	kBool
	kInt   // signed integer (negative fixint, int8..int64)
	kUint  // unsigned integer (positive fixint, uint8..uint64)
	kFloat // float32 or float64
	kStr
	kBin
	kArray
	kMap
	kExt
)

func (k kind) String() string {
	return [...]string{"nil", "bool", "integer", "integer", "float", "string", "binary", "array", "map", "extension"}[k]
}

// token is one msgpack value header; for strings, binaries and extensions
// data holds the payload (aliasing the frame), for arrays and maps n is the
// element count.
type token struct {
	kind kind
	b    bool
	i    int64
	u    uint64
	f    float64
	data []byte
	n    int
}

// errTruncated says the value ran past the end of the frame.
var errTruncated = errors.New("msgpack value truncated")

// scanner reads msgpack values from a byte slice without allocating for
// containers, so hostile sizes cost nothing until their bytes are present.
type scanner struct {
	b   []byte
	pos int
}

func (s *scanner) take(n int) ([]byte, error) {
	if n < 0 || n > len(s.b)-s.pos {
		return nil, errTruncated
	}
	p := s.b[s.pos : s.pos+n]
	s.pos += n
	return p, nil
}

func (s *scanner) uintN(n int) (uint64, error) {
	p, err := s.take(n)
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return uint64(p[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), nil
	default:
		return binary.BigEndian.Uint64(p), nil
	}
}

// next reads one value header (and a string, binary or extension payload).
func (s *scanner) next() (token, error) {
	p, err := s.take(1)
	if err != nil {
		return token{}, err
	}
	c := p[0]
	switch {
	case c <= 0x7f:
		return token{kind: kUint, u: uint64(c)}, nil
	case c >= 0xe0:
		return token{kind: kInt, i: int64(int8(c))}, nil
	case c >= 0x80 && c <= 0x8f:
		return token{kind: kMap, n: int(c & 0x0f)}, nil
	case c >= 0x90 && c <= 0x9f:
		return token{kind: kArray, n: int(c & 0x0f)}, nil
	case c >= 0xa0 && c <= 0xbf:
		d, err := s.take(int(c & 0x1f))
		return token{kind: kStr, data: d}, err
	}
	switch c {
	case 0xc0:
		return token{kind: kNil}, nil
	case 0xc2, 0xc3:
		return token{kind: kBool, b: c == 0xc3}, nil
	case 0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb:
		width := map[byte]int{0xc4: 1, 0xc5: 2, 0xc6: 4, 0xd9: 1, 0xda: 2, 0xdb: 4}[c]
		n, err := s.uintN(width)
		if err != nil {
			return token{}, err
		}
		if n > uint64(len(s.b)) {
			return token{}, errTruncated
		}
		d, err := s.take(int(n))
		k := kStr
		if c <= 0xc6 {
			k = kBin
		}
		return token{kind: k, data: d}, err
	case 0xc7, 0xc8, 0xc9:
		n, err := s.uintN(1 << (c - 0xc7))
		if err != nil {
			return token{}, err
		}
		if n > uint64(len(s.b)) {
			return token{}, errTruncated
		}
		d, err := s.take(int(n) + 1) // type byte, then the payload
		return token{kind: kExt, data: d}, err
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		d, err := s.take(1 + 1<<(c-0xd4))
		return token{kind: kExt, data: d}, err
	case 0xca:
		u, err := s.uintN(4)
		return token{kind: kFloat, f: float64(math.Float32frombits(uint32(u)))}, err
	case 0xcb:
		u, err := s.uintN(8)
		return token{kind: kFloat, f: math.Float64frombits(u)}, err
	case 0xcc, 0xcd, 0xce, 0xcf:
		u, err := s.uintN(1 << (c - 0xcc))
		return token{kind: kUint, u: u}, err
	case 0xd0, 0xd1, 0xd2, 0xd3:
		u, err := s.uintN(1 << (c - 0xd0))
		var i int64
		switch c {
		case 0xd0:
			i = int64(int8(u))
		case 0xd1:
			i = int64(int16(u))
		case 0xd2:
			i = int64(int32(u))
		default:
			i = int64(u)
		}
		return token{kind: kInt, i: i}, err
	case 0xdc, 0xdd:
		n, err := s.uintN(2 << (c - 0xdc))
		if err == nil && n > uint64(len(s.b)) { // each element takes at least one byte
			err = errTruncated
		}
		return token{kind: kArray, n: int(n)}, err
	case 0xde, 0xdf:
		n, err := s.uintN(2 << (c - 0xde))
		if err == nil && 2*n > uint64(len(s.b)) {
			err = errTruncated
		}
		return token{kind: kMap, n: int(n)}, err
	}
	return token{}, fmt.Errorf("msgpack: byte 0x%02x at offset %d is not a valid type code", c, s.pos-1)
}

// skip reads one whole value, checking its structure and nesting depth.
func (s *scanner) skip(depth int) error {
	t, err := s.next()
	if err != nil {
		return err
	}
	n := 0
	switch t.kind {
	case kArray:
		n = t.n
	case kMap:
		n = 2 * t.n
	default:
		return nil
	}
	if n == 0 {
		return nil
	}
	if depth >= maxDepth {
		return fmt.Errorf("msgpack: nested deeper than %d levels", maxDepth)
	}
	for range n {
		if err := s.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// checkRaw reports whether b holds exactly one well-formed msgpack value.
func checkRaw(b []byte) error {
	s := scanner{b: b}
	if err := s.skip(0); err != nil {
		return err
	}
	if s.pos != len(b) {
		return fmt.Errorf("msgpack: %d bytes after the value", len(b)-s.pos)
	}
	return nil
}

// appendMapLen appends a msgpack map header.
func appendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
	}
}

// appendArrayLen appends a msgpack array header.
func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
	}
}

// appendStr appends a msgpack string.
func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// appendUint appends an unsigned integer in its shortest form.
func appendUint(b []byte, u uint64) []byte {
	switch {
	case u <= 0x7f:
		return append(b, byte(u))
	case u <= math.MaxUint8:
		return append(b, 0xcc, byte(u))
	case u <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(u))
	case u <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(u))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), u)
	}
}

// appendInt appends a signed integer in its shortest form.
func appendInt(b []byte, i int64) []byte {
	switch {
	case i >= 0:
		return appendUint(b, uint64(i))
	case i >= -32:
		return append(b, byte(int8(i)))
	case i >= math.MinInt8:
		return append(b, 0xd0, byte(int8(i)))
	case i >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(int16(i)))
	case i >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(int32(i)))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(i))
	}
}

// appendFloat appends a float64.
func appendFloat(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(f))
}
