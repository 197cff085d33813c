package ipc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/value"
)

// mp encodes v with the library, as an independent encoder would.
func mp(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// orderedMap encodes key/value pairs in the given order.
func orderedMap(t testing.TB, kv ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeMapLen(len(kv) / 2); err != nil {
		t.Fatal(err)
	}
	for _, x := range kv {
		if err := enc.Encode(x); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestParseRequest(t *testing.T) {
	params := mp(t, map[string]any{"evidence": "x"})
	cases := []struct {
		name       string
		body       []byte
		code       api.Code // "" for success
		hasID      bool
		id         uint64
		method     string
		wantParams []byte
	}{
		{"full", orderedMap(t, "id", 7, "method", "decide", "params", msgpack.RawMessage(params)), "", true, 7, "decide", params},
		{"no params", orderedMap(t, "method", "ping", "id", uint64(1<<40)), "", true, 1 << 40, "ping", nil},
		{"nil params", orderedMap(t, "id", 3, "method", "status", "params", nil), "", true, 3, "status", nil},
		{"unknown key ignored", orderedMap(t, "id", 4, "method", "ping", "trace", []int{1}), "", true, 4, "ping", nil},
		{"int8 id", orderedMap(t, "id", int8(5), "method", "ping"), "", true, 5, "ping", nil},
		{"not msgpack", []byte{0xc1}, api.CodeBadFrame, false, 0, "", nil},
		{"empty body", []byte{}, api.CodeBadFrame, false, 0, "", nil},
		{"array", mp(t, []int{1, 2}), api.CodeBadFrame, false, 0, "", nil},
		{"trailing", append(orderedMap(t, "id", 1, "method", "ping"), 0x00), api.CodeBadFrame, true, 1, "", nil},
		{"truncated map", orderedMap(t, "id", 1, "method", "ping")[:5], api.CodeBadFrame, true, 1, "", nil},
		{"missing id", orderedMap(t, "method", "ping"), api.CodeBadRequest, false, 0, "", nil},
		{"missing method", orderedMap(t, "id", 9), api.CodeBadRequest, true, 9, "", nil},
		{"negative id", orderedMap(t, "id", -1, "method", "ping"), api.CodeBadRequest, false, 0, "", nil},
		{"float id", orderedMap(t, "id", 1.0, "method", "ping"), api.CodeBadRequest, false, 0, "", nil},
		{"string id", orderedMap(t, "id", "1", "method", "ping"), api.CodeBadRequest, false, 0, "", nil},
		{"method not string", orderedMap(t, "id", 2, "method", 5), api.CodeBadRequest, true, 2, "", nil},
		{"non-string key", orderedMap(t, 1, 2, "id", 2, "method", "ping"), api.CodeBadRequest, true, 2, "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, hasID, perr := parseRequest(c.body)
			if c.code == "" {
				if perr != nil {
					t.Fatalf("error %v", perr)
				}
				if req.ID != c.id || req.Method != c.method || !bytes.Equal(req.Params, c.wantParams) {
					t.Fatalf("got %+v, want id %d method %q params % x", req, c.id, c.method, c.wantParams)
				}
				return
			}
			if perr == nil || perr.Code != c.code {
				t.Fatalf("error %v, want code %s", perr, c.code)
			}
			if hasID != c.hasID || (hasID && req.ID != c.id) {
				t.Fatalf("hasID %v id %d, want %v %d", hasID, req.ID, c.hasID, c.id)
			}
		})
	}
}

// TestParseRequestValue checks that a request's params arrive as their
// value tree, read once with the frame: key order kept, a well-formed value
// that is no tree handed to the handler as ValueErr, malformed params a
// bad frame.
func TestParseRequestValue(t *testing.T) {
	cases := []struct {
		name    string
		params  []byte
		code    api.Code // "" for a request that reaches its handler
		json    string   // the tree as JSON, when it is one
		errPart string   // in ValueErr, when it is not
	}{
		{"ordered", orderedMap(t, "z", 1, "a", []any{"x", 2.5}), "", `{"z":1,"a":["x",2.5]}`, ""},
		{"none", nil, "", `null`, ""},
		{"duplicate key", orderedMap(t, "k", 1, "k", 2), "", "", `duplicate key "k"`},
		{"binary", mp(t, []byte{1, 2}), "", "", "binary"},
		{"truncated", orderedMap(t, "k", "vvvv"), api.CodeBadFrame, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kv := []any{"id", 1, "method", "decide"}
			if c.params != nil {
				kv = append(kv, "params", msgpack.RawMessage(c.params))
			}
			body := orderedMap(t, kv...)
			if c.code != "" {
				// Cut inside the params: the map's length says more.
				body = body[:len(body)-1]
			}
			req, _, perr := parseRequest(body)
			if c.code != "" {
				if perr == nil || perr.Code != c.code {
					t.Fatalf("error %v, want code %s", perr, c.code)
				}
				return
			}
			if perr != nil {
				t.Fatalf("error %v", perr)
			}
			if c.errPart != "" {
				if req.ValueErr == nil || !strings.Contains(req.ValueErr.Error(), c.errPart) {
					t.Fatalf("ValueErr %v, want one saying %q", req.ValueErr, c.errPart)
				}
				return
			}
			if req.ValueErr != nil {
				t.Fatalf("ValueErr %v", req.ValueErr)
			}
			js, err := value.AppendJSON(nil, &req.Value, value.Compact)
			if err != nil || string(js) != c.json {
				t.Fatalf("value %s (%v), want %s", js, err, c.json)
			}
		})
	}
}

// TestResponseLibraryDecodes checks our response encoding against the
// library's decoder and our response parser against the library's encoder.
func TestResponseLibraryDecodes(t *testing.T) {
	ok := appendResponse(nil, 12, true, mp(t, map[string]any{"x": 1.5}), nil)
	var got map[string]any
	if err := msgpack.Unmarshal(ok, &got); err != nil {
		t.Fatal(err)
	}
	if got["id"] != int8(12) && got["id"] != uint8(12) {
		t.Errorf("id decoded as %#v", got["id"])
	}
	if r, _ := got["result"].(map[string]any); r["x"] != 1.5 {
		t.Errorf("result decoded as %#v", got["result"])
	}
	bad := appendResponse(nil, 0, false, nil, api.Errorf(api.CodeBadFrame, "nope"))
	got = nil
	if err := msgpack.Unmarshal(bad, &got); err != nil {
		t.Fatal(err)
	}
	if got["id"] != nil {
		t.Errorf("id %#v, want nil", got["id"])
	}
	if e, _ := got["error"].(map[string]any); e["code"] != "bad_frame" || e["message"] != "nope" {
		t.Errorf("error decoded as %#v", got["error"])
	}

	lib := orderedMap(t, "error", map[string]string{"code": "overloaded", "message": "busy"}, "id", 77)
	r, err := parseResponse(lib)
	if err != nil || !r.hasID || r.id != 77 || r.err == nil || r.err.Code != api.CodeOverloaded || r.err.Message != "busy" {
		t.Fatalf("parseResponse = %+v, %v", r, err)
	}
	for name, body := range map[string][]byte{
		"no result or error": orderedMap(t, "id", 1),
		"error not a map":    orderedMap(t, "id", 1, "error", "x"),
		"error without code": orderedMap(t, "id", 1, "error", map[string]string{"message": "x"}),
		"id a string":        orderedMap(t, "id", "1", "result", 1),
	} {
		if _, err := parseResponse(body); err == nil {
			t.Errorf("%s: parseResponse accepted", name)
		}
	}
}

// failAfter is a reader that serves data and then fails the test if read
// further: it proves ReadFrame does not touch a body it refuses.
type failAfter struct {
	t    *testing.T
	data []byte
}

func (f *failAfter) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		f.t.Fatal("ReadFrame read past the header of a refused frame")
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestReadFrame(t *testing.T) {
	frame := func(n uint32, body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, n), body...)
	}
	cases := []struct {
		name    string
		in      []byte
		limit   int
		want    []byte
		wantErr error
	}{
		{"ok", frame(3, []byte("abc")), 10, []byte("abc"), nil},
		{"empty body", frame(0, nil), 10, []byte{}, nil},
		{"at limit", frame(10, make([]byte, 10)), 10, make([]byte, 10), nil},
		{"clean EOF", nil, 10, nil, io.EOF},
		{"short header", []byte{0, 0}, 10, nil, io.ErrUnexpectedEOF},
		{"short body", frame(5, []byte("ab")), 10, nil, io.ErrUnexpectedEOF},
		{"large short body", frame(3<<20, make([]byte, 100)), 4 << 20, nil, io.ErrUnexpectedEOF},
		{"large body", frame(3<<20, make([]byte, 3<<20)), 4 << 20, make([]byte, 3<<20), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadFrame(bytes.NewReader(c.in), c.limit)
			if !errors.Is(err, c.wantErr) || (err == nil && !bytes.Equal(got, c.want)) {
				t.Fatalf("ReadFrame = %d bytes, %v; want %d bytes, %v", len(got), err, len(c.want), c.wantErr)
			}
		})
	}
	t.Run("over limit", func(t *testing.T) {
		_, err := ReadFrame(&failAfter{t: t, data: frame(11, nil)}, 10)
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("err %v, want ErrFrameTooLarge", err)
		}
	})
	t.Run("round trip", func(t *testing.T) {
		var buf bytes.Buffer
		for _, s := range []string{"", "x", "hello"} {
			if err := WriteFrame(&buf, []byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []string{"", "x", "hello"} {
			got, err := ReadFrame(&buf, 10)
			if err != nil || string(got) != s {
				t.Fatalf("got %q, %v; want %q", got, err, s)
			}
		}
	})
}

// FuzzReadRequest feeds arbitrary bytes to the frame reader and request
// parser: they must never panic, a request they accept must survive
// re-encoding unchanged, and params they accept must be a value the library
// can skip in full (an independent check of our msgpack scanner).
func FuzzReadRequest(f *testing.F) {
	f.Add(append([]byte{0, 0, 0, 21}, orderedMap(f, "id", 1, "method", "ping", "params", nil)...))
	f.Add(append([]byte{0, 0, 0, 3}, 0x91, 0x91, 0x01))
	f.Add([]byte("garbage that is no frame"))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 6, 0x81, 0xa2, 'i', 'd', 0xcf, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		body, err := ReadFrame(bytes.NewReader(in), 1<<16)
		if err != nil {
			return
		}
		req, _, perr := parseRequest(body)
		if perr != nil {
			return
		}
		again, _, perr := parseRequest(appendRequest(nil, req.ID, req.Method, req.Params))
		if perr != nil || again.ID != req.ID || again.Method != req.Method || !bytes.Equal(again.Params, req.Params) {
			t.Fatalf("re-encoded request differs: %+v vs %+v (%v)", again, req, perr)
		}
		if req.Params != nil {
			dec := msgpack.NewDecoder(bytes.NewReader(req.Params))
			if err := dec.Skip(); err != nil {
				t.Fatalf("library cannot skip params we accepted (% x): %v", req.Params, err)
			}
		}
	})
}
