package decide

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects in a request.
const maxDepth = 512

// parseJSONValue parses one JSON document into an ordered value tree. It is
// strict JSON (RFC 8259) plus the NaN, Infinity and -Infinity literals that
// Python's json module accepts, which parse to non-finite floats so that
// validation can name them. Duplicate keys in an object are an error.
func parseJSONValue(data []byte) (Value, error) {
	p := &jsonParser{data: data}
	p.skipSpace()
	v, err := p.value(nil, 0)
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return Value{}, p.errorf(nil, "unexpected data after the request")
	}
	return v, nil
}

type jsonParser struct {
	data   []byte
	pos    int
	values int // values read so far
}

// errorf returns a *RequestError about the JSON text at the current position.
func (p *jsonParser) errorf(path *pathNode, format string, args ...any) error {
	e := pathError(path, fmt.Sprintf(format, args...)+fmt.Sprintf(" (byte %d)", p.pos))
	e.Message = "invalid JSON: " + e.Message
	return e
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
	if strings.HasPrefix(string(p.data[p.pos:min(len(p.data), p.pos+len(word))]), word) {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *jsonParser) value(path *pathNode, depth int) (Value, error) {
	if p.values++; p.values > MaxValues {
		return Value{}, pathError(path, fmt.Sprintf("more than %d values in the document (max_values): no model takes that much evidence", MaxValues))
	}
	if p.pos >= len(p.data) {
		return Value{}, p.errorf(path, "unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		if depth >= maxDepth {
			return Value{}, p.errorf(path, "nested deeper than %d", maxDepth)
		}
		return p.object(path, depth+1)
	case c == '[':
		if depth >= maxDepth {
			return Value{}, p.errorf(path, "nested deeper than %d", maxDepth)
		}
		return p.array(path, depth+1)
	case c == '"':
		s, err := p.str(path)
		return Value{Kind: String, Str: s}, err
	case c == '-' || c >= '0' && c <= '9':
		if p.literal("-Infinity") {
			return Value{Kind: Float, Float: math.Inf(-1)}, nil
		}
		return p.number(path)
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
		return Value{}, p.errorf(path, "unexpected character %q", rune(c))
	}
}

func (p *jsonParser) object(path *pathNode, depth int) (Value, error) {
	p.pos++ // '{'
	v := Value{Kind: Object, Obj: []Member{}}
	var seen map[string]bool
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, p.errorf(path, "expected a string key")
		}
		key, err := p.str(path)
		if err != nil {
			return Value{}, err
		}
		if seen == nil {
			seen = make(map[string]bool)
		}
		if seen[key] {
			return Value{}, pathError(path, fmt.Sprintf("duplicate key %q", key))
		}
		seen[key] = true
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, p.errorf(path, "expected ':' after key %q", key)
		}
		p.pos++
		p.skipSpace()
		kpath := joinPath(path, key)
		x, err := p.value(kpath, depth)
		if err != nil {
			return Value{}, err
		}
		v.Obj = append(v.Obj, Member{Key: key, Value: x})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf(path, "unexpected end of input in an object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return Value{}, p.errorf(path, "expected ',' or '}' in an object")
		}
	}
}

func (p *jsonParser) array(path *pathNode, depth int) (Value, error) {
	p.pos++ // '['
	v := Value{Kind: Array, Arr: []Value{}}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		x, err := p.value(indexPath(path, len(v.Arr)), depth)
		if err != nil {
			return Value{}, err
		}
		v.Arr = append(v.Arr, x)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf(path, "unexpected end of input in an array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return Value{}, p.errorf(path, "expected ',' or ']' in an array")
		}
	}
}

// number parses a JSON number: an integer (no '.', 'e' or 'E') keeps its
// digits, anything else becomes the nearest float64 (±Inf when out of range,
// which validation refuses).
func (p *jsonParser) number(path *pathNode) (Value, error) {
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
		return Value{}, p.errorf(path, "malformed number")
	}
	if d[intStart] == '0' && p.pos-intStart > 1 {
		p.pos = intStart
		return Value{}, p.errorf(path, "number with a leading zero")
	}
	isFloat := false
	if p.pos < len(d) && d[p.pos] == '.' {
		isFloat = true
		p.pos++
		if digits() == 0 {
			return Value{}, p.errorf(path, "malformed number")
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		isFloat = true
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return Value{}, p.errorf(path, "malformed number")
		}
	}
	text := string(d[start:p.pos])
	if !isFloat {
		return Value{Kind: Int, Int: canonicalInt(text)}, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !isRangeErr(err) {
		return Value{}, p.errorf(path, "malformed number %s", text)
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
func (p *jsonParser) str(path *pathNode) (string, error) {
	p.pos++ // opening quote
	d := p.data
	var b []byte
	start := p.pos
	for {
		if p.pos >= len(d) {
			return "", p.errorf(path, "unterminated string")
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
			return "", p.errorf(path, "control character %#02x in a string", c)
		case c == '\\':
			b = append(b, d[start:p.pos]...)
			p.pos++
			if p.pos >= len(d) {
				return "", p.errorf(path, "unterminated string")
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
				r, err := p.hex4(path)
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xdc00 || !p.literal(`\u`) {
						return "", p.errorf(path, "lone surrogate \\u%04x in a string", r)
					}
					r2, err := p.hex4(path)
					if err != nil {
						return "", err
					}
					joined := utf16.DecodeRune(r, r2)
					if joined == utf8.RuneError {
						return "", p.errorf(path, "lone surrogate \\u%04x in a string", r)
					}
					r = joined
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", p.errorf(path, "invalid escape \\%c", e)
			}
			start = p.pos
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf(path, "invalid UTF-8 in a string")
			}
			p.pos += size
		}
	}
}

func (p *jsonParser) hex4(path *pathNode) (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.errorf(path, "short \\u escape")
	}
	n, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, p.errorf(path, "malformed \\u escape")
	}
	p.pos += 4
	return rune(n), nil
}
