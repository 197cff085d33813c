package value

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Type is the type of one msgpack value, as a [Scanner] reads its header.
type Type uint8

// The msgpack types.
const (
	TypeNil Type = iota
	TypeBool
	TypeInt   // a signed integer (negative fixint, int8..int64)
	TypeUint  // an unsigned integer (positive fixint, uint8..uint64)
	TypeFloat // float32 or float64
	TypeStr
	TypeBin
	TypeArray
	TypeMap
	TypeExt
)

// String names the type as error messages do ("integer" for both kinds).
func (t Type) String() string {
	return [...]string{"nil", "bool", "integer", "integer", "float", "string", "binary", "array", "map", "extension"}[t]
}

// Token is one msgpack value header. For strings, binaries and extensions
// Data holds the payload (aliasing the scanned bytes; an extension's starts
// with its type byte), for arrays and maps Len is the element count.
type Token struct {
	Type  Type
	Bool  bool
	Int   int64
	Uint  uint64
	Float float64
	Data  []byte
	Len   int
}

// errTruncated says a value ran past the end of its bytes.
var errTruncated = errors.New("msgpack value truncated")

// Scanner reads msgpack from a byte slice, one value header at a time
// ([Scanner.Next]), one whole value checked ([Scanner.Skip]) or one whole
// value as a tree ([Scanner.Decode]). It allocates nothing for containers
// before their elements' bytes are there, so a hostile length costs
// nothing.
type Scanner struct {
	b   []byte
	pos int
}

// NewScanner returns a scanner at the start of b.
func NewScanner(b []byte) *Scanner { return &Scanner{b: b} }

// Reset puts the scanner at the start of b.
func (s *Scanner) Reset(b []byte) { s.b, s.pos = b, 0 }

// Pos returns the offset of the next byte to read.
func (s *Scanner) Pos() int { return s.pos }

func (s *Scanner) take(n int) ([]byte, error) {
	if n < 0 || n > len(s.b)-s.pos {
		return nil, errTruncated
	}
	p := s.b[s.pos : s.pos+n]
	s.pos += n
	return p, nil
}

