package value

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseJSON parses one JSON document (a request) into a value tree. It is
// strict JSON (RFC 8259) plus the NaN, Infinity and -Infinity literals that
// Python's json module writes, which parse to non-finite floats so that
// validation can name them. A duplicate key in an object, a lone surrogate
// or invalid UTF-8 in a string, more than [MaxValues] values and nesting
// deeper than [MaxDepth] are errors. Every error is an [*Error].
func ParseJSON(data []byte) (Value, error) {
	p := &jsonParser{data: data}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return Value{}, p.errorf("unexpected data after the request")
	}
	return v, nil
}

type jsonParser struct {
	reader
	data []byte
	pos  int
}

// errorf returns an error about the JSON text at the current position.
func (p *jsonParser) errorf(format string, args ...any) *Error {
	return p.fail(true, "invalid JSON: "+fmt.Sprintf(format, args...)+" (byte "+strconv.Itoa(p.pos)+")")
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) literal(word string) bool {
	if len(p.data)-p.pos >= len(word) && string(p.data[p.pos:p.pos+len(word)]) == word {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *jsonParser) value(depth int) (Value, error) {
	if err := p.count(); err != nil {
		return Value{}, err
	}
	if p.pos >= len(p.data) {
		return Value{}, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '"':
		s, err := p.str()
		return Value{Kind: String, Str: s}, err
	case c == '-' || c >= '0' && c <= '9':
		if p.literal("-Infinity") {
			return Value{Kind: Float, Float: math.Inf(-1)}, nil
		}
		return p.number()
	case c == '{':
		if depth >= MaxDepth {
			return Value{}, p.errorf("nested deeper than %d", MaxDepth)
		}
		return p.object(depth + 1)
	case c == '[':
		if depth >= MaxDepth {
			return Value{}, p.errorf("nested deeper than %d", MaxDepth)
		}
		return p.array(depth + 1)
	case p.literal("null"):
		return Value{}, nil
	case p.literal("true"):
		return Value{Kind: Bool, Bool: true}, nil
	case p.literal("false"):
		return Value{Kind: Bool}, nil
	case p.literal("NaN"):
		return Value{Kind: Float, Float: math.NaN()}, nil
	case p.literal("Infinity"):
		return Value{Kind: Float, Float: math.Inf(1)}, nil
	default:
		return Value{}, p.errorf("unexpected character %q", rune(c))
	}
}

func (p *jsonParser) object(depth int) (Value, error) {
	p.pos++ // '{'
	v := Value{Kind: Object, Obj: []Member{}}
	var seen map[string]struct{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, p.errorf("expected a string key")
		}
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		var kerr *Error
		if seen, kerr = p.key(v.Obj, seen, key); kerr != nil {
			return Value{}, kerr
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, p.errorf("expected ':' after key %q", key)
		}
		p.pos++
		p.skipSpace()
		p.enterKey(key)
		x, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		p.leave()
		v.Obj = append(v.Obj, Member{Key: key, Value: x})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf("unexpected end of input in an object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return Value{}, p.errorf("expected ',' or '}' in an object")
		}
	}
}

func (p *jsonParser) array(depth int) (Value, error) {
	p.pos++ // '['
	v := Value{Kind: Array, Arr: []Value{}}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		p.enterIndex(len(v.Arr))
		x, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		p.leave()
		v.Arr = append(v.Arr, x)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf("unexpected end of input in an array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return Value{}, p.errorf("expected ',' or ']' in an array")
		}
	}
}

