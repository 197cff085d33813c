package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

// FromJSON converts one JSON value to msgpack, keeping the order of object
// keys (and any duplicate keys, so the receiver can reject them) exactly as
// written. Integers (numbers without '.', 'e' or 'E') become msgpack
// integers, and other numbers float64. An integer beyond 64 bits is refused:
// msgpack has no larger integers, and as a float64 it would render with other
// digits than the same request decided in-process. Nesting deeper than 128
// levels is refused.
func FromJSON(data []byte) (msgpack.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	out, err := jsonValue(dec, nil, 0)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("invalid JSON (byte %d): %w", dec.InputOffset(), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("invalid JSON (byte %d): more than one JSON value", dec.InputOffset())
	}
	return msgpack.RawMessage(out), nil
}

// jsonValue appends the next JSON value of dec to b.
func jsonValue(dec *json.Decoder, b []byte, depth int) ([]byte, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return append(b, 0xc0), nil
	case bool:
		if t {
			return append(b, 0xc3), nil
		}
		return append(b, 0xc2), nil
	case string:
		return appendStr(b, t), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return appendInt(b, i), nil
		}
		if u, err := strconv.ParseUint(string(t), 10, 64); err == nil {
			return appendUint(b, u), nil
		}
		if !strings.ContainsAny(string(t), ".eE") {
			return nil, fmt.Errorf("integer %s: beyond the 64 bits msgpack can carry (send it as a string)", t)
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", t, err)
		}
		return appendFloat(b, f), nil
	case json.Delim:
		if depth >= maxDepth {
			return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
		}
		var body []byte
		n := 0
		for dec.More() {
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				body = appendStr(body, k.(string))
			}
			if body, err = jsonValue(dec, body, depth+1); err != nil {
				return nil, err
			}
			n++
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		if t == '{' {
			b = appendMapLen(b, n)
		} else {
			b = appendArrayLen(b, n)
		}
		return append(b, body...), nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// ToJSON converts one msgpack value to compact JSON, keeping map key order.
// Map keys must be strings; binary data, extensions and non-finite floats
// have no JSON form and are refused.
func ToJSON(value []byte) ([]byte, error) {
	s := scanner{b: value}
	out, err := s.json(nil, 0)
	if err != nil {
		return nil, fmt.Errorf("msgpack to json: %w", err)
	}
	if s.pos != len(value) {
		return nil, fmt.Errorf("msgpack to json: %d bytes after the value", len(value)-s.pos)
	}
	return out, nil
}

// json appends the next value as JSON.
func (s *scanner) json(b []byte, depth int) ([]byte, error) {
	t, err := s.next()
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case kNil:
		return append(b, "null"...), nil
	case kBool:
		return strconv.AppendBool(b, t.b), nil
	case kInt:
		return strconv.AppendInt(b, t.i, 10), nil
	case kUint:
		return strconv.AppendUint(b, t.u, 10), nil
	case kFloat:
		if math.IsNaN(t.f) || math.IsInf(t.f, 0) {
			return nil, fmt.Errorf("float %v has no JSON form", t.f)
		}
		return strconv.AppendFloat(b, t.f, 'g', -1, 64), nil
	case kStr:
		return appendJSONString(b, t.data), nil
	case kArray, kMap:
		if depth >= maxDepth {
			return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
		}
		open, close := byte('['), byte(']')
		if t.kind == kMap {
			open, close = '{', '}'
		}
		b = append(b, open)
		for i := 0; i < t.n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			if t.kind == kMap {
				k, err := s.next()
				if err != nil {
					return nil, err
				}
				if k.kind != kStr {
					return nil, fmt.Errorf("map key is a %s; JSON keys are strings", k.kind)
				}
				b = append(appendJSONString(b, k.data), ':')
			}
			if b, err = s.json(b, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, close), nil
	}
	return nil, fmt.Errorf("a msgpack %s has no JSON form", t.kind)
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendJSONString(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			switch r {
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
			}
		case r == utf8.RuneError && size == 1:
			b = append(b, "\ufffd"...)
		default:
			b = append(b, s[:size]...)
		}
		s = s[size:]
	}
	return append(b, '"')
}