func (s *Scanner) uintN(n int) (uint64, error) {
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

// Next reads one value header (and a string's, binary's or extension's
// payload).
func (s *Scanner) Next() (Token, error) {
	p, err := s.take(1)
	if err != nil {
		return Token{}, err
	}
	c := p[0]
	switch {
	case c <= 0x7f:
		return Token{Type: TypeUint, Uint: uint64(c)}, nil
	case c >= 0xe0:
		return Token{Type: TypeInt, Int: int64(int8(c))}, nil
	case c <= 0x8f:
		return Token{Type: TypeMap, Len: int(c & 0x0f)}, nil
	case c <= 0x9f:
		return Token{Type: TypeArray, Len: int(c & 0x0f)}, nil
	case c <= 0xbf:
		d, err := s.take(int(c & 0x1f))
		return Token{Type: TypeStr, Data: d}, err
	}
	switch c {
	case 0xc0:
		return Token{Type: TypeNil}, nil
	case 0xc2, 0xc3:
		return Token{Type: TypeBool, Bool: c == 0xc3}, nil
	case 0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb:
		width := 1
		switch c {
		case 0xc5, 0xda:
			width = 2
		case 0xc6, 0xdb:
			width = 4
		}
		n, err := s.uintN(width)
		if err != nil {
			return Token{}, err
		}
		if n > uint64(len(s.b)) {
			return Token{}, errTruncated
		}
		d, err := s.take(int(n))
		t := TypeStr
		if c <= 0xc6 {
			t = TypeBin
		}
		return Token{Type: t, Data: d}, err
	case 0xc7, 0xc8, 0xc9:
		n, err := s.uintN(1 << (c - 0xc7))
		if err != nil {
			return Token{}, err
		}
		if n > uint64(len(s.b)) {
			return Token{}, errTruncated
		}
		d, err := s.take(int(n) + 1) // type byte, then the payload
		return Token{Type: TypeExt, Data: d}, err
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		d, err := s.take(1 + 1<<(c-0xd4))
		return Token{Type: TypeExt, Data: d}, err
	case 0xca:
		u, err := s.uintN(4)
		return Token{Type: TypeFloat, Float: float64(math.Float32frombits(uint32(u)))}, err
	case 0xcb:
		u, err := s.uintN(8)
		return Token{Type: TypeFloat, Float: math.Float64frombits(u)}, err
	case 0xcc, 0xcd, 0xce, 0xcf:
		u, err := s.uintN(1 << (c - 0xcc))
		return Token{Type: TypeUint, Uint: u}, err
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
		return Token{Type: TypeInt, Int: i}, err
	case 0xdc, 0xdd:
		n, err := s.uintN(2 << (c - 0xdc))
		if err == nil && n > uint64(len(s.b)-s.pos) { // each element takes at least one byte
			err = fmt.Errorf("array of %d items in %d bytes", n, len(s.b)-s.pos)
		}
		return Token{Type: TypeArray, Len: int(n)}, err
	case 0xde, 0xdf:
		n, err := s.uintN(2 << (c - 0xde))
		if err == nil && 2*n > uint64(len(s.b)-s.pos) {
			err = fmt.Errorf("map of %d entries in %d bytes", n, len(s.b)-s.pos)
		}
		return Token{Type: TypeMap, Len: int(n)}, err
	}
	return Token{}, fmt.Errorf("msgpack: byte 0x%02x at offset %d is not a valid type code", c, s.pos-1)
}

// Skip reads one whole value, checking its structure and that it nests no
// deeper than [MaxDepth].
func (s *Scanner) Skip() error { return s.skip(0) }

func (s *Scanner) skip(depth int) error {
	t, err := s.Next()
	if err != nil {
		return err
	}
	n := 0
	switch t.Type {
	case TypeArray:
		n = t.Len
	case TypeMap:
		n = 2 * t.Len
	default:
		return nil
	}
	if n == 0 {
		return nil
	}
	if depth >= MaxDepth {
		return fmt.Errorf("msgpack: nested deeper than %d levels", MaxDepth)
	}
	for range n {
		if err := s.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// CheckMsgpack reports whether b holds exactly one well-formed msgpack
// value nesting no deeper than [MaxDepth].
func CheckMsgpack(b []byte) error {
	s := Scanner{b: b}
	if err := s.Skip(); err != nil {
		return err
	}
	if s.pos != len(b) {
		return fmt.Errorf("msgpack: %d bytes after the value", len(b)-s.pos)
	}
	return nil
}

// ParseMsgpack decodes one msgpack document into a value tree: maps keep
// their order (keys must be strings, duplicates are an error), integers
// become their digits, float32 is widened to float64. Binary data,
// extension types and invalid UTF-8 are refused, and the limits are those
// of [ParseJSON]. Every error is an [*Error].
func ParseMsgpack(data []byte) (Value, error) {
	s := Scanner{b: data}
	v, err := s.Decode()
	if err != nil {
		return Value{}, err
	}
	if s.pos < len(data) {
		return Value{}, &Error{Message: fmt.Sprintf("invalid msgpack: %d bytes after the request", len(data)-s.pos), Malformed: true}
	}
	return v, nil
}

// Decode reads one whole value as a tree, as [ParseMsgpack] does. Its
// error is an [*Error]. After one that is not Malformed (the value is
// well-formed msgpack but no value tree) the scanner has moved past the
// value, which was then checked as [Scanner.Skip] checks it: a value that
// is malformed further on reports that instead.
func (s *Scanner) Decode() (Value, error) {
	start := s.pos
	d := msgpackDecoder{s: s}
	v, err := d.value(0)
	if err == nil {
		return v, nil
	}
	if !err.Malformed {
		s.pos = start
		if serr := s.Skip(); serr != nil {
			return Value{}, &Error{Message: "invalid msgpack: " + serr.Error(), Malformed: true}
		}
	}
	return Value{}, err
}

type msgpackDecoder struct {
	reader
	s *Scanner
}

// malformed returns the error of bytes that are not msgpack.
func (d *msgpackDecoder) malformed(err error) *Error {
	return d.fail(true, "invalid msgpack: "+err.Error())
}

func (d *msgpackDecoder) value(depth int) (Value, *Error) {
	if err := d.count(); err != nil {
		return Value{}, err
	}
	t, nerr := d.s.Next()
	if nerr != nil {
		return Value{}, d.malformed(nerr)
	}
	switch t.Type {
	case TypeNil:
		return Value{}, nil
	case TypeBool:
		return Value{Kind: Bool, Bool: t.Bool}, nil
	case TypeUint:
		return Value{Kind: Int, Int: strconv.FormatUint(t.Uint, 10)}, nil
	case TypeInt:
		return Value{Kind: Int, Int: strconv.FormatInt(t.Int, 10)}, nil
	case TypeFloat:
		return Value{Kind: Float, Float: t.Float}, nil
	case TypeStr:
		s, err := d.str(t.Data)
		return Value{Kind: String, Str: s}, err
	case TypeArray:
		if depth >= MaxDepth {
			return Value{}, d.malformed(fmt.Errorf("nested deeper than %d", MaxDepth))
		}
		v := Value{Kind: Array, Arr: make([]Value, 0, min(t.Len, MaxValues-d.values+1))}
		for i := range t.Len {
			d.enterIndex(i)
			x, err := d.value(depth + 1)
			if err != nil {
				return Value{}, err
			}
			d.leave()
			v.Arr = append(v.Arr, x)
		}
		return v, nil
	case TypeMap:
		if depth >= MaxDepth {
			return Value{}, d.malformed(fmt.Errorf("nested deeper than %d", MaxDepth))
		}
		v := Value{Kind: Object, Obj: make([]Member, 0, min(t.Len, MaxValues-d.values+1))}
		var seen map[string]struct{}
		for i := range t.Len {
			k, nerr := d.s.Next()
			if nerr != nil {
				return Value{}, d.malformed(nerr)
			}
			if k.Type != TypeStr {
				return Value{}, d.fail(false, fmt.Sprintf("map key %d is not a string", i))
			}
			key, err := d.str(k.Data)
			if err != nil {
				return Value{}, err
			}
			if seen, err = d.key(v.Obj, seen, key); err != nil {
				return Value{}, err
			}
			d.enterKey(key)
			x, err := d.value(depth + 1)
			if err != nil {
				return Value{}, err
			}
			d.leave()
			v.Obj = append(v.Obj, Member{Key: key, Value: x})
		}
		return v, nil
	case TypeBin:
		return Value{}, d.fail(false, "binary data is not a JSON value")
	default:
		return Value{}, d.fail(false, "a msgpack extension type is not a JSON value")
	}
}

// str returns a string's payload, which must be valid UTF-8.
func (d *msgpackDecoder) str(b []byte) (string, *Error) {
	if !utf8.Valid(b) {
		return "", d.fail(false, "string is not valid UTF-8")
	}
	return string(b), nil
}

// AppendMsgpack appends v as msgpack with object keys in order: integers
// in their shortest form, floats as float64. An integer beyond 64 bits has
// no msgpack form and is an error.
func AppendMsgpack(b []byte, v *Value) ([]byte, error) {
	switch v.Kind {
	case Null:
		return AppendNil(b), nil
	case Bool:
		if v.Bool {
			return append(b, 0xc3), nil
		}
		return append(b, 0xc2), nil
	case Int:
		if i, err := strconv.ParseInt(v.Int, 10, 64); err == nil {
			return AppendInt(b, i), nil
		}
		if u, err := strconv.ParseUint(v.Int, 10, 64); err == nil {
			return AppendUint(b, u), nil
		}
		return nil, fmt.Errorf("integer %s: beyond the 64 bits msgpack can carry (send it as a string)", v.Int)
	case Float:
		return AppendFloat(b, v.Float), nil
	case String:
		return AppendString(b, v.Str), nil
	case Array:
		b = AppendArrayHeader(b, len(v.Arr))
		for i := range v.Arr {
			var err error
			if b, err = AppendMsgpack(b, &v.Arr[i]); err != nil {
				return nil, err
			}
		}
		return b, nil
	case Object:
		b = AppendMapHeader(b, len(v.Obj))
		for i := range v.Obj {
			b = AppendString(b, v.Obj[i].Key)
			var err error
			if b, err = AppendMsgpack(b, &v.Obj[i].Value); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("value: unknown kind %d", v.Kind)
}

// AppendNil appends msgpack's nil.
func AppendNil(b []byte) []byte { return append(b, 0xc0) }

// AppendMapHeader appends the header of a msgpack map of n entries.
func AppendMapHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
	}
}

// AppendArrayHeader appends the header of a msgpack array of n elements.
func AppendArrayHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
	}
}

// AppendString appends a msgpack string.
func AppendString(b []byte, s string) []byte {
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

// AppendUint appends an unsigned integer in its shortest form.
func AppendUint(b []byte, u uint64) []byte {
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

// AppendInt appends a signed integer in its shortest form.
func AppendInt(b []byte, i int64) []byte {
	switch {
	case i >= 0:
		return AppendUint(b, uint64(i))
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

// AppendFloat appends a float64.
func AppendFloat(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(f))
}