// number parses a JSON number: an integer (no '.', 'e' or 'E') keeps its
// digits, anything else becomes the nearest float64 (±Inf when out of range,
// as Python reads it, which validation refuses).
func (p *jsonParser) number() (Value, error) {
	start := p.pos
	d := p.data
	if d[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	intStart := p.pos
	if digits() == 0 {
		return Value{}, p.errorf("malformed number")
	}
	if d[intStart] == '0' && p.pos-intStart > 1 {
		p.pos = intStart
		return Value{}, p.errorf("number with a leading zero")
	}
	isFloat := false
	if p.pos < len(d) && d[p.pos] == '.' {
		isFloat = true
		p.pos++
		if digits() == 0 {
			return Value{}, p.errorf("malformed number")
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		isFloat = true
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return Value{}, p.errorf("malformed number")
		}
	}
	text := string(d[start:p.pos])
	if !isFloat {
		return Value{Kind: Int, Int: canonicalInt(text)}, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !isRangeErr(err) {
		return Value{}, p.errorf("malformed number %s", text)
	}
	return Value{Kind: Float, Float: f}, nil // out of range: ±Inf or 0, as Python
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// str parses a JSON string at p.pos (the opening quote). Escapes are decoded;
// surrogate pairs are joined, and a lone surrogate or invalid UTF-8 is an
// error (such text cannot be tokenised).
func (p *jsonParser) str() (string, error) {
	p.pos++ // opening quote
	d := p.data
	var b []byte
	start := p.pos
	for {
		if p.pos >= len(d) {
			return "", p.errorf("unterminated string")
		}
		c := d[p.pos]
		switch {
		case c == '"':
			s := string(d[start:p.pos])
			if b != nil {
				s = string(append(b, d[start:p.pos]...))
			}
			p.pos++
			return s, nil
		case c < 0x20:
			return "", p.errorf("control character %#02x in a string", c)
		case c == '\\':
			b = append(b, d[start:p.pos]...)
			p.pos++
			if p.pos >= len(d) {
				return "", p.errorf("unterminated string")
			}
			e := d[p.pos]
			p.pos++
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xdc00 || !p.literal(`\u`) {
						return "", p.errorf("lone surrogate \\u%04x in a string", r)
					}
					r2, err := p.hex4()
					if err != nil {
						return "", err
					}
					joined := utf16.DecodeRune(r, r2)
					if joined == utf8.RuneError {
						return "", p.errorf("lone surrogate \\u%04x in a string", r)
					}
					r = joined
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", p.errorf("invalid escape \\%c", e)
			}
			start = p.pos
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf("invalid UTF-8 in a string")
			}
			p.pos += size
		}
	}
}

func (p *jsonParser) hex4() (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.errorf("short \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		var h byte
		switch {
		case c >= '0' && c <= '9':
			h = c - '0'
		case c >= 'a' && c <= 'f':
			h = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			h = c - 'A' + 10
		default:
			return 0, p.errorf("malformed \\u escape")
		}
		r = r<<4 | rune(h)
	}
	p.pos += 4
	return r, nil
}

// Layout is how [AppendJSON] lays a document out.
type Layout uint8

// The layouts.
const (
	// Compact writes no space: {"a":[1,2]}.
	Compact Layout = iota
	// Spaced writes the separators ", " and ": " of Python's json.dumps:
	// {"a": [1, 2]}.
	Spaced
)

// AppendJSON appends v as JSON, as Python's json.dumps(v,
// ensure_ascii=False) writes it in the given layout: object keys in their
// order, strings escaped only where JSON requires ('"', '\\' and control
// characters, five of them by name), integers with every digit and floats
// in Python's repr form (so that a float reads back as a float). A
// non-finite float has no JSON form and is an error.
func AppendJSON(b []byte, v *Value, layout Layout) ([]byte, error) {
	comma, colon := ",", ":"
	if layout == Spaced {
		comma, colon = ", ", ": "
	}
	w := jsonWriter{b: b, comma: comma, colon: colon}
	if err := w.value(v); err != nil {
		return nil, err
	}
	return w.b, nil
}

type jsonWriter struct {
	b            []byte
	comma, colon string
}

func (w *jsonWriter) value(v *Value) error {
	switch v.Kind {
	case Null:
		w.b = append(w.b, "null"...)
	case Bool:
		w.b = strconv.AppendBool(w.b, v.Bool)
	case Int:
		w.b = append(w.b, v.Int...)
	case Float:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			return fmt.Errorf("value: the float %v has no JSON form", v.Float)
		}
		w.b = appendPyFloat(w.b, v.Float)
	case String:
		w.b = appendJSONString(w.b, v.Str)
	case Array:
		w.b = append(w.b, '[')
		for i := range v.Arr {
			if i > 0 {
				w.b = append(w.b, w.comma...)
			}
			if err := w.value(&v.Arr[i]); err != nil {
				return err
			}
		}
		w.b = append(w.b, ']')
	case Object:
		w.b = append(w.b, '{')
		for i := range v.Obj {
			if i > 0 {
				w.b = append(w.b, w.comma...)
			}
			w.b = appendJSONString(w.b, v.Obj[i].Key)
			w.b = append(w.b, w.colon...)
			if err := w.value(&v.Obj[i].Value); err != nil {
				return err
			}
		}
		w.b = append(w.b, '}')
	default:
		return fmt.Errorf("value: unknown kind %d", v.Kind)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string with ensure_ascii=False: '"'
// and '\\' escaped, control characters below U+0020 escaped (five by name,
// the rest as \u00xx), everything else raw.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		start = i + 1
		switch c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendPyFloat appends f as Python's repr(float) writes it: the shortest
// digits that round-trip, in positional form when the decimal exponent is in
// [-4, 16) (with ".0" when there is no fraction) and in exponent form
// otherwise (mantissa without a trailing ".0", exponent with a sign and at
// least two digits). NaN and the infinities are written as Python writes
// them.
func appendPyFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(b, "-0.0"...)
		}
		return append(b, "0.0"...)
	}
	// 'e' with precision -1 gives the shortest round-tripping digits:
	// [-]d[.ddd]e±XX.
	var buf [32]byte
	s := string(strconv.AppendFloat(buf[:0], f, 'e', -1, 64))
	if s[0] == '-' {
		b = append(b, '-')
		s = s[1:]
	}
	ePos := strings.IndexByte(s, 'e')
	mant, expStr := s[:ePos], s[ePos+1:]
	exp, _ := strconv.Atoi(expStr) // the value is d.ddd × 10^exp
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // the value is 0.digits × 10^decpt
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			b = append(b, "0."...)
			b = append(b, strings.Repeat("0", -decpt)...)
			b = append(b, digits...)
		case decpt >= len(digits):
			b = append(b, digits...)
			b = append(b, strings.Repeat("0", decpt-len(digits))...)
			b = append(b, ".0"...)
		default:
			b = append(b, digits[:decpt]...)
			b = append(b, '.')
			b = append(b, digits[decpt:]...)
		}
		return b
	}
	b = append(b, digits[:1]...)
	if len(digits) > 1 {
		b = append(b, '.')
		b = append(b, digits[1:]...)
	}
	b = append(b, 'e')
	if exp < 0 {
		b = append(b, '-')
		exp = -exp
	} else {
		b = append(b, '+')
	}
	if exp < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, int64(exp), 10)
}
