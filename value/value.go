package value

import (
	"strconv"
	"strings"
)

// Kind is the kind of a [Value].
type Kind uint8

// The kinds of JSON value.
const (
	Null Kind = iota
	Bool
	Int    // an integer of any size, kept as its decimal digits
	Float  // a float64 (a JSON number with '.', 'e' or 'E', or a msgpack float)
	String // valid UTF-8
	Array
	Object // keys in the order received
)

var kindNames = [...]string{"null", "bool", "integer", "float", "string", "array", "object"}

// String names the kind as error messages do.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one node of an ordered JSON value tree: objects are lists of
// key/value members in the order they were received, and integers keep every
// digit. The zero Value is null.
type Value struct {
	Kind  Kind
	Bool  bool
	Int   string // Int: optional '-' and decimal digits, no leading zeros, "0" for zero
	Float float64
	Str   string
	Arr   []Value
	Obj   []Member
}

// Member is one key/value pair of an object.
type Member struct {
	Key   string
	Value Value
}

// NewBool returns a bool value.
func NewBool(b bool) Value { return Value{Kind: Bool, Bool: b} }

// NewInt returns an integer value.
func NewInt(i int64) Value { return Value{Kind: Int, Int: strconv.FormatInt(i, 10)} }

// NewFloat returns a float value.
func NewFloat(f float64) Value { return Value{Kind: Float, Float: f} }

// NewString returns a string value.
func NewString(s string) Value { return Value{Kind: String, Str: s} }

// NewArray returns an array value holding vs.
func NewArray(vs ...Value) Value { return Value{Kind: Array, Arr: vs} }

// NewObject returns an object value with the members in the order given.
func NewObject(ms ...Member) Value { return Value{Kind: Object, Obj: ms} }

// Get returns the value of key in an object and whether it is there.
func (v *Value) Get(key string) (*Value, bool) {
	for i := range v.Obj {
		if v.Obj[i].Key == key {
			return &v.Obj[i].Value, true
		}
	}
	return nil, false
}

// canonicalInt normalises a decimal integer literal (optional '-', digits):
// leading zeros dropped and "-0" made "0", as Python's int() does.
func canonicalInt(s string) string {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	if len(s) > 1 && s[0] == '0' || neg {
		s = strings.TrimLeft(s, "0")
		if s == "" {
			return "0"
		}
		if neg {
			return "-" + s
		}
	}
	return s
}
