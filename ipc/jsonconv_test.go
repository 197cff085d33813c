package ipc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// normalize decodes JSON into plain values (numbers as float64) so two
// encodings can be compared by meaning.
func normalize(t *testing.T, js []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatalf("unmarshal %s: %v", js, err)
	}
	return v
}

// TestFromJSONKeepsOrder checks that JSON → msgpack → JSON is the identity
// on compact JSON (key order included) and that the
// library decodes our msgpack to the same values encoding/json reads.
func TestFromJSONKeepsOrder(t *testing.T) {
	docs := []string{
		`{"z":1,"a":2,"m":{"y":[1,2,{"b":null,"a":true}],"x":"s"}}`,
		`[1,-1,-200,70000,-70000,4294967296,18446744073709551615,1.5,-0.001,1e+300,"é\"\\\n"]`,
		`{"evidence":{"page":"Row 0"},"questions":{"q1":{"type":"noul","instructions":"x"},"q0":{"type":"score","instructions":"y","criteria":["a","b"]}}}`,
		`"just a string"`, `null`, `false`, `0`,
	}
	for _, doc := range docs {
		mp, err := FromJSON([]byte(doc))
		if err != nil {
			t.Fatalf("FromJSON(%s): %v", doc, err)
		}
		back, err := ToJSON(mp)
		if err != nil {
			t.Fatalf("ToJSON: %v", err)
		}
		if string(back) != doc {
			t.Errorf("round trip:\n got %s\nwant %s", back, doc)
		}
		var lib any
		dec := msgpack.NewDecoder(bytes.NewReader(mp))
		if err := dec.Decode(&lib); err != nil {
			t.Fatalf("library decode of %s: %v", doc, err)
		}
		libJSON, err := json.Marshal(lib)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normalize(t, libJSON), normalize(t, []byte(doc))) {
			t.Errorf("library reads %s, want %s", libJSON, doc)
		}
	}
}

func TestFromJSONErrors(t *testing.T) {
	cases := map[string]string{
		"two values": `1 2`,
		"truncated":  `{"a":`,
		"too deep":   strings.Repeat("[", 200) + strings.Repeat("]", 200),
		"bad syntax": `{a:1}`,
		// The daemon refuses duplicate keys; they are refused before
		// they travel.
		"duplicate key": `{"dup":1,"dup":2}`,
		// An integer beyond 64 bits would have to become a float, whose
		// digits render differently (decide's format keeps every digit).
		"integer beyond 64 bits":          `{"evidence":{"id":18446744073709551616}}`,
		"negative integer beyond 64 bits": `[-9223372036854775809]`,
	}
	for name, doc := range cases {
		if _, err := FromJSON([]byte(doc)); err == nil {
			t.Errorf("%s: FromJSON(%.40s) succeeded, want an error", name, doc)
		}
	}
	if _, err := FromJSON([]byte(`[123456789012345678901234567890]`)); err == nil || !strings.Contains(err.Error(), "integer 123456789012345678901234567890") {
		t.Errorf("a 30-digit integer: err %v, want one naming the integer", err)
	}
	// Large numbers written as floats stay floats.
	for _, doc := range []string{`[1e30]`, `[12345678901234567890123.0]`, `[-1E+25]`} {
		if _, err := FromJSON([]byte(doc)); err != nil {
			t.Errorf("FromJSON(%s): %v", doc, err)
		}
	}
}
