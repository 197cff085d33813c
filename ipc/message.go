package ipc

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/value"
)

// Request is one call as the server's [Handler] sees it.
type Request struct {
	// ID is the client's request id; the response carries it back.
	ID uint64
	// Method names what is asked ("decide", "status", ...).
	Method string
	// Params is the method's argument as one encoded msgpack value (nil
	// when the request had none). It is checked to be well formed.
	Params msgpack.RawMessage
	// Value is Params decoded into an order-preserving value tree, once,
	// as the frame was read (null when there are none): what a decision
	// request is read from.
	Value value.Value
	// ValueErr, when not nil, says why Params, well-formed msgpack, are no
	// value tree (a duplicate key, a map key that is not a string, binary
	// data, invalid UTF-8, more than [value.MaxValues] values); Value is
	// then null. A handler that decodes Params into a struct may ignore it.
	ValueErr error
	// PeerUID is the user id of the process on the other end of the socket.
	PeerUID int
}

// parseRequest decodes a frame body into a request. On failure it returns a
// protocol error (bad_frame when the body is not one msgpack map, bad_request
// when the map's fields are wrong) and, when the id could be read, hasID so
// the error response can carry it.
func parseRequest(body []byte) (req Request, hasID bool, perr *api.Error) {
	s := value.NewScanner(body)
	t, err := s.Next()
	if err != nil {
		return req, false, api.Errorf(api.CodeBadFrame, "frame body is not msgpack: %v", err)
	}
	if t.Type != value.TypeMap {
		return req, false, api.Errorf(api.CodeBadFrame, "frame body is a msgpack %s, want a map", t.Type)
	}
	var badField *api.Error
	hasMethod := false
	for i := 0; i < t.Len; i++ {
		k, err := s.Next()
		if err != nil {
			return req, hasID, api.Errorf(api.CodeBadFrame, "frame body: key %d: %v", i, err)
		}
		start := s.Pos()
		if k.Type == value.TypeStr && string(k.Data) == "params" {
			// The params are read once, into their tree; a well-formed
			// value that is no tree is the handler's to refuse.
			v, err := s.Decode()
			var ve *value.Error
			if err != nil && (!errors.As(err, &ve) || ve.Malformed) {
				return req, hasID, api.Errorf(api.CodeBadFrame, "frame body: value of key %d: %v", i, err)
			}
			req.Value, req.ValueErr = v, err
			if val := body[start:s.Pos()]; len(val) == 1 && val[0] == 0xc0 {
				req.Params = nil
			} else {
				req.Params = msgpack.RawMessage(bytes.Clone(val))
			}
			continue
		}
		if err := s.Skip(); err != nil {
			return req, hasID, api.Errorf(api.CodeBadFrame, "frame body: value of key %d: %v", i, err)
		}
		val := body[start:s.Pos()]
		if k.Type != value.TypeStr {
			if badField == nil {
				badField = api.Errorf(api.CodeBadRequest, "request map key %d is a %s, want a string", i, k.Type)
			}
			continue
		}
		switch key := string(k.Data); key {
		case "id":
			v, _ := value.NewScanner(val).Next()
			switch {
			case v.Type == value.TypeUint:
				req.ID, hasID = v.Uint, true
			case v.Type == value.TypeInt && v.Int >= 0:
				req.ID, hasID = uint64(v.Int), true
			case badField == nil:
				badField = api.Errorf(api.CodeBadRequest, "request id is a %s, want a non-negative integer", v.Type)
			}
		case "method":
			v, _ := value.NewScanner(val).Next()
			if v.Type == value.TypeStr {
				req.Method, hasMethod = string(v.Data), true
			} else if badField == nil {
				badField = api.Errorf(api.CodeBadRequest, "request method is a %s, want a string", v.Type)
			}
		default:
			// Unknown keys are ignored so that later clients may add some.
		}
	}
	if s.Pos() != len(body) {
		return req, hasID, api.Errorf(api.CodeBadFrame, "frame body has %d bytes after the request map", len(body)-s.Pos())
	}
	if badField != nil {
		return req, hasID, badField
	}
	if !hasID {
		return req, false, api.Errorf(api.CodeBadRequest, "request has no id")
	}
	if !hasMethod {
		return req, true, api.Errorf(api.CodeBadRequest, "request %d has no method", req.ID)
	}
	return req, true, nil
}

