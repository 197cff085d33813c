package decide

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

var (
	_ msgpack.CustomEncoder = (*Value)(nil)
	_ msgpack.CustomEncoder = (*Request)(nil)
)

// MarshalJSON renders v as format.md's render_json does (it fails on a
// non-finite float).
func (v Value) MarshalJSON() ([]byte, error) {
	if p := checkFinite(&v, nil); p != nil {
		return nil, fmt.Errorf("decide: cannot encode a non-finite number as JSON")
	}
	var b strings.Builder
	renderValue(&b, &v)
	return []byte(b.String()), nil
}

// EncodeMsgpack writes v as msgpack with object keys in order. Integers
// beyond 64 bits have no msgpack form and are an error.
func (v *Value) EncodeMsgpack(enc *msgpack.Encoder) error {
	switch v.Kind {
	case Null:
		return enc.EncodeNil()
	case Bool:
		return enc.EncodeBool(v.Bool)
	case Int:
		if i, err := strconv.ParseInt(v.Int, 10, 64); err == nil {
			return enc.EncodeInt(i)
		}
		if u, err := strconv.ParseUint(v.Int, 10, 64); err == nil {
			return enc.EncodeUint(u)
		}
		return fmt.Errorf("decide: integer %s does not fit msgpack's 64 bits", v.Int)
	case Float:
		return enc.EncodeFloat64(v.Float)
	case String:
		return enc.EncodeString(v.Str)
	case Array:
		if err := enc.EncodeArrayLen(len(v.Arr)); err != nil {
			return err
		}
		for i := range v.Arr {
			if err := v.Arr[i].EncodeMsgpack(enc); err != nil {
				return err
			}
		}
		return nil
	case Object:
		if err := enc.EncodeMapLen(len(v.Obj)); err != nil {
			return err
		}
		for i := range v.Obj {
			if err := enc.EncodeString(v.Obj[i].Key); err != nil {
				return err
			}
			if err := v.Obj[i].Value.EncodeMsgpack(enc); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("decide: unknown value kind %d", v.Kind)
}

// toValue returns the request as a value tree, the form it travels in.
func (r *Request) toValue() Value {
	qs := Value{Kind: Object, Obj: make([]Member, len(r.Questions))}
	for i, q := range r.Questions {
		o := Value{Kind: Object, Obj: []Member{
			{"type", StringValue(string(q.Type))},
			{"instructions", StringValue(q.Instructions)},
		}}
		if q.Criteria.Kind != Null {
			o.Obj = append(o.Obj, Member{"criteria", q.Criteria})
		}
		if q.Permute != nil {
			o.Obj = append(o.Obj, Member{"permute", Value{Kind: Bool, Bool: *q.Permute}})
		}
		qs.Obj[i] = Member{q.Name, o}
	}
	v := ObjectValue(Member{"evidence", r.Evidence}, Member{"questions", qs})
	if r.Permute {
		v.Obj = append(v.Obj, Member{"permute", Value{Kind: Bool, Bool: true}})
	}
	return v
}

// MarshalJSON writes the request as JSON with every key order kept.
func (r *Request) MarshalJSON() ([]byte, error) { return r.toValue().MarshalJSON() }

// EncodeMsgpack writes the request as msgpack with every key order kept.
func (r *Request) EncodeMsgpack(enc *msgpack.Encoder) error {
	v := r.toValue()
	return v.EncodeMsgpack(enc)
}
