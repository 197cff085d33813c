package tokenizer

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// toLegacyMerges rewrites a tokenizer.json's merges from ["a", "b"] pairs to
// "a b" strings.
func toLegacyMerges(t *testing.T, data []byte) []byte {
	t.Helper()
	var f map[string]json.RawMessage
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	var model map[string]json.RawMessage
	if err := json.Unmarshal(f["model"], &model); err != nil {
		t.Fatal(err)
	}
	var pairs [][]string
	if err := json.Unmarshal(model["merges"], &pairs); err != nil {
		t.Fatalf("merges are not pairs: %v", err)
	}
	lines := make([]string, len(pairs))
	for i, p := range pairs {
		lines[i] = p[0] + " " + p[1]
	}
	model["merges"], _ = json.Marshal(lines)
	f["model"], _ = json.Marshal(model)
	out, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMergeForms(t *testing.T) {
	data, err := os.ReadFile(tinyTokenizerPath)
	if err != nil {
		t.Fatal(err)
	}
	legacy := toLegacyMerges(t, data)
	if !strings.Contains(string(legacy), `"Ġ Ġ"`) {
		t.Fatal("rewritten file has no string merges")
	}
	pairs, err := FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	strs, err := FromJSON(legacy)
	if err != nil {
		t.Fatal(err)
	}
	a, b := &pairs.model.merges, &strs.model.merges
	if a.n != b.n || a.n == 0 || len(a.slots) != len(b.slots) {
		t.Fatalf("merge tables differ in size: %d/%d entries", a.n, b.n)
	}
	for i := range a.slots {
		if a.slots[i] != b.slots[i] {
			t.Fatalf("merge table slot %d: %+v vs %+v", i, a.slots[i], b.slots[i])
		}
	}
	checkGolden(t, strs, readGolden(t, goldenTiny))
}

// minimalJSON returns a small valid byte-level tokenizer.json as a map that
// tests can break: the 256 byte tokens, merges "Ġ t", "h e", "Ġt he", and
// the Qwen split pattern.
func minimalJSON() map[string]any {
	vocab := map[string]any{}
	chars := byteLevelChars()
	for b := 0; b < 256; b++ {
		vocab[string(chars[b])] = b
	}
	vocab["Ġt"] = 256
	vocab["he"] = 257
	vocab["Ġthe"] = 258
	return map[string]any{
		"version":      "1.0",
		"added_tokens": []any{},
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwen2Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel"},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "fuse_unk": false, "byte_fallback": false,
			"vocab": vocab, "merges": []any{[]any{"Ġ", "t"}, []any{"h", "e"}, []any{"Ġt", "he"}},
		},
	}
}

func fromMap(t *testing.T, m map[string]any) (*Tokenizer, error) {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return FromJSON(data)
}