// appendRequest encodes a request map; params must be one well-formed value
// or nil.
func appendRequest(b []byte, id uint64, method string, params msgpack.RawMessage) []byte {
	n := 2
	if params != nil {
		n = 3
	}
	b = value.AppendMapHeader(b, n)
	b = value.AppendUint(value.AppendString(b, "id"), id)
	b = value.AppendString(value.AppendString(b, "method"), method)
	if params != nil {
		b = append(value.AppendString(b, "params"), params...)
	}
	return b
}

// response is one decoded response map.
type response struct {
	id     uint64
	hasID  bool
	result msgpack.RawMessage
	err    *api.Error
}

// appendResponse encodes a response: {id, result} or {id, error}. The id is
// nil when hasID is false (the request's id could not be read).
func appendResponse(b []byte, id uint64, hasID bool, result msgpack.RawMessage, perr *api.Error) []byte {
	b = value.AppendMapHeader(b, 2)
	b = value.AppendString(b, "id")
	if hasID {
		b = value.AppendUint(b, id)
	} else {
		b = append(b, 0xc0)
	}
	if perr != nil {
		b = value.AppendString(b, "error")
		b = value.AppendMapHeader(b, 2)
		b = value.AppendString(value.AppendString(b, "code"), string(perr.Code))
		b = value.AppendString(value.AppendString(b, "message"), perr.Message)
		return b
	}
	b = value.AppendString(b, "result")
	if result == nil {
		return append(b, 0xc0)
	}
	return append(b, result...)
}

// parseResponse decodes a response frame body.
func parseResponse(body []byte) (response, error) {
	var r response
	s := value.NewScanner(body)
	t, err := s.Next()
	if err != nil {
		return r, fmt.Errorf("response is not msgpack: %w", err)
	}
	if t.Type != value.TypeMap {
		return r, fmt.Errorf("response is a msgpack %s, want a map", t.Type)
	}
	hasResult := false
	for i := 0; i < t.Len; i++ {
		k, err := s.Next()
		if err != nil {
			return r, fmt.Errorf("response key %d: %w", i, err)
		}
		start := s.Pos()
		if err := s.Skip(); err != nil {
			return r, fmt.Errorf("response value %d: %w", i, err)
		}
		val := body[start:s.Pos()]
		if k.Type != value.TypeStr {
			continue
		}
		switch string(k.Data) {
		case "id":
			vs := value.NewScanner(val)
			v, _ := vs.Next()
			switch {
			case v.Type == value.TypeUint:
				r.id, r.hasID = v.Uint, true
			case v.Type == value.TypeInt && v.Int >= 0:
				r.id, r.hasID = uint64(v.Int), true
			case v.Type == value.TypeNil:
			default:
				return r, fmt.Errorf("response id is a %s, want an integer or nil", v.Type)
			}
		case "result":
			r.result, hasResult = msgpack.RawMessage(bytes.Clone(val)), true
		case "error":
			e, err := parseErrorMap(val)
			if err != nil {
				return r, err
			}
			r.err = e
		}
	}
	if s.Pos() != len(body) {
		return r, fmt.Errorf("response has %d bytes after its map", len(body)-s.Pos())
	}
	if r.err == nil && !hasResult {
		return r, fmt.Errorf("response has neither result nor error")
	}
	return r, nil
}

// parseErrorMap decodes {code, message}.
func parseErrorMap(val []byte) (*api.Error, error) {
	s := value.NewScanner(val)
	t, _ := s.Next()
	if t.Type == value.TypeNil {
		return nil, nil
	}
	if t.Type != value.TypeMap {
		return nil, fmt.Errorf("response error is a %s, want a map", t.Type)
	}
	e := &api.Error{}
	for i := 0; i < t.Len; i++ {
		k, _ := s.Next()
		v, err := s.Next()
		if err != nil {
			return nil, fmt.Errorf("response error: %w", err)
		}
		if v.Type == value.TypeArray || v.Type == value.TypeMap {
			return nil, fmt.Errorf("response error field %q is a %s, want a string", k.Data, v.Type)
		}
		if k.Type == value.TypeStr && v.Type == value.TypeStr {
			switch string(k.Data) {
			case "code":
				e.Code = api.Code(v.Data)
			case "message":
				e.Message = string(v.Data)
			}
		}
	}
	if e.Code == "" {
		return nil, fmt.Errorf("response error has no code")
	}
	return e, nil
}
