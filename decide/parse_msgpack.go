package decide

import (
	"bytes"
	"fmt"

	"strconv"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// parseMsgpackValue decodes one msgpack document into an ordered value tree:
// maps keep their order (keys must be strings, duplicates are an error),
// integers become their digits, float32 is widened to float64. Binary data
// and extension types are refused.
func parseMsgpackValue(data []byte) (Value, error) {
	r := bytes.NewReader(data)
	p := &mpParser{r: r, d: msgpack.NewDecoder(r)}
	v, err := p.value(nil, 0)
	if err != nil {
		return Value{}, err
	}
	if r.Len() > 0 {
		return Value{}, &RequestError{Message: fmt.Sprintf("invalid msgpack: %d bytes after the request", r.Len())}
	}
	return v, nil
}

type mpParser struct {
	r      *bytes.Reader
	d      *msgpack.Decoder
	values int // values read so far
}

func (p *mpParser) fail(path *pathNode, err error) error {
	e := pathError(path, err.Error())
	e.Message = "invalid msgpack: " + e.Message
	return e
}

func (p *mpParser) errorf(path *pathNode, format string, args ...any) error {
	return p.fail(path, fmt.Errorf(format, args...))
}

func (p *mpParser) value(path *pathNode, depth int) (Value, error) {
	if p.values++; p.values > MaxValues {
		return Value{}, pathError(path, fmt.Sprintf("more than %d values in the document (max_values): no model takes that much evidence", MaxValues))
	}
	c, err := p.d.PeekCode()
	if err != nil {
		return Value{}, p.fail(path, err)
	}
	switch {
	case c == msgpcode.Nil:
		if err := p.d.DecodeNil(); err != nil {
			return Value{}, p.fail(path, err)
		}
		return Value{}, nil
	case c == msgpcode.False || c == msgpcode.True:
		b, err := p.d.DecodeBool()
		if err != nil {
			return Value{}, p.fail(path, err)
		}
		return Value{Kind: Bool, Bool: b}, nil
	case c == msgpcode.Uint64:
		u, err := p.d.DecodeUint64()
		if err != nil {
			return Value{}, p.fail(path, err)
		}
		return Value{Kind: Int, Int: strconv.FormatUint(u, 10)}, nil
	case msgpcode.IsFixedNum(c) || c >= msgpcode.Uint8 && c <= msgpcode.Int64:
		i, err := p.d.DecodeInt64()
		if err != nil {
			return Value{}, p.fail(path, err)
		}
		return Value{Kind: Int, Int: strconv.FormatInt(i, 10)}, nil
	case c == msgpcode.Float:
		f, err := p.d.DecodeFloat32()
		if err != nil {
			return Value{}, p.fail(path, err)
		}
		return Value{Kind: Float, Float: float64(f)}, nil
	case c == msgpcode.Double:
		f, err := p.d.DecodeFloat64()
		if err != nil {
			return Value{}, p.fail(path, err)
		}
		return Value{Kind: Float, Float: f}, nil
	case msgpcode.IsString(c):
		s, err := p.str(path)
		return Value{Kind: String, Str: s}, err
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		if depth >= maxDepth {
			return Value{}, p.errorf(path, "nested deeper than %d", maxDepth)
		}
		n, err := p.d.DecodeArrayLen()
		if err != nil {
			return Value{}, p.fail(path, err)
		}
		if n > p.r.Len() {
			return Value{}, p.errorf(path, "array of %d items in %d bytes", n, p.r.Len())
		}
		v := Value{Kind: Array, Arr: make([]Value, 0, min(n, MaxValues-p.values+1))}
		for i := 0; i < n; i++ {
			x, err := p.value(indexPath(path, i), depth+1)
			if err != nil {
				return Value{}, err
			}
			v.Arr = append(v.Arr, x)
		}
		return v, nil
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		if depth >= maxDepth {
			return Value{}, p.errorf(path, "nested deeper than %d", maxDepth)
		}
		n, err := p.d.DecodeMapLen()
		if err != nil {
			return Value{}, p.fail(path, err)
		}
		if 2*n > p.r.Len() {
			return Value{}, p.errorf(path, "map of %d entries in %d bytes", n, p.r.Len())
		}
		v := Value{Kind: Object, Obj: make([]Member, 0, min(n, MaxValues-p.values+1))}
		seen := make(map[string]bool, min(n, MaxValues-p.values+1))
		for i := 0; i < n; i++ {
			kc, err := p.d.PeekCode()
			if err != nil {
				return Value{}, p.fail(path, err)
			}
			if !msgpcode.IsString(kc) {
				return Value{}, pathError(path, fmt.Sprintf("map key %d is not a string", i))
			}
			key, err := p.str(path)
			if err != nil {
				return Value{}, err
			}
			if seen[key] {
				return Value{}, pathError(path, fmt.Sprintf("duplicate key %q", key))
			}
			seen[key] = true
			x, err := p.value(joinPath(path, key), depth+1)
			if err != nil {
				return Value{}, err
			}
			v.Obj = append(v.Obj, Member{Key: key, Value: x})
		}
		return v, nil
	case msgpcode.IsBin(c):
		return Value{}, pathError(path, "binary data is not a JSON value")
	case msgpcode.IsExt(c):
		return Value{}, pathError(path, "a msgpack extension type is not a JSON value")
	default:
		return Value{}, p.errorf(path, "unknown msgpack code %#x", c)
	}
}

func (p *mpParser) str(path *pathNode) (string, error) {
	s, err := p.d.DecodeString()
	if err != nil {
		return "", p.fail(path, err)
	}
	if !validUTF8(s) {
		return "", pathError(path, "string is not valid UTF-8")
	}
	return s, nil
}
