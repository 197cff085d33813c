package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"
)

// scanner walks JSON text without building values, so that the large parts
// of a tokenizer.json (a vocabulary and merge list of a few hundred thousand
// entries) are read several times faster than encoding/json reads them. The
// small parts are handed to encoding/json as raw text.
type scanner struct {
	data []byte
	pos  int
	buf  []byte // scratch for unescaped strings
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", s.pos, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		if s.pos >= len(s.data) {
			return s.errorf("unexpected end of JSON, want %q", c)
		}
		return s.errorf("want %q, found %q", c, s.data[s.pos])
	}
	s.pos++
	return nil
}

// str reads a string and returns its contents, unescaped. The result may
// alias the input or the scanner's scratch buffer: copy it to keep it.
func (s *scanner) str() ([]byte, error) {
	if err := s.expect('"'); err != nil {
		return nil, err
	}
	start := s.pos
	plain := true
	for {
		if s.pos >= len(s.data) {
			return nil, s.errorf("unterminated string")
		}
		c := s.data[s.pos]
		if c == '"' {
			break
		}
		if c < 0x20 {
			return nil, s.errorf("control character in string")
		}
		if c == '\\' {
			plain = false
			s.pos++
		} else if c >= utf8.RuneSelf {
			plain = false
		}
		s.pos++
	}
	raw := s.data[start:s.pos]
	s.pos++
	if plain || (utf8.Valid(raw) && bytes.IndexByte(raw, '\\') < 0) {
		return raw, nil
	}
	// Escapes or ill-formed UTF-8: let encoding/json decide, as it would.
	var v string
	if err := json.Unmarshal(s.data[start-1:s.pos], &v); err != nil {
		return nil, fmt.Errorf("offset %d: %w", start-1, err)
	}
	s.buf = append(s.buf[:0], v...)
	return s.buf, nil
}

// uint reads a non-negative integer that fits in an int32.
func (s *scanner) uint() (int32, error) {
	s.ws()
	start := s.pos
	var v int64
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		v = v*10 + int64(s.data[s.pos]-'0')
		if v > math.MaxInt32-1 {
			return 0, s.errorf("id out of range")
		}
		s.pos++
	}
	if s.pos == start || (s.pos < len(s.data) && bytes.IndexByte([]byte(".eE"), s.data[s.pos]) >= 0) {
		s.pos = start
		raw, _ := s.skip()
		return 0, s.errorf("want a non-negative integer id, found %s", raw)
	}
	return int32(v), nil
}

// object reads an object, calling field for each key with the scanner at the
// value, which field must consume.
func (s *scanner) object(field func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.errorf("want ',' or '}' in object")
		}
	}
}

// array reads an array, calling elem for each element with the scanner at
// it, which elem must consume.
func (s *scanner) array(elem func(i int) error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.errorf("want ',' or ']' in array")
		}
	}
}

// skip reads past one value and returns its raw text.
func (s *scanner) skip() (json.RawMessage, error) {
	start := s.peekPos()
	var err error
	switch c := s.peek(); c {
	case '{':
		err = s.object(func([]byte) error { _, err := s.skip(); return err })
	case '[':
		err = s.array(func(int) error { _, err := s.skip(); return err })
	case '"':
		_, err = s.str()
	case 0:
		err = s.errorf("unexpected end of JSON")
	default:
		for s.pos < len(s.data) && bytes.IndexByte([]byte(",]}: \t\r\n"), s.data[s.pos]) < 0 {
			s.pos++
		}
		if s.pos == start {
			err = s.errorf("unexpected %q", c)
		}
	}
	if err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

func (s *scanner) peekPos() int {
	s.ws()
	return s.pos
}

// rawObject reads an object whose values are kept as raw text, except those
// named in fast, which are handed to their functions.
func (s *scanner) rawObject(fast map[string]func() error) (map[string]json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	err := s.object(func(key []byte) error {
		if f, ok := fast[string(key)]; ok {
			return f()
		}
		k := string(key)
		raw, err := s.skip()
		if err != nil {
			return err
		}
		fields[k] = raw
		return nil
	})
	return fields, err
}

// unmarshalFields decodes raw fields into v (a struct with json tags) by
// reassembling them as one small object; encoding/json checks the values.
func unmarshalFields(fields map[string]json.RawMessage, v any) error {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for k, raw := range fields {
		if !first {
			b.WriteByte(',')
		}
		first = false
		kj, _ := json.Marshal(k)
		b.Write(kj)
		b.WriteByte(':')
		b.Write(raw)
	}
	b.WriteByte('}')
	return json.Unmarshal(b.Bytes(), v)
}
