package decide

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RenderJSON renders v as Python's json.dumps(v, ensure_ascii=False) does,
// with object keys in their order: separators ", " and ": ", strings escaped
// only where JSON requires, integers with every digit and floats in Python's
// repr form. It fails on a non-finite float.
func RenderJSON(v *Value) (string, error) {
	if p := checkFinite(v, joinPath(nil, "evidence")); p != nil {
		return "", pathError(p, "non-finite number")
	}
	var b strings.Builder
	renderValue(&b, v)
	return b.String(), nil
}

func renderValue(b *strings.Builder, v *Value) {
	switch v.Kind {
	case Null:
		b.WriteString("null")
	case Bool:
		if v.Bool {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case Int:
		b.WriteString(v.Int)
	case Float:
		b.WriteString(pyFloatRepr(v.Float))
	case String:
		renderString(b, v.Str)
	case Array:
		b.WriteByte('[')
		for i := range v.Arr {
			if i > 0 {
				b.WriteString(", ")
			}
			renderValue(b, &v.Arr[i])
		}
		b.WriteByte(']')
	case Object:
		b.WriteByte('{')
		for i := range v.Obj {
			if i > 0 {
				b.WriteString(", ")
			}
			renderString(b, v.Obj[i].Key)
			b.WriteString(": ")
			renderValue(b, &v.Obj[i].Value)
		}
		b.WriteByte('}')
	}
}

const hexDigits = "0123456789abcdef"

// renderString writes s as a JSON string with ensure_ascii=False: '"' and
// '\\' escaped, control characters below U+0020 escaped (five by name, the
// rest as \u00xx), everything else raw.
func renderString(b *strings.Builder, s string) {
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[start:i])
		start = i + 1
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// pyFloatRepr formats f as Python's repr(float) does: the shortest digits
// that round-trip, in positional form when the decimal exponent is in
// [-4, 16) (with ".0" when there is no fraction) and in exponent form
// otherwise (mantissa without a trailing ".0", exponent with a sign and at
// least two digits).
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	// 'e' with precision -1 gives the shortest round-tripping digits:
	// [-]d[.ddd]e±XX.
	s := strconv.FormatFloat(f, 'e', -1, 64)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	ePos := strings.IndexByte(s, 'e')
	mant, expStr := s[:ePos], s[ePos+1:]
	exp, _ := strconv.Atoi(expStr) // the value is d.ddd × 10^exp
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // the value is 0.digits × 10^decpt
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			b.WriteString("0.")
			b.WriteString(strings.Repeat("0", -decpt))
			b.WriteString(digits)
		case decpt >= len(digits):
			b.WriteString(digits)
			b.WriteString(strings.Repeat("0", decpt-len(digits)))
			b.WriteString(".0")
		default:
			b.WriteString(digits[:decpt])
			b.WriteByte('.')
			b.WriteString(digits[decpt:])
		}
		return b.String()
	}
	b.WriteString(digits[:1])
	if len(digits) > 1 {
		b.WriteByte('.')
		b.WriteString(digits[1:])
	}
	b.WriteByte('e')
	if exp < 0 {
		b.WriteByte('-')
		exp = -exp
	} else {
		b.WriteByte('+')
	}
	if exp < 10 {
		b.WriteByte('0')
	}
	b.WriteString(strconv.Itoa(exp))
	return b.String()
}

// validUTF8 reports whether s is valid UTF-8 (surrogate code points are not).
func validUTF8(s string) bool { return utf8.ValidString(s) }
