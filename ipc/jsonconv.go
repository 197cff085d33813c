package ipc

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/startlux/startlux/value"
)

// FromJSON converts one JSON value to msgpack, keeping the order of object
// keys exactly as written: [value.ParseJSON], then [value.AppendMsgpack],
// under the limits of package value. Integers (numbers without '.', 'e' or
// 'E') become msgpack integers, and other numbers float64. An integer
// beyond 64 bits is refused: msgpack has no larger integers, and as a
// float64 it would render with other digits than the same request decided
// in-process. A duplicate key is refused, as the daemon would refuse it.
func FromJSON(data []byte) (msgpack.RawMessage, error) {
	v, err := value.ParseJSON(data)
	if err != nil {
		return nil, err
	}
	b, err := value.AppendMsgpack(nil, &v)
	if err != nil {
		return nil, fmt.Errorf("json to msgpack: %w", err)
	}
	return msgpack.RawMessage(b), nil
}

// ToJSON converts one msgpack value to compact JSON, keeping map key order:
// [value.ParseMsgpack], then [value.AppendJSON]. Map keys must be strings;
// binary data, extensions, invalid UTF-8 and non-finite floats have no
// JSON form and are refused.
func ToJSON(b []byte) ([]byte, error) {
	v, err := value.ParseMsgpack(b)
	if err != nil {
		return nil, fmt.Errorf("msgpack to json: %w", err)
	}
	js, err := value.AppendJSON(nil, &v, value.Compact)
	if err != nil {
		return nil, fmt.Errorf("msgpack to json: %w", err)
	}
	return js, nil
}
