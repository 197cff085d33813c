package decide

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

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

	m, err := msgpack.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var mb Response
	if err := msgpack.Unmarshal(m, &mb); err != nil {
		t.Fatal(err)
	}
	if mb.Answers[0].Name != "zeta" || mb.Answers[1].Name != "alpha" || *mb.Answers[1].Expected != 1.25 ||
		mb.Tokens != 10 || mb.CachedTokens != 52 || mb.Answers[1].Probs[2] != 0.5 || mb.Answers[0].Expected != nil {
		t.Errorf("msgpack round trip: %+v", mb)
	}
	// The msgpack map keeps the question order: decode generically and
	// check the raw key sequence.
	dec := msgpack.NewDecoder(bytes.NewReader(m))
	n, _ := dec.DecodeMapLen()
	for i := 0; i < n; i++ {
		k, _ := dec.DecodeString()
		if k != "answers" {
			_ = dec.Skip()
			continue
		}
		an, _ := dec.DecodeMapLen()
		var keys []string
		for a := 0; a < an; a++ {
			name, _ := dec.DecodeString()
			keys = append(keys, name)
			_ = dec.Skip()
		}
		if len(keys) != 2 || keys[0] != "zeta" || keys[1] != "alpha" {
			t.Errorf("msgpack answer keys %v", keys)
		}
	}
}
