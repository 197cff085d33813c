package decide

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/startlux/startlux/value"
)

func TestBadRequests(t *testing.T) {
	const q = `"instructions": "Is it?"`
	tests := []struct {
		name, body      string
		question, field string
		messageContains string
	}{
		{"not json", `{"evidence": 1,`, "", "", "invalid JSON"},
		{"trailing data", `{"evidence": 1, "questions": {"a": {"type": "noul", ` + q + `}}} x`, "", "", "after the request"},
		{"not an object", `[1, 2]`, "", "", "a request is an object"},
		{"unknown top field", `{"evidence": 1, "questions": {}, "model": "x"}`, "", "model", "unknown field"},
		{"no evidence", `{"questions": {"a": {"type": "noul", ` + q + `}}}`, "", "evidence", "missing"},
		{"no questions", `{"evidence": 1}`, "", "questions", "missing"},
		{"empty questions", `{"evidence": 1, "questions": {}}`, "", "questions", "no questions"},
		{"questions a list", `{"evidence": 1, "questions": [1]}`, "", "questions", "must be an object"},
		{"duplicate question", `{"evidence": 1, "questions": {"a": {"type": "noul", ` + q + `}, "a": {"type": "noul", ` + q + `}}}`, "", "questions", `duplicate key "a"`},
		{"duplicate evidence key", `{"evidence": {"x": 1, "y": {"z": 1, "z": 2}}, "questions": {"a": {"type": "noul", ` + q + `}}}`, "", "evidence", `duplicate key "z" at evidence.y`},
		{"duplicate top key", `{"evidence": 1, "evidence": 2, "questions": {}}`, "", "", `duplicate key "evidence"`},
		{"question not object", `{"evidence": 1, "questions": {"a": "noul"}}`, "a", "", "a question is an object"},
		{"unknown type", `{"evidence": 1, "questions": {"a": {"type": "rank", ` + q + `}}}`, "a", "type", `unknown type "rank"`},
		{"missing type", `{"evidence": 1, "questions": {"a": {` + q + `}}}`, "a", "type", "missing"},
		{"type not string", `{"evidence": 1, "questions": {"a": {"type": 3, ` + q + `}}}`, "a", "type", "must be a string"},
		{"missing instructions", `{"evidence": 1, "questions": {"a": {"type": "noul"}}}`, "a", "instructions", "missing"},
		{"empty instructions", `{"evidence": 1, "questions": {"a": {"type": "noul", "instructions": ""}}}`, "a", "instructions", "must not be empty"},
		{"instructions not string", `{"evidence": 1, "questions": {"a": {"type": "noul", "instructions": ["x"]}}}`, "a", "instructions", "must be a string"},
		{"permute not a bool", `{"evidence": 1, "permute": 1, "questions": {"a": {"type": "noul", ` + q + `}}}`, "", "permute", "must be true or false, got"},
		{"question permute not a bool", `{"evidence": 1, "questions": {"a": {"type": "noul", ` + q + `, "permute": "yes"}}}`, "a", "permute", "must be true or false, got"},
		{"unknown question field", `{"evidence": 1, "questions": {"a": {"type": "noul", ` + q + `, "weight": 2}}}`, "a", "weight", "unknown field"},
		{"noul with criteria", `{"evidence": 1, "questions": {"a": {"type": "noul", ` + q + `, "criteria": {"x": "y"}}}}`, "a", "criteria", "takes no criteria"},
		{"noul with string criteria", `{"evidence": 1, "questions": {"a": {"type": "noul", ` + q + `, "criteria": "x"}}}`, "a", "criteria", "takes no criteria"},
		{"choice without criteria", `{"evidence": 1, "questions": {"a": {"type": "choice", ` + q + `}}}`, "a", "criteria", "needs an object"},
		{"choice criteria a list", `{"evidence": 1, "questions": {"a": {"type": "choice", ` + q + `, "criteria": ["x", "y"]}}}`, "a", "criteria", "needs an object"},
		{"choice one option", `{"evidence": 1, "questions": {"a": {"type": "choice", ` + q + `, "criteria": {"x": "y"}}}}`, "a", "criteria", "needs 2 to 1000 options, got 1"},
		{"choice duplicate id", `{"evidence": 1, "questions": {"a": {"type": "choice", ` + q + `, "criteria": {"x": "y", "x": "z"}}}}`, "a", "criteria", `duplicate key "x"`},
		{"choice label not string", `{"evidence": 1, "questions": {"a": {"type": "choice", ` + q + `, "criteria": {"x": "y", "z": 3}}}}`, "a", "criteria", `option "z": the label must be a string`},
		{"score one level", `{"evidence": 1, "questions": {"a": {"type": "score", ` + q + `, "criteria": ["low"]}}}`, "a", "criteria", "needs 2 to 1000 levels, got 1"},
		{"score object", `{"evidence": 1, "questions": {"a": {"type": "score", ` + q + `, "criteria": {"0": "low", "1": "high"}}}}`, "a", "criteria", "needs a list"},
		{"score level not string", `{"evidence": 1, "questions": {"a": {"type": "score", ` + q + `, "criteria": ["low", null]}}}`, "a", "criteria", "level 1: the label must be a string"},
		{"score too many", `{"evidence": 1, "questions": {"a": {"type": "score", ` + q + `, "criteria": [` + strings.Repeat(`"x", `, 1000) + `"y"]}}}`, "a", "criteria", "got 1001"},
		{"NaN evidence", `{"evidence": {"x": [1, NaN]}, "questions": {"a": {"type": "noul", ` + q + `}}}`, "", "evidence", "non-finite number at evidence.x[1]"},
		{"Infinity evidence", `{"evidence": -Infinity, "questions": {"a": {"type": "noul", ` + q + `}}}`, "", "evidence", "non-finite number"},
		{"overflowing float", `{"evidence": {"big": 1e999}, "questions": {"a": {"type": "noul", ` + q + `}}}`, "", "evidence", "non-finite number at evidence.big"},
		{"lone surrogate", `{"evidence": "\ud800", "questions": {"a": {"type": "noul", ` + q + `}}}`, "", "evidence", "lone surrogate"},
		{"invalid utf8", "{\"evidence\": \"\xff\", \"questions\": {}}", "", "evidence", "invalid UTF-8"},
		{"raw control char", "{\"evidence\": \"a\x01\", \"questions\": {}}", "", "evidence", "control character"},
		{"leading zero", `{"evidence": 012, "questions": {}}`, "", "evidence", "leading zero"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseJSON([]byte(tc.body))
			if err == nil {
				t.Fatalf("no error; got %+v", r)
			}
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is %T, want *RequestError", err, err)
			}
			if re.Question != tc.question || re.Field != tc.field || !strings.Contains(re.Message, tc.messageContains) {
				t.Errorf("got question %q field %q message %q; want %q %q containing %q (%v)",
					re.Question, re.Field, re.Message, tc.question, tc.field, tc.messageContains, err)
			}
		})
	}
}

