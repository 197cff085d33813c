package value

import (
	"strconv"
	"strings"
)

// Error is a problem with a document: where it is and what it is.
type Error struct {
	// Path leads from the document's root to the value at fault (empty:
	// the document itself).
	Path Path
	// Message says what is wrong: `invalid JSON: expected ':' after key
	// "a" (byte 12)`, `duplicate key "k"`.
	Message string
	// Malformed is set when the bytes are not JSON or msgpack at all
	// (a syntax error, a truncated value, nesting deeper than [MaxDepth]),
	// as opposed to a well-formed document that is no value tree (a
	// duplicate key, binary data, too many values).
	Malformed bool
}

// Error renders the path and the message.
func (e *Error) Error() string {
	if len(e.Path) == 0 {
		return e.Message
	}
	return e.Path.String() + ": " + e.Message
}

// Path is a way from a document's root to one of its values.
type Path []Step

// Step is one step of a [Path]: into the member Key of an object, or, when
// Index is at least 0, into an array's element Index.
type Step struct {
	Key   string
	Index int
}

// String writes the path as name.key[3]["odd key"].
func (p Path) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.Index >= 0:
			b.WriteString("[" + strconv.Itoa(s.Index) + "]")
		case isPlainKey(s.Key):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Key)
		default:
			b.WriteString("[" + strconv.Quote(s.Key) + "]")
		}
	}
	return b.String()
}

// isPlainKey reports whether k can be written in a path without quotes.
func isPlainKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// reader is what the JSON and msgpack readers share: the count of values
// against [MaxValues], the path to the value being read (kept as a stack,
// so that reading allocates no path unless it fails) and the check for
// duplicate keys.
type reader struct {
	values int
	path   Path
}

// fail returns an error about the value being read.
func (r *reader) fail(malformed bool, msg string) *Error {
	return &Error{Path: append(Path(nil), r.path...), Message: msg, Malformed: malformed}
}

// count counts one more value.
func (r *reader) count() *Error {
	if r.values++; r.values > MaxValues {
		return r.fail(false, "more than "+strconv.Itoa(MaxValues)+" values in the document (max_values): no model takes that much evidence")
	}
	return nil
}

// enterKey and enterIndex step into a member or element; leave steps out.
func (r *reader) enterKey(k string) { r.path = append(r.path, Step{Key: k, Index: -1}) }
func (r *reader) enterIndex(i int)  { r.path = append(r.path, Step{Index: i}) }
func (r *reader) leave()            { r.path = r.path[:len(r.path)-1] }

// dupFrom is the member count from which an object's duplicate keys are
// found through a set rather than by comparing with every key before.
const dupFrom = 16

// key checks, before its value is read, that k is not a key of obj yet
// (seen is obj's key set once it has dupFrom keys, nil before) and returns
// the set to use from now on. The error is reported against the object.
func (r *reader) key(obj []Member, seen map[string]struct{}, k string) (map[string]struct{}, *Error) {
	if seen == nil {
		for i := range obj {
			if obj[i].Key == k {
				return nil, r.fail(false, "duplicate key "+strconv.Quote(k))
			}
		}
		if len(obj)+1 < dupFrom {
			return nil, nil
		}
		seen = make(map[string]struct{}, 2*dupFrom)
		for i := range obj {
			seen[obj[i].Key] = struct{}{}
		}
	} else if _, dup := seen[k]; dup {
		return seen, r.fail(false, "duplicate key "+strconv.Quote(k))
	}
	seen[k] = struct{}{}
	return seen, nil
}