func TestMinimal(t *testing.T) {
	tok, err := fromMap(t, minimalJSON())
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("a the"); !equalIDs(got, []int32{'a', 258}) {
		t.Errorf("Encode(%q) = %v", "a the", got)
	}
	if got := tok.Decode([]int32{'a', 258}); got != "a the" {
		t.Errorf("Decode = %q", got)
	}
	// Without a decoder Hugging Face joins the token strings with spaces.
	m := minimalJSON()
	m["decoder"] = nil
	raw, err := fromMap(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if got := raw.Decode([]int32{'a', 258}); got != "a Ġthe" {
		t.Errorf("Decode without decoder = %q", got)
	}
}

func TestBrokenFiles(t *testing.T) {
	model := func(m map[string]any) map[string]any { return m["model"].(map[string]any) }
	tests := []struct {
		name   string
		raw    string // used instead of the map when set
		mutate func(m map[string]any)
		want   string
	}{
		{name: "bad JSON", raw: `{"model": {"type": "BPE", "vocab": {"a": 0}`, want: "parse tokenizer.json"},
		{name: "not an object", raw: `[1, 2]`, want: "parse tokenizer.json"},
		{name: "trailing data", raw: `{"model": null} {}`, want: "data after the top-level object"},
		{name: "huge id", mutate: func(m map[string]any) { model(m)["vocab"].(map[string]any)["x!"] = 2000000000 }, want: "id 2000000000 is too large"},
		{name: "fractional id", mutate: func(m map[string]any) { model(m)["vocab"].(map[string]any)["x!"] = 1.5 }, want: "found 1.5"},
		{name: "bad escape in vocab", raw: `{"model": {"type": "BPE", "vocab": {"a\q": 0}, "merges": []}}`, want: "invalid character"},
		{name: "missing model", mutate: func(m map[string]any) { delete(m, "model") }, want: "model: missing"},
		{name: "missing vocab", mutate: func(m map[string]any) { delete(model(m), "vocab") }, want: "missing vocab"},
		{name: "missing merges", mutate: func(m map[string]any) { delete(model(m), "merges") }, want: "missing merges"},
		{name: "vocab not an object", mutate: func(m map[string]any) { model(m)["vocab"] = []any{"a"} }, want: "vocab"},
		{name: "negative id", mutate: func(m map[string]any) { model(m)["vocab"].(map[string]any)["x!"] = -3 }, want: "want a non-negative integer id, found -3"},
		{name: "unknown merge token", mutate: func(m map[string]any) {
			model(m)["merges"] = append(model(m)["merges"].([]any), []any{"Ġthe", "zzz"})
		}, want: `unknown merge token "zzz"`},
		{name: "merged token not in vocab", mutate: func(m map[string]any) {
			model(m)["merges"] = append(model(m)["merges"].([]any), []any{"a", "b"})
		}, want: `merged token "ab" is not in vocab`},
		{name: "merge with three parts", mutate: func(m map[string]any) { model(m)["merges"] = []any{"Ġ t", "h e x"} }, want: `merges[1] = "h e x"`},
		{name: "merge pair of three", mutate: func(m map[string]any) { model(m)["merges"] = []any{[]any{"h", "e", "x"}} }, want: "want a pair"},
		{name: "unsupported model type", mutate: func(m map[string]any) { model(m)["type"] = "WordPiece" }, want: `unsupported model type "WordPiece"`},
		{name: "dropout", mutate: func(m map[string]any) { model(m)["dropout"] = 0.1 }, want: "dropout"},
		{name: "subword prefix", mutate: func(m map[string]any) { model(m)["continuing_subword_prefix"] = "##" }, want: "continuing_subword_prefix"},
		{name: "unk token not in vocab", mutate: func(m map[string]any) {
			delete(model(m)["vocab"].(map[string]any), "Ā")
			model(m)["unk_token"] = "<unk>"
		}, want: `unk_token "<unk>" is not in vocab`},
		{name: "version", mutate: func(m map[string]any) { m["version"] = "2.0" }, want: `version "2.0"`},
		{name: "unsupported pre-tokenizer", mutate: func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Whitespace"}
		}, want: `unsupported pre-tokenizer type "Whitespace"`},
		{name: "no ByteLevel", mutate: func(m map[string]any) {
			m["pre_tokenizer"].(map[string]any)["pretokenizers"] = m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[:1]
		}, want: "no ByteLevel pre-tokenizer"},
		{name: "missing pre-tokenizer", mutate: func(m map[string]any) { m["pre_tokenizer"] = nil }, want: "pre_tokenizer: missing"},
		{name: "split after ByteLevel", mutate: func(m map[string]any) {
			p := m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)
			p[0], p[1] = p[1], p[0]
		}, want: "comes after ByteLevel"},
		{name: "bad regex", mutate: func(m map[string]any) {
			m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": "(ab"}
		}, want: "compile split pattern"},
		{name: "bad behavior", mutate: func(m map[string]any) {
			m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["behavior"] = "Sideways"
		}, want: `unknown split behavior "Sideways"`},
		{name: "unsupported normalizer", mutate: func(m map[string]any) { m["normalizer"] = map[string]any{"type": "Lowercase"} }, want: `unsupported normalizer type "Lowercase"`},
		{name: "unsupported decoder", mutate: func(m map[string]any) { m["decoder"] = map[string]any{"type": "WordPiece"} }, want: `unsupported decoder type "WordPiece"`},
		{name: "unsupported post-processor", mutate: func(m map[string]any) {
			m["post_processor"] = map[string]any{"type": "TemplateProcessing"}
		}, want: `unsupported post-processor type "TemplateProcessing"`},
		{name: "added token without content", mutate: func(m map[string]any) {
			m["added_tokens"] = []any{map[string]any{"id": 5}}
		}, want: "added_tokens[0]: missing content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.raw != "" {
				_, err = FromJSON([]byte(tt.raw))
			} else {
				m := minimalJSON()
				tt.mutate(m)
				_, err = fromMap(t, m)
			}
			if err == nil {
				t.Fatalf("loaded; want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := Load("no-such-tokenizer.json"); err == nil || !strings.Contains(err.Error(), "no-such-tokenizer.json") {
		t.Errorf("missing file: %v", err)
	}
	path := t.TempDir() + "/broken.json.gz"
	if err := os.WriteFile(path, []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "broken.json.gz") {
		t.Errorf("bad gzip: %v", err)
	}
}

// TestTokenID checks TokenID against the golden token strings.
func TestTokenID(t *testing.T) {
	tok := qwen3Tokenizer(t)
	g := readGolden(t, goldenQwen3)
	n := 0
	for _, c := range g.Cases {
		for k, s := range c.Tokens {
			id, ok := tok.TokenID(s)
			if !ok || id != c.IDs[k] {
				t.Fatalf("TokenID(%q) = %d, %v; want %d", s, id, ok, c.IDs[k])
			}
			n++
		}
	}
	if n < 1000 {
		t.Fatalf("only %d tokens checked", n)
	}
	for _, s := range []string{"", "Ġ the", "<|im_start", "not a token at all"} {
		if id, ok := tok.TokenID(s); ok {
			t.Errorf("TokenID(%q) = %d, want not found", s, id)
		}
	}
	if id, ok := tok.TokenID("<|im_end|>"); !ok || id != 151645 {
		t.Errorf("TokenID(<|im_end|>) = %d, %v", id, ok)
	}
}

// TestAddedTokenOptions checks single_word, lstrip, rstrip and normalized
// added tokens against Hugging Face's rules (added_vocabulary.rs).
func TestAddedTokenOptions(t *testing.T) {
	m := minimalJSON()
	m["added_tokens"] = []any{
		map[string]any{"id": 259, "content": "<sw>", "single_word": true, "normalized": false, "special": true},
		map[string]any{"id": 260, "content": "<ls>", "lstrip": true, "normalized": false, "special": true},
		map[string]any{"id": 261, "content": "<rs>", "rstrip": true, "normalized": false, "special": true},
		// Matched after NFC: written decomposed, found in composed text.
		map[string]any{"id": 262, "content": "cafe\u0301", "normalized": true, "special": false},
		map[string]any{"id": 263, "content": "<sw>x", "normalized": false, "special": false},
		map[string]any{"id": 264, "content": "", "normalized": false, "special": false},
	}
	tok, err := fromMap(t, m)
	if err != nil {
		t.Fatal(err)
	}
	sp := int32(' ')
	tests := []struct {
		in   string
		want []int32
	}{
		{"<sw>", []int32{259}},
		{"a <sw> b", []int32{'a', sp, 259, sp, 'b'}},
		// Not a single word: letters on one side, so it is plain text.
		{"a<sw>", []int32{'a', '<', 's', 'w', '>'}},
		{"<sw>b", []int32{'<', 's', 'w', '>', 'b'}},
		// Leftmost-longest: "<sw>x" wins over "<sw>".
		{"<sw>x", []int32{263}},
		// lstrip takes the spaces before it, rstrip those after.
		{"a  <ls>b", []int32{'a', 260, 'b'}},
		{"a<rs>  \n b", []int32{'a', 261, 'b'}},
		{"  <ls><rs>  ", []int32{260, 261}},
		{"x café y", []int32{'x', sp, 262, sp, 'y'}},
		{"x cafe\u0301 y", []int32{'x', sp, 262, sp, 'y'}},
	}
	for _, tt := range tests {
		if got := tok.Encode(tt.in); !equalIDs(got, tt.want) {
			t.Errorf("Encode(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	// The normalized token decodes from its normalized form, "café", through
	// the ByteLevel decoder: "é" is in the byte-level alphabet (it stands for
	// byte 0xE9), so Hugging Face decodes it to a lone 0xE9 and then U+FFFD.
	if got := tok.Decode([]int32{262}); got != "caf\uFFFD" {
		t.Errorf("Decode(262) = %q", got)
	}
	if _, ok := tok.TokenID(""); ok {
		t.Error("empty added token was registered")
	}
}

// TestAddedTokenIDs checks Hugging Face's id assignment: an added token whose
// content is in the vocabulary keeps the vocabulary id, a new one gets the
// next id after the vocabulary, whatever the file says.
func TestAddedTokenIDs(t *testing.T) {
	m := minimalJSON()
	m["added_tokens"] = []any{
		map[string]any{"id": 900, "content": "he", "normalized": false, "special": true},
		map[string]any{"id": 901, "content": "<new>", "normalized": false, "special": true},
	}
	tok, err := fromMap(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := tok.TokenID("he"); id != 257 {
		t.Errorf("he = %d, want 257", id)
	}
	if id, _ := tok.TokenID("<new>"); id != 259 {
		t.Errorf("<new> = %d, want 259 (vocab size)", id)
	}
	if got := tok.Encode("x<new>he"); !equalIDs(got, []int32{'x', 259, 257}) {
		t.Errorf("Encode = %v", got)
	}
}

func TestDecodeLossy(t *testing.T) {
	// Expected strings from Python's bytes.decode("utf-8", "replace").
	tests := []struct{ in, want string }{
		{"a\xffb", "a\uFFFDb"},
		{"\xe2\x82", "\uFFFD"},
		{"\xe2\x82a", "\uFFFDa"},
		{"\xf0\x9f\x98", "\uFFFD"},
		{"\xf0\x9f\x98\x80", "😀"},
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xc0\xaf", "\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\x80\x80", "\uFFFD\uFFFD"},
		{"\xe0\x80\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xf0\x80", "\uFFFD\uFFFD"},
		{"\xc3", "\uFFFD"},
		{"\xe2(\xa1", "\uFFFD(\uFFFD"},
		{"\xf1\x80\x80", "\uFFFD"},
	}
	tok := qwen3Tokenizer(t)
	for _, tt := range tests {
		if got := string(appendLossy(nil, []byte(tt.in))); got != tt.want {
			t.Errorf("appendLossy(%q) = %q, want %q", tt.in, got, tt.want)
		}
		// Through the tokenizer: one byte token per input byte.
		var ids []int32
		for i := 0; i < len(tt.in); i++ {
			ids = append(ids, tok.model.byteID[tt.in[i]])
		}
		if got := tok.Decode(ids); got != tt.want {
			t.Errorf("Decode(bytes of %q) = %q, want %q", tt.in, got, tt.want)
		}
		// Encoding ill-formed text encodes its replaced form.
		if a, b := tok.Encode(tt.in), tok.Encode(tt.want); !equalIDs(a, b) {
			t.Errorf("Encode(%q) = %v, Encode(%q) = %v", tt.in, a, tt.want, b)
		}
	}
	// Unknown ids are skipped.
	if got := tok.Decode([]int32{-1, 9707, 1 << 30, 11}); got != "Hello," {
		t.Errorf("Decode with unknown ids = %q", got)
	}
}

// FuzzFromJSON checks that no tokenizer.json, however broken, panics the
// loader, and that what loads can encode.
func FuzzFromJSON(f *testing.F) {
	data, err := json.Marshal(minimalJSON())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}`))
	f.Add([]byte(`{"model": {"vocab": {"a\u00e9\"": 0}, "merges": [["a", "b"]]}, "added_tokens": [{"content": "x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := FromJSON(data)
		if err != nil {
			return
		}
		tok.Decode(tok.Encode("a the <x> 12\n"))
	})
}
