package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// marshal and unmarshal encode msgpack the way ipc does: fields by their
// json tags.
func marshal(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	enc.SetCustomStructTag("json")
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func unmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	dec.SetCustomStructTag("json")
	if err := dec.Decode(v); err != nil {
		t.Fatal(err)
	}
}

// mapKeys returns the keys of the msgpack map under key at the top of m,
// in their order.
func mapKeys(t *testing.T, m []byte, key string) []string {
	t.Helper()
	dec := msgpack.NewDecoder(bytes.NewReader(m))
	n, _ := dec.DecodeMapLen()
	for range n {
		k, _ := dec.DecodeString()
		if k != key {
			_ = dec.Skip()
			continue
		}
		an, _ := dec.DecodeMapLen()
		var keys []string
		for range an {
			name, _ := dec.DecodeString()
			keys = append(keys, name)
			_ = dec.Skip()
		}
		return keys
	}
	t.Fatalf("no %q in the map", key)
	return nil
}

func TestResponseEncodings(t *testing.T) {
	e := 1.25
	resp := &Response{
		Answers: Answers{
			{Name: "zeta", Options: []any{"yes", "no", "unknown"}, Probs: []float64{0.5, 0.25, 0.25}, Answer: "yes"},
			{Name: "alpha", Options: []any{0, 1, 2}, Probs: []float64{0.25, 0.25, 0.5}, Answer: 2, Expected: &e},
		},
		Tokens: 10, CachedTokens: 52, ElapsedMS: 1.5,
	}
	j, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"answers":{"zeta":{"options":["yes","no","unknown"],"probs":[0.5,0.25,0.25],"answer":"yes"},` +
		`"alpha":{"options":[0,1,2],"probs":[0.25,0.25,0.5],"answer":2,"expected":1.25}},"tokens":10,"cached_tokens":52,"elapsed_ms":1.5}`
	if string(j) != want {
		t.Errorf("JSON\n got %s\nwant %s", j, want)
	}
	var back Response
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	if j2, _ := json.Marshal(&back); !bytes.Equal(j, j2) {
		t.Errorf("JSON round trip\n got %s\nwant %s", j2, j)
	}

	m := marshal(t, resp)
	var mb Response
	unmarshal(t, m, &mb)
	if mb.Answers.Get("zeta") != &mb.Answers[0] || mb.Answers.Get("alpha") != &mb.Answers[1] || mb.Answers.Get("beta") != nil ||
		*mb.Answers[1].Expected != 1.25 || mb.Tokens != 10 || mb.CachedTokens != 52 || mb.Answers[1].Probs[2] != 0.5 || mb.Answers[0].Expected != nil {
		t.Errorf("msgpack round trip: %+v", mb)
	}
	if keys := mapKeys(t, m, "answers"); !reflect.DeepEqual(keys, []string{"zeta", "alpha"}) {
		t.Errorf("msgpack answer keys %v, want the question order", keys)
	}
	if j3, _ := json.Marshal(&mb); string(j3) != want {
		t.Errorf("JSON of the response read from msgpack\n got %s\nwant %s", j3, want)
	}
}

func TestRequestEncodings(t *testing.T) {
	no := false
	req := &Request{
		Evidence: "a note",
		Questions: Questions{
			{Name: "tone", Type: TypeChoice, Instructions: "Tone?", Criteria: Choices{{"calm", "calm"}, {"angry", "very angry"}}},
			{Name: "refund", Type: TypeNoul, Instructions: "Refund?", Permute: &no},
			{Name: "urgency", Type: TypeScore, Instructions: "Urgent?", Criteria: []string{"low", "high"}},
		},
		Permute: true,
	}
	j, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"evidence":"a note","questions":{"tone":{"type":"choice","instructions":"Tone?","criteria":{"calm":"calm","angry":"very angry"}},` +
		`"refund":{"type":"noul","instructions":"Refund?","permute":false},"urgency":{"type":"score","instructions":"Urgent?","criteria":["low","high"]}},"permute":true}`
	if string(j) != want {
		t.Errorf("JSON\n got %s\nwant %s", j, want)
	}
	var cs Choices
	if err := json.Unmarshal([]byte(`{"z":"last letter","a":"first"}`), &cs); err != nil || !reflect.DeepEqual(cs, Choices{{"z", "last letter"}, {"a", "first"}}) {
		t.Errorf("choices from JSON: %v, %v", cs, err)
	}

	m := marshal(t, req)
	if keys := mapKeys(t, m, "questions"); !reflect.DeepEqual(keys, []string{"tone", "refund", "urgency"}) {
		t.Errorf("msgpack question keys %v, want the request's order", keys)
	}
	var back Request
	unmarshal(t, m, &back)
	if len(back.Questions) != 3 || back.Questions[0].Name != "tone" || back.Questions[1].Permute == nil || *back.Questions[1].Permute ||
		back.Questions[2].Type != TypeScore || !back.Permute || back.Evidence != "a note" {
		t.Errorf("msgpack round trip: %+v", back)
	}
	unmarshal(t, marshal(t, Choices{{"z", "1"}, {"a", "2"}}), &cs)
	if !reflect.DeepEqual(cs, Choices{{"z", "1"}, {"a", "2"}}) {
		t.Errorf("choices through msgpack: %v", cs)
	}
}

func TestErrors(t *testing.T) {
	err := error(Errorf(CodeOverloaded, "queue full (%d)", 3))
	wrapped := &wrapErr{err}
	if ErrorCode(wrapped) != CodeOverloaded || ErrorMessage(wrapped) != "queue full (3)" || err.Error() != "overloaded: queue full (3)" {
		t.Errorf("code %q, message %q, text %q", ErrorCode(wrapped), ErrorMessage(wrapped), err)
	}
	plain := bytes.ErrTooLarge
	if ErrorCode(plain) != CodeInternal || ErrorMessage(plain) != plain.Error() {
		t.Errorf("a plain error: code %q, message %q", ErrorCode(plain), ErrorMessage(plain))
	}
	var be BatchError
	unmarshal(t, marshal(t, BatchError{Error: &Error{Code: CodeInvalidParams, Message: "bad"}}), &be)
	if be.Error == nil || *be.Error != (Error{CodeInvalidParams, "bad"}) {
		t.Errorf("batch error round trip: %+v", be.Error)
	}
}

type wrapErr struct{ err error }

func (w *wrapErr) Error() string { return "context: " + w.err.Error() }
func (w *wrapErr) Unwrap() error { return w.err }
