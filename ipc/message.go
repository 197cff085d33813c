package ipc

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/startlux/startlux/api"
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
	// PeerUID is the user id of the process on the other end of the socket.
	PeerUID int
}

// parseRequest decodes a frame body into a request. On failure it returns a
// protocol error (bad_frame when the body is not one msgpack map, bad_request
// when the map's fields are wrong) and, when the id could be read, hasID so
// the error response can carry it.
func parseRequest(body []byte) (req Request, hasID bool, perr *api.Error) {
	s := scanner{b: body}
	t, err := s.next()
	if err != nil {
		return req, false, api.Errorf(api.CodeBadFrame, "frame body is not msgpack: %v", err)
	}
	if t.kind != kMap {
		return req, false, api.Errorf(api.CodeBadFrame, "frame body is a msgpack %s, want a map", t.kind)
	}
	var badField *api.Error
	hasMethod := false
	for i := 0; i < t.n; i++ {
		k, err := s.next()
		if err != nil {
			return req, hasID, api.Errorf(api.CodeBadFrame, "frame body: key %d: %v", i, err)
		}
		start := s.pos
		if err := s.skip(1); err != nil {
			return req, hasID, api.Errorf(api.CodeBadFrame, "frame body: value of key %d: %v", i, err)
		}
		val := body[start:s.pos]
		if k.kind != kStr {
			if badField == nil {
				badField = api.Errorf(api.CodeBadRequest, "request map key %d is a %s, want a string", i, k.kind)
			}
			continue
		}
		switch key := string(k.data); key {
		case "id":
			vs := scanner{b: val}
			v, _ := vs.next()
			switch {
			case v.kind == kUint:
				req.ID, hasID = v.u, true
			case v.kind == kInt && v.i >= 0:
				req.ID, hasID = uint64(v.i), true
			case badField == nil:
				badField = api.Errorf(api.CodeBadRequest, "request id is a %s, want a non-negative integer", v.kind)
			}
		case "method":
			vs := scanner{b: val}
			v, _ := vs.next()
			if v.kind == kStr {
				req.Method, hasMethod = string(v.data), true
			} else if badField == nil {
				badField = api.Errorf(api.CodeBadRequest, "request method is a %s, want a string", v.kind)
			}
		case "params":
			if len(val) == 1 && val[0] == 0xc0 {
				req.Params = nil
			} else {
				req.Params = msgpack.RawMessage(bytes.Clone(val))
			}
		default:
			// Unknown keys are ignored so that later clients may add some.
		}
	}
	if s.pos != len(body) {
		return req, hasID, api.Errorf(api.CodeBadFrame, "frame body has %d bytes after the request map", len(body)-s.pos)
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
	b = appendMapLen(b, n)
	b = appendUint(appendStr(b, "id"), id)
	b = appendStr(appendStr(b, "method"), method)
	if params != nil {
		b = append(appendStr(b, "params"), params...)
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
	b = appendMapLen(b, 2)
	b = appendStr(b, "id")
	if hasID {
		b = appendUint(b, id)
	} else {
		b = append(b, 0xc0)
	}
	if perr != nil {
		b = appendStr(b, "error")
		b = appendMapLen(b, 2)
		b = appendStr(appendStr(b, "code"), string(perr.Code))
		b = appendStr(appendStr(b, "message"), perr.Message)
		return b
	}
	b = appendStr(b, "result")
	if result == nil {
		return append(b, 0xc0)
	}
	return append(b, result...)
}

// parseResponse decodes a response frame body.
func parseResponse(body []byte) (response, error) {
	var r response
	s := scanner{b: body}
	t, err := s.next()
	if err != nil {
		return r, fmt.Errorf("response is not msgpack: %w", err)
	}
	if t.kind != kMap {
		return r, fmt.Errorf("response is a msgpack %s, want a map", t.kind)
	}
	hasResult := false
	for i := 0; i < t.n; i++ {
		k, err := s.next()
		if err != nil {
			return r, fmt.Errorf("response key %d: %w", i, err)
		}
		start := s.pos
		if err := s.skip(1); err != nil {
			return r, fmt.Errorf("response value %d: %w", i, err)
		}
		val := body[start:s.pos]
		if k.kind != kStr {
			continue
		}
		switch string(k.data) {
		case "id":
			vs := scanner{b: val}
			v, _ := vs.next()
			switch {
			case v.kind == kUint:
				r.id, r.hasID = v.u, true
			case v.kind == kInt && v.i >= 0:
				r.id, r.hasID = uint64(v.i), true
			case v.kind == kNil:
			default:
				return r, fmt.Errorf("response id is a %s, want an integer or nil", v.kind)
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
	if s.pos != len(body) {
		return r, fmt.Errorf("response has %d bytes after its map", len(body)-s.pos)
	}
	if r.err == nil && !hasResult {
		return r, fmt.Errorf("response has neither result nor error")
	}
	return r, nil
}

// parseErrorMap decodes {code, message}.
func parseErrorMap(val []byte) (*api.Error, error) {
	s := scanner{b: val}
	t, _ := s.next()
	if t.kind == kNil {
		return nil, nil
	}
	if t.kind != kMap {
		return nil, fmt.Errorf("response error is a %s, want a map", t.kind)
	}
	e := &api.Error{}
	for i := 0; i < t.n; i++ {
		k, _ := s.next()
		v, err := s.next()
		if err != nil {
			return nil, fmt.Errorf("response error: %w", err)
		}
		if v.kind == kArray || v.kind == kMap {
			return nil, fmt.Errorf("response error field %q is a %s, want a string", k.data, v.kind)
		}
		if k.kind == kStr && v.kind == kStr {
			switch string(k.data) {
			case "code":
				e.Code = api.Code(v.data)
			case "message":
				e.Message = string(v.data)
			}
		}
	}
	if e.Code == "" {
		return nil, fmt.Errorf("response error has no code")
	}
	return e, nil
}
