package api

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// This file encodes the ordered maps of the protocol ([Questions],
// [Choices], [Answers]): slices of named elements that travel as maps,
// in their order.

var (
	_ json.Marshaler        = Answers(nil)
	_ json.Unmarshaler      = (*Answers)(nil)
	_ msgpack.CustomEncoder = Answers(nil)
	_ msgpack.CustomDecoder = (*Answers)(nil)
	_ json.Marshaler        = Questions(nil)
	_ json.Unmarshaler      = (*Questions)(nil)
	_ msgpack.CustomEncoder = Questions(nil)
	_ msgpack.CustomDecoder = (*Questions)(nil)
	_ json.Marshaler        = Choices(nil)
	_ json.Unmarshaler      = (*Choices)(nil)
	_ msgpack.CustomEncoder = Choices(nil)
	_ msgpack.CustomDecoder = (*Choices)(nil)
)

// MarshalJSON writes the answers as an object keyed by question name, in order.
func (as Answers) MarshalJSON() ([]byte, error) {
	return marshalOrdered(len(as), func(i int) (string, any) { return as[i].Name, &as[i] })
}

// UnmarshalJSON reads an object of answers keeping its order.
func (as *Answers) UnmarshalJSON(data []byte) error {
	return unmarshalOrdered(data, "answers", (*[]Answer)(as), namedAnswer)
}

// EncodeMsgpack writes the answers as a map keyed by question name, in order.
func (as Answers) EncodeMsgpack(enc *msgpack.Encoder) error {
	return encodeOrdered(enc, len(as), func(i int) (string, any) { return as[i].Name, &as[i] })
}

// DecodeMsgpack reads a map of answers keeping its order.
func (as *Answers) DecodeMsgpack(dec *msgpack.Decoder) error {
	return decodeOrdered(dec, (*[]Answer)(as), namedAnswer)
}

func namedAnswer(name string, a Answer) Answer { a.Name = name; return a }

// MarshalJSON writes the questions as an object keyed by name, in order.
func (qs Questions) MarshalJSON() ([]byte, error) {
	return marshalOrdered(len(qs), func(i int) (string, any) { return qs[i].Name, &qs[i] })
}

// UnmarshalJSON reads an object of questions keeping its order.
func (qs *Questions) UnmarshalJSON(data []byte) error {
	return unmarshalOrdered(data, "questions", (*[]Question)(qs), namedQuestion)
}

// EncodeMsgpack writes the questions as a map keyed by name, in order.
func (qs Questions) EncodeMsgpack(enc *msgpack.Encoder) error {
	return encodeOrdered(enc, len(qs), func(i int) (string, any) { return qs[i].Name, &qs[i] })
}

// DecodeMsgpack reads a map of questions keeping its order.
func (qs *Questions) DecodeMsgpack(dec *msgpack.Decoder) error {
	return decodeOrdered(dec, (*[]Question)(qs), namedQuestion)
}

func namedQuestion(name string, q Question) Question { q.Name = name; return q }

// MarshalJSON writes the choices as an object {id: label}, in order.
func (cs Choices) MarshalJSON() ([]byte, error) {
	return marshalOrdered(len(cs), func(i int) (string, any) { return cs[i].ID, cs[i].Label })
}

// UnmarshalJSON reads an object {id: label} keeping its order.
func (cs *Choices) UnmarshalJSON(data []byte) error {
	return unmarshalOrdered(data, "choices", (*[]Choice)(cs), labelled)
}

// EncodeMsgpack writes the choices as a map {id: label}, in order.
func (cs Choices) EncodeMsgpack(enc *msgpack.Encoder) error {
	return encodeOrdered(enc, len(cs), func(i int) (string, any) { return cs[i].ID, cs[i].Label })
}

// DecodeMsgpack reads a map {id: label} keeping its order.
func (cs *Choices) DecodeMsgpack(dec *msgpack.Decoder) error {
	return decodeOrdered(dec, (*[]Choice)(cs), labelled)
}

func labelled(id, label string) Choice { return Choice{ID: id, Label: label} }

// marshalOrdered writes n members as a JSON object; member(i) gives the
// key and value of the i-th.
func marshalOrdered(n int, member func(i int) (string, any)) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		key, val := member(i)
		k, err := json.Marshal(key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(val)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// unmarshalOrdered reads a JSON object into *list, one element a member in
// order: elem makes it of the member's key and its value decoded as a V.
// what names the list in errors.
func unmarshalOrdered[T, V any](data []byte, what string, list *[]T, elem func(string, V) T) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("api: %s must be an object", what)
	}
	*list = (*list)[:0]
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var x V
		if err := dec.Decode(&x); err != nil {
			return err
		}
		*list = append(*list, elem(t.(string), x))
	}
	_, err := dec.Token()
	return err
}

// encodeOrdered writes n members as a msgpack map.
func encodeOrdered(enc *msgpack.Encoder, n int, member func(i int) (string, any)) error {
	if err := enc.EncodeMapLen(n); err != nil {
		return err
	}
	for i := range n {
		key, val := member(i)
		if err := enc.EncodeString(key); err != nil {
			return err
		}
		if err := enc.Encode(val); err != nil {
			return err
		}
	}
	return nil
}

// decodeOrdered reads a msgpack map into *list as [unmarshalOrdered] does
// a JSON object (nil reads as an empty list).
func decodeOrdered[T, V any](dec *msgpack.Decoder, list *[]T, elem func(string, V) T) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	*list = make([]T, 0, min(max(n, 0), 1024)) // grows past 1024 as members arrive
	for range n {
		key, err := dec.DecodeString()
		if err != nil {
			return err
		}
		var x V
		if err := dec.Decode(&x); err != nil {
			return err
		}
		*list = append(*list, elem(key, x))
	}
	return nil
}
