package value

// The methods of this file let a Value stand inside values that other
// encoders write and read (encoding/json, and the msgpack library of
// package ipc, which calls MarshalMsgpack and UnmarshalMsgpack by their
// names) with its key order kept.

// MarshalJSON writes v as compact JSON ([AppendJSON]).
func (v Value) MarshalJSON() ([]byte, error) { return AppendJSON(nil, &v, Compact) }

// UnmarshalJSON reads v from JSON ([ParseJSON]).
func (v *Value) UnmarshalJSON(data []byte) error {
	x, err := ParseJSON(data)
	if err != nil {
		return err
	}
	*v = x
	return nil
}

// MarshalMsgpack writes v as msgpack ([AppendMsgpack]).
func (v Value) MarshalMsgpack() ([]byte, error) { return AppendMsgpack(nil, &v) }

// UnmarshalMsgpack reads v from msgpack ([ParseMsgpack]).
func (v *Value) UnmarshalMsgpack(data []byte) error {
	x, err := ParseMsgpack(data)
	if err != nil {
		return err
	}
	*v = x
	return nil
}
