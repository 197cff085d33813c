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

// TestToJSONAgainstLibrary encodes values with vmihailenco/msgpack and checks
// that our scanner's JSON rendering means the same as encoding/json's.
func TestToJSONAgainstLibrary(t *testing.T) {
	values := []any{
		nil, true, false, 0, 1, 127, 128, 255, 256, 65535, 65536, -1, -32, -33, -128, -129, -32768, -32769,
		int64(-1 << 40), uint64(1 << 63), 1.5, float32(0.25), -2.5e-300, "", "a", strings.Repeat("x", 31),
		strings.Repeat("y", 32), strings.Repeat("z", 300), strings.Repeat("w", 70000), "quote\" back\\ nl\n tab\t \x01 é ✓",
		[]any{}, []any{1, "two", 3.0, nil}, make([]int, 17), make([]int, 70000),
		map[string]any{}, map[string]any{"a": 1, "b": []any{map[string]any{"c": "d"}}},
		func() map[string]int {
			m := map[string]int{}
			for i := range 20 {
				m[strings.Repeat("k", i+1)] = i
			}
			return m
		}(),
	}
	for i, v := range values {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.SetSortMapKeys(true)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		if err := checkRaw(buf.Bytes()); err != nil {
			t.Errorf("value %d: checkRaw rejects the library's encoding: %v", i, err)
			continue
		}
		got, err := ToJSON(buf.Bytes())
		if err != nil {
			t.Errorf("value %d: ToJSON: %v", i, err)
			continue
		}
		want, _ := json.Marshal(v)
		if !reflect.DeepEqual(normalize(t, got), normalize(t, want)) {
			t.Errorf("value %d: ToJSON = %.200s, want %.200s", i, got, want)
		}
	}
}

// TestFromJSONKeepsOrder checks that JSON → msgpack → JSON is the identity
// on compact JSON (key order and duplicate keys included) and that the
// library decodes our msgpack to the same values encoding/json reads.
func TestFromJSONKeepsOrder(t *testing.T) {
	docs := []string{
		`{"z":1,"a":2,"m":{"y":[1,2,{"b":null,"a":true}],"x":"s"}}`,
		`{"dup":1,"dup":2}`,
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
		if strings.Contains(doc, "dup") {
			continue // encoding/json keeps the last duplicate, the library too, but maps lose order
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

func TestScannerRejects(t *testing.T) {
	deep := bytes.Repeat([]byte{0x91}, 1000)
	deep = append(deep, 0x01)
	cases := map[string][]byte{
		"empty":             {},
		"reserved code":     {0xc1},
		"truncated str":     {0xa5, 'a', 'b'},
		"huge array":        {0xdd, 0xff, 0xff, 0xff, 0xff},
		"huge map":          {0xdf, 0x7f, 0xff, 0xff, 0xff, 0x01},
		"huge str32":        {0xdb, 0xff, 0xff, 0xff, 0xff},
		"truncated float64": {0xcb, 0, 0},
		"deep nesting":      deep,
		"trailing bytes":    {0x01, 0x02},
		"truncated ext":     {0xc7, 0x05, 0x01, 0x00},
	}
	for name, b := range cases {
		if err := checkRaw(b); err == nil {
			t.Errorf("%s: checkRaw(% x) accepted", name, b[:min(len(b), 8)])
		}
	}
}
