package decide

import (
	"math"
	"strconv"
	"strings"
)

// Kind is the kind of a [Value].
type Kind uint8

// The kinds of JSON value a request may hold.
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

// String names the kind as the error messages do.
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

// NullValue returns the null value.
func NullValue() Value { return Value{} }

// BoolValue returns a bool value.
func BoolValue(b bool) Value { return Value{Kind: Bool, Bool: b} }

// IntValue returns an integer value.
func IntValue(i int64) Value { return Value{Kind: Int, Int: strconv.FormatInt(i, 10)} }

// FloatValue returns a float value.
func FloatValue(f float64) Value { return Value{Kind: Float, Float: f} }

// StringValue returns a string value.
func StringValue(s string) Value { return Value{Kind: String, Str: s} }

// ArrayValue returns an array value holding vs.
func ArrayValue(vs ...Value) Value { return Value{Kind: Array, Arr: vs} }

// ObjectValue returns an object value with the members in the order given.
func ObjectValue(ms ...Member) Value { return Value{Kind: Object, Obj: ms} }

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
	s = strings.TrimLeft(s, "0")
	if s == "" {
		return "0"
	}
	if neg {
		return "-" + s
	}
	return s
}

// checkFinite returns the path of the first non-finite float in v, or nil.
func checkFinite(v *Value, path *pathNode) *pathNode {
	switch v.Kind {
	case Float:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			return path
		}
	case Array:
		for i := range v.Arr {
			if p := checkFinite(&v.Arr[i], indexPath(path, i)); p != nil {
				return p
			}
		}
	case Object:
		for i := range v.Obj {
			if p := checkFinite(&v.Obj[i].Value, joinPath(path, v.Obj[i].Key)); p != nil {
				return p
			}
		}
	}
	return nil
}