func TestParseKeepsOrderAndDigits(t *testing.T) {
	body := `{"questions": {"z": {"instructions": "Which?", "type": "choice", "criteria": {"b": "bee", "a": "ay"}},
		"a": {"type": "score", "instructions": "How much?", "criteria": ["none", "some", "lots"]},
		"m": {"type": "noul", "instructions": "Is it?", "criteria": null}},
		"evidence": {"z": 1, "a": [18446744073709551617, -0, 1.0, 1E2, -0.0], "é": "\u00e9\n"}}`
	r, err := ParseJSON([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := RenderJSON(&r.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"z": 1, "a": [18446744073709551617, 0, 1.0, 100.0, -0.0], "é": "é\n"}`
	if got != want {
		t.Errorf("evidence renders %s, want %s", got, want)
	}
	var names []string
	for _, q := range r.Questions {
		names = append(names, q.Name)
	}
	if strings.Join(names, ",") != "z,a,m" {
		t.Errorf("question order %v", names)
	}
	opts, _ := r.Questions[0].Options()
	if opts[0].ID != "b" || opts[1].Label != "ay" {
		t.Errorf("choice options %v", opts)
	}
	opts, _ = r.Questions[1].Options()
	if opts[2].ID != 2 || opts[2].Label != "lots" {
		t.Errorf("score options %v", opts)
	}

	// The same request through msgpack (re-encoded in order, without the
	// integer beyond 64 bits) parses to the same values.
	r.Evidence.Obj[1].Value.Arr[0] = value.NewInt(-5)
	rv := r.Value()
	mp, err := value.AppendMsgpack(nil, &rv)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := parseMsgpack(mp)
	if err != nil {
		t.Fatal(err)
	}
	j1 := requestJSON(t, r)
	j2 := requestJSON(t, r2)
	if !bytes.Equal(j1, j2) {
		t.Errorf("msgpack round trip:\n%s\n%s", j1, j2)
	}
	// The encoders' methods write the same bytes (encoding/json; the
	// msgpack library calls MarshalMsgpack by name).
	if js, err := json.Marshal(r); err != nil || !bytes.Equal(js, j1) {
		t.Errorf("json.Marshal = %s (%v), want %s", js, err, j1)
	}
	if b, err := r.MarshalMsgpack(); err != nil || !bytes.Equal(b, mp) {
		t.Errorf("MarshalMsgpack = % x (%v), want % x", b, err, mp)
	}
	// And the JSON form parses back to itself.
	r3, err := ParseJSON(j1)
	if err != nil {
		t.Fatal(err)
	}
	if j3 := requestJSON(t, r3); !bytes.Equal(j1, j3) {
		t.Errorf("JSON round trip:\n%s\n%s", j1, j3)
	}
}

func TestBadMsgpack(t *testing.T) {
	enc := func(f func(e *msgpack.Encoder)) []byte {
		var b bytes.Buffer
		f(msgpack.NewEncoder(&b))
		return b.Bytes()
	}
	tests := []struct {
		name, field, contains string
		data                  []byte
	}{
		{"duplicate key", "evidence", `duplicate key "k"`, enc(func(e *msgpack.Encoder) {
			_ = e.EncodeMapLen(1)
			_ = e.EncodeString("evidence")
			_ = e.EncodeMapLen(2)
			_ = e.EncodeString("k")
			_ = e.EncodeInt(1)
			_ = e.EncodeString("k")
			_ = e.EncodeInt(2)
		})},
		{"non-string key", "evidence", "not a string", enc(func(e *msgpack.Encoder) {
			_ = e.EncodeMapLen(1)
			_ = e.EncodeString("evidence")
			_ = e.EncodeMapLen(1)
			_ = e.EncodeInt(1)
			_ = e.EncodeInt(2)
		})},
		{"binary", "evidence", "binary data", enc(func(e *msgpack.Encoder) {
			_ = e.EncodeMapLen(1)
			_ = e.EncodeString("evidence")
			_ = e.EncodeBytes([]byte{1})
		})},
		{"NaN float32", "evidence", "non-finite", enc(func(e *msgpack.Encoder) {
			_ = e.EncodeMapLen(2)
			_ = e.EncodeString("evidence")
			_ = e.EncodeFloat32(float32(nan()))
			_ = e.EncodeString("questions")
			_ = e.EncodeMapLen(1)
			_ = e.EncodeString("a")
			_ = e.EncodeMap(map[string]any{"type": "noul", "instructions": "x"})
		})},
		{"truncated", "", "invalid msgpack", []byte{0x82, 0xa8}},
		{"huge map length", "", "entries in", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseMsgpack(tc.data)
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T), want *RequestError", err, err)
			}
			if re.Field != tc.field || !strings.Contains(re.Message, tc.contains) {
				t.Errorf("got field %q message %q, want %q containing %q", re.Field, re.Message, tc.field, tc.contains)
			}
		})
	}
}

func TestParseBatch(t *testing.T) {
	body := `{"requests": [{"evidence": 1, "questions": {"a": {"type": "noul", "instructions": "x"}}},
		{"evidence": 2, "questions": {"a": {"type": "nope", "instructions": "x"}}}]}`
	reqs, errs, err := ParseJSONBatch([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 || reqs[0] == nil || errs[0] != nil || reqs[1] != nil || errs[1] == nil {
		t.Fatalf("got %v %v", reqs, errs)
	}
	_, _, err = ParseJSONBatch([]byte(`[{"evidence": {"k": 1, "k": 2}}]`))
	if err == nil || !strings.Contains(err.Error(), `request 0: evidence: duplicate key "k"`) {
		t.Errorf("got %v", err)
	}
}

// parseMsgpack reads a request from msgpack, as the daemon reads a frame's
// params.
func parseMsgpack(b []byte) (*Request, error) {
	v, err := value.ParseMsgpack(b)
	return Read(&v, err)
}

// requestJSON writes a request as compact JSON, key order kept.
func requestJSON(t testing.TB, r *Request) []byte {
	t.Helper()
	v := r.Value()
	b, err := value.AppendJSON(nil, &v, value.Compact)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func nan() float64 { var z float64; return z / z }
