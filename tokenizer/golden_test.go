package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const testdata = "../testdata"

type goldenCase struct {
	Text    string   `json:"text"`
	IDs     []int32  `json:"ids"`
	Tokens  []string `json:"tokens"`
	Decoded *string  `json:"decoded"`
}

type goldenFile struct {
	Tokenizer string       `json:"tokenizer"`
	Pattern   string       `json:"pattern"`
	Cases     []goldenCase `json:"cases"`
}

// readMaybeGz reads path, or path+".gz" decompressed if only that exists.
func readMaybeGz(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err == nil {
		return data
	}
	raw, gzErr := os.ReadFile(path + ".gz")
	if gzErr != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	data, err = io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func readGolden(t testing.TB, name string) *goldenFile {
	t.Helper()
	var g goldenFile
	if err := json.Unmarshal(readMaybeGz(t, filepath.Join(testdata, "goldens", name)), &g); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(g.Cases) == 0 {
		t.Fatalf("%s: no cases", name)
	}
	return &g
}

// Test tokenizers are loaded once per test binary.
var (
	tinyOnce, qwen3Once         sync.Once
	tinyTok, qwen3Tok           *Tokenizer
	tinyErr, qwen3Err           error
	qwen3JSONOnce               sync.Once
	qwen3JSON                   []byte
	qwen3Qwen35Once             sync.Once
	qwen3Qwen35Tok              *Tokenizer
	qwen3Qwen35Err              error
	tinyTokenizerPath           = filepath.Join(testdata, "tiny-qwen35", "tokenizer.json")
	qwen3TokenizerPath          = filepath.Join(testdata, "qwen3-tokenizer", "tokenizer.json.gz")
	goldenTiny                  = "tokenize-tiny-qwen35.json"
	goldenQwen3                 = "tokenize-qwen3.json"
	goldenQwen3WithQwen35Splits = "tokenize-qwen3-vocab-qwen35-pattern.json"
)

func tinyTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tinyOnce.Do(func() { tinyTok, tinyErr = Load(tinyTokenizerPath) })
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyTok
}

func qwen3Bytes(t testing.TB) []byte {
	t.Helper()
	qwen3JSONOnce.Do(func() {
		raw, err := os.ReadFile(qwen3TokenizerPath)
		if err != nil {
			return
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return
		}
		qwen3JSON, _ = io.ReadAll(zr)
	})
	if len(qwen3JSON) == 0 {
		t.Fatalf("cannot read %s", qwen3TokenizerPath)
	}
	return qwen3JSON
}

func qwen3Tokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	qwen3Once.Do(func() { qwen3Tok, qwen3Err = Load(qwen3TokenizerPath) })
	if qwen3Err != nil {
		t.Fatal(qwen3Err)
	}
	return qwen3Tok
}

// withPattern returns tokenizer.json data with the Split regex replaced.
func withPattern(t testing.TB, data []byte, from, to string) []byte {
	t.Helper()
	enc := func(s string) []byte {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if err := e.Encode(s); err != nil {
			t.Fatal(err)
		}
		return bytes.TrimSpace(b.Bytes())
	}
	old, repl := enc(from), enc(to)
	if n := bytes.Count(data, old); n != 1 {
		t.Fatalf("pattern %s found %d times in tokenizer.json, want 1", old, n)
	}
	return bytes.Replace(data, old, repl, 1)
}

func qwen3WithQwen35Pattern(t testing.TB) *Tokenizer {
	t.Helper()
	g := readGolden(t, goldenQwen3WithQwen35Splits)
	if g.Pattern != qwen35Pattern {
		t.Fatalf("golden pattern %q is not the known Qwen3.5 pattern", g.Pattern)
	}
	data := qwen3Bytes(t)
	qwen3Qwen35Once.Do(func() {
		qwen3Qwen35Tok, qwen3Qwen35Err = FromJSON(withPattern(t, data, qwen2Pattern, g.Pattern))
	})
	if qwen3Qwen35Err != nil {
		t.Fatal(qwen3Qwen35Err)
	}
	return qwen3Qwen35Tok
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkGolden compares every case of a golden file, ids and decoded text.
func checkGolden(t *testing.T, tok *Tokenizer, g *goldenFile) {
	t.Helper()
	bad := 0
	for i, c := range g.Cases {
		got := tok.Encode(c.Text)
		if !equalIDs(got, c.IDs) {
			bad++
			if bad <= 10 {
				t.Errorf("case %d %q:\n got %v\nwant %v", i, c.Text, got, c.IDs)
			}
			continue
		}
		if c.Tokens != nil {
			for k, id := range got {
				if id < 0 || int(id) >= len(tok.idTokens) || tok.idTokens[id] != c.Tokens[k] {
					t.Errorf("case %d: token %d is id %d, golden token string %q", i, k, id, c.Tokens[k])
					break
				}
			}
		}
		if c.Decoded != nil {
			if d := tok.Decode(got); d != *c.Decoded {
				t.Errorf("case %d %q: decode = %q, want %q", i, c.Text, d, *c.Decoded)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d cases differ", bad, len(g.Cases))
	}
}

func TestGoldens(t *testing.T) {
	tests := []struct {
		golden string
		tok    func(testing.TB) *Tokenizer
		cases  int
	}{
		{goldenTiny, tinyTokenizer, 369},
		{goldenQwen3, qwen3Tokenizer, 369},
		{goldenQwen3WithQwen35Splits, qwen3WithQwen35Pattern, 375},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.golden, ".json"), func(t *testing.T) {
			g := readGolden(t, tt.golden)
			if len(g.Cases) != tt.cases {
				t.Fatalf("%d cases, want %d", len(g.Cases), tt.cases)
			}
			checkGolden(t, tt.tok(t), g)
		})
	}
}
