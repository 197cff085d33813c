package decide

import (
	"unicode/utf8"

	"github.com/startlux/startlux/value"
)

// RenderJSON renders v as Python's json.dumps(v, ensure_ascii=False) does,
// with object keys in their order: separators ", " and ": ", strings escaped
// only where JSON requires, integers with every digit and floats in Python's
// repr form. It fails on a non-finite float.
func RenderJSON(v *value.Value) (string, error) {
	if p := checkFinite(v, joinPath(nil, "evidence")); p != nil {
		return "", pathError(p, "non-finite number")
	}
	b, err := value.AppendJSON(nil, v, value.Spaced)
	return string(b), err
}

// validUTF8 reports whether s is valid UTF-8 (surrogate code points are not).
func validUTF8(s string) bool { return utf8.ValidString(s) }
