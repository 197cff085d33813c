package value

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
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

// TestMsgpackAgainstLibrary encodes values with vmihailenco/msgpack and
// checks that the tree read from them writes JSON that means what
// encoding/json writes of the same values, and that the scanner accepts
// them.
func TestMsgpackAgainstLibrary(t *testing.T) {
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
		if err := CheckMsgpack(buf.Bytes()); err != nil {
			t.Errorf("value %d: CheckMsgpack rejects the library's encoding: %v", i, err)
			continue
		}
		tree, err := ParseMsgpack(buf.Bytes())
		if err != nil {
			t.Errorf("value %d: ParseMsgpack: %v", i, err)
			continue
		}
		got, err := AppendJSON(nil, &tree, Compact)
		if err != nil {
			t.Errorf("value %d: AppendJSON: %v", i, err)
			continue
		}
		want, _ := json.Marshal(v)
		if !reflect.DeepEqual(normalize(t, got), normalize(t, want)) {
			t.Errorf("value %d: JSON %.200s, want %.200s", i, got, want)
		}
	}
}

// TestRoundTrips checks that JSON → tree → msgpack → tree → JSON is the
// identity on compact JSON (key order and number forms included), and that
// the library decodes our msgpack to the values encoding/json reads.
func TestRoundTrips(t *testing.T) {
	docs := []string{
		`{"z":1,"a":2,"m":{"y":[1,2,{"b":null,"a":true}],"x":"s"}}`,
		`[1,-1,-200,70000,-70000,4294967296,18446744073709551615,1.5,-0.001,1e+300,1.0,-0.0,"é\"\\\n\u0001"]`,
		`{"evidence":{"page":"Row 0"},"questions":{"q1":{"type":"noul","instructions":"x"},"q0":{"type":"score","instructions":"y","criteria":["a","b"]}}}`,
		`"just a string"`, `null`, `false`, `0`,
	}
	for _, doc := range docs {
		v, err := ParseJSON([]byte(doc))
		if err != nil {
			t.Fatalf("ParseJSON(%s): %v", doc, err)
		}
		mp, err := AppendMsgpack(nil, &v)
		if err != nil {
			t.Fatalf("AppendMsgpack: %v", err)
		}
		back, err := ParseMsgpack(mp)
		if err != nil {
			t.Fatalf("ParseMsgpack: %v", err)
		}
		js, err := AppendJSON(nil, &back, Compact)
		if err != nil {
			t.Fatal(err)
		}
		if string(js) != doc {
			t.Errorf("round trip:\n got %s\nwant %s", js, doc)
		}
		var lib any
		if err := msgpack.Unmarshal(mp, &lib); err != nil {
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
	spaced, _ := ParseJSON([]byte(`{"a":[1,{"b":"c"}]}`))
	if js, _ := AppendJSON(nil, &spaced, Spaced); string(js) != `{"a": [1, {"b": "c"}]}` {
		t.Errorf("spaced: %s", js)
	}
}

// nest returns a document of depth levels: JSON, and msgpack of the same.
func nest(depth int) (js, mp []byte) {
	js = append(bytes.Repeat([]byte("["), depth), bytes.Repeat([]byte("]"), depth)...)
	mp = append(bytes.Repeat([]byte{0x91}, depth-1), 0x90)
	return js, mp
}

// TestLimits holds both readers (and the scanner's check) to the same
// limits: MaxDepth levels are read and one more is not, MaxValues values
// are read and one more is not.
func TestLimits(t *testing.T) {
	for _, d := range []int{MaxDepth, MaxDepth + 1} {
		js, mp := nest(d)
		_, jerr := ParseJSON(js)
		_, merr := ParseMsgpack(mp)
		cerr := CheckMsgpack(append(bytes.Repeat([]byte{0x91}, d), 0x01))
		for name, err := range map[string]error{"JSON": jerr, "msgpack": merr, "CheckMsgpack": cerr} {
			if ok := d <= MaxDepth; ok != (err == nil) {
				t.Errorf("%s, %d levels: err %v", name, d, err)
			}
			if err != nil && !strings.Contains(err.Error(), "nested deeper than 128") {
				t.Errorf("%s, %d levels: %v, want it to name the limit", name, d, err)
			}
		}
	}
	for _, n := range []int{MaxValues, MaxValues + 1} {
		// An array of n-1 zeros: n values with the array.
		js := append([]byte("["), append(bytes.Repeat([]byte("0,"), n-2), "0]"...)...)
		mp := append([]byte{0xdd, byte((n - 1) >> 24), byte((n - 1) >> 16), byte((n - 1) >> 8), byte(n - 1)}, make([]byte, n-1)...)
		_, jerr := ParseJSON(js)
		_, merr := ParseMsgpack(mp)
		for name, err := range map[string]error{"JSON": jerr, "msgpack": merr} {
			if ok := n <= MaxValues; ok != (err == nil) {
				t.Errorf("%s, %d values: err %v", name, n, err)
			}
			if err != nil && !strings.Contains(err.Error(), "more than 1048576 values in the document (max_values)") {
				t.Errorf("%s, %d values: %v", name, n, err)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	enc := func(f func(e *msgpack.Encoder)) []byte {
		var b bytes.Buffer
		f(msgpack.NewEncoder(&b))
		return b.Bytes()
	}
	manyKeys := func(dup int) string {
		var b strings.Builder
		b.WriteString(`{"x": {`)
		for i := range 20 {
			if i > 0 {
				b.WriteString(", ")
			}
			k := string(rune('a' + i))
			if i == dup {
				k = "c"
			}
			b.WriteString(`"` + k + `": ` + string(rune('0'+i%10)))
		}
		b.WriteString("}}")
		return b.String()
	}
	tests := []struct {
		name      string
		json      string // or
		msgpack   []byte
		path      string
		contains  string
		malformed bool
	}{
		{name: "trailing", json: `{} x`, contains: "invalid JSON: unexpected data after the request (byte 3)", malformed: true},
		{name: "bad character", json: `{"a": [1, x]}`, path: "a[1]", contains: "unexpected character 'x' (byte 10)", malformed: true},
		{name: "expected key", json: `{"a": {1: 2}}`, path: "a", contains: "expected a string key", malformed: true},
		{name: "duplicate", json: `{"a": {"b": 1, "b": 2}}`, path: "a", contains: `duplicate key "b"`},
		{name: "duplicate among many, early", json: manyKeys(3), path: "x", contains: `duplicate key "c"`},
		{name: "duplicate among many, late", json: manyKeys(18), path: "x", contains: `duplicate key "c"`},
		{name: "lone surrogate", json: `["\ud800"]`, path: "[0]", contains: "lone surrogate", malformed: true},
		{name: "odd key", json: `{"a b": [nul]}`, path: `["a b"][0]`, contains: "unexpected character", malformed: true},
		{name: "msgpack duplicate", msgpack: enc(func(e *msgpack.Encoder) {
			_ = e.EncodeMapLen(1)
			_ = e.EncodeString("ev")
			_ = e.EncodeMapLen(2)
			_ = e.EncodeString("k")
			_ = e.EncodeInt(1)
			_ = e.EncodeString("k")
			_ = e.EncodeInt(2)
		}), path: "ev", contains: `duplicate key "k"`},
		{name: "msgpack key not a string", msgpack: enc(func(e *msgpack.Encoder) {
			_ = e.EncodeMapLen(1)
			_ = e.EncodeInt(1)
			_ = e.EncodeInt(2)
		}), contains: "map key 0 is not a string"},
		{name: "msgpack binary", msgpack: enc(func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(2)
			_ = e.EncodeNil()
			_ = e.EncodeBytes([]byte{1})
		}), path: "[1]", contains: "binary data is not a JSON value"},
		{name: "msgpack extension", msgpack: []byte{0x91, 0xd4, 0x01, 0x00}, path: "[0]", contains: "extension type"},
		{name: "msgpack invalid UTF-8", msgpack: []byte{0x91, 0xa1, 0xff}, path: "[0]", contains: "string is not valid UTF-8"},
		{name: "msgpack truncated", msgpack: []byte{0x82, 0xa8}, contains: "invalid msgpack", malformed: true},
		{name: "msgpack huge map", msgpack: []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, contains: "entries in", malformed: true},
		{name: "msgpack trailing", msgpack: []byte{0x01, 0x02}, contains: "invalid msgpack: 1 bytes after the request", malformed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.msgpack != nil {
				_, err = ParseMsgpack(tc.msgpack)
			} else {
				_, err = ParseJSON([]byte(tc.json))
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want *Error", err, err)
			}
			if e.Path.String() != tc.path || !strings.Contains(e.Message, tc.contains) || e.Malformed != tc.malformed {
				t.Errorf("got path %q message %q malformed %v, want %q containing %q, %v", e.Path, e.Message, e.Malformed, tc.path, tc.contains, tc.malformed)
			}
		})
	}
	// Integers beyond 64 bits read from JSON have no msgpack form.
	for _, doc := range []string{`{"id":18446744073709551616}`, `[-9223372036854775809]`, `[123456789012345678901234567890]`} {
		v, err := ParseJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := AppendMsgpack(nil, &v); err == nil || !strings.Contains(err.Error(), "beyond the 64 bits msgpack can carry") {
			t.Errorf("%s: %v, want the 64-bit refusal", doc, err)
		}
	}
	if v := NewFloat(math.NaN()); true {
		if _, err := AppendJSON(nil, &v, Compact); err == nil {
			t.Errorf("NaN written as JSON")
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
		if err := CheckMsgpack(b); err == nil {
			t.Errorf("%s: CheckMsgpack(% x) accepted", name, b[:min(len(b), 8)])
		}
		if _, err := ParseMsgpack(b); err == nil {
			t.Errorf("%s: ParseMsgpack(% x) accepted", name, b[:min(len(b), 8)])
		}
	}
}

// TestFloatRepr checks floats against Python's repr of the same bits, and
// that each reads back to its bits.
func TestFloatRepr(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "float-repr.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Cases [][2]json.RawMessage `json:"cases"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Cases {
		var bits uint64
		var want string
		if err := json.Unmarshal(c[0], &bits); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(c[1], &want); err != nil {
			t.Fatal(err)
		}
		f := math.Float64frombits(bits)
		if got := string(appendPyFloat(nil, f)); got != want {
			t.Errorf("repr(%v) = %s, want %s", f, got, want)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		back, err := ParseJSON([]byte(want))
		if err != nil || back.Kind != Float || math.Float64bits(back.Float) != bits {
			t.Errorf("%s reads back as %+v (%v), want the float of bits %#x", want, back, err, bits)
		}
	}
}

// TestCodecs checks that a Value inside what encoding/json and the msgpack
// library write keeps its order, and reads back.
func TestCodecs(t *testing.T) {
	v, err := ParseJSON([]byte(`{"z":1,"a":[2.5,"x"]}`))
	if err != nil {
		t.Fatal(err)
	}
	type wrap struct {
		V Value `json:"v" msgpack:"v"`
	}
	js, err := json.Marshal(wrap{v})
	if err != nil || string(js) != `{"v":{"z":1,"a":[2.5,"x"]}}` {
		t.Errorf("encoding/json: %s, %v", js, err)
	}
	var wj wrap
	if err := json.Unmarshal(js, &wj); err != nil || !reflect.DeepEqual(wj.V, v) {
		t.Errorf("encoding/json back: %+v, %v", wj.V, err)
	}
	mp, err := msgpack.Marshal(wrap{v})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := AppendMsgpack(AppendString(AppendMapHeader(nil, 1), "v"), &v)
	if !bytes.Equal(mp, want) {
		t.Errorf("msgpack library: % x, want % x", mp, want)
	}
	var wm wrap
	if err := msgpack.Unmarshal(mp, &wm); err != nil || !reflect.DeepEqual(wm.V, v) {
		t.Errorf("msgpack back: %+v, %v", wm.V, err)
	}
}
