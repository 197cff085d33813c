package tokenizer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// errWriter fails every write.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestEncodeLines holds EncodeLines to Encode, line by line, and checks
// where and how it stops on bad input: the lines before the bad one are
// written, the error names the bad line.
func TestEncodeLines(t *testing.T) {
	tok, err := Load(tinyTokenizerPath)
	if err != nil {
		t.Fatal(err)
	}
	// want encodes the given texts with Encode, one JSON array a line.
	want := func(texts ...string) string {
		var b strings.Builder
		for _, s := range texts {
			ids := tok.Encode(s)
			if ids == nil {
				ids = []int32{}
			}
			line, _ := json.Marshal(ids)
			b.Write(line)
			b.WriteByte('\n')
		}
		return b.String()
	}
	long := `"` + strings.Repeat("x", 60)
	for _, tt := range []struct {
		name, in, out, err string
	}{
		{"lines", "\"hello world\"\n\"a\\nb\"\n\"\"\n", want("hello world", "a\nb", ""), ""},
		{"no final newline", "\"a\"\n\"b c\"", want("a", "b c"), ""},
		{"spaces around", "  \"a\"  \r\n", want("a"), ""},
		{"empty input", "", "", ""},
		{"blank line", "\"a\"\n\n\"b\"\n", want("a"), "line 2: want a JSON string, got an empty line"},
		{"number", "\"a\"\n42\n", want("a"), `line 2: want a JSON string, got "42"`},
		{"bad JSON", "\"a\"\n\"b\"\n\"c\n", want("a", "b"), "line 3: "},
		{"long line", long + "\n", "", `line 1: `},
		{"long non-string", strings.Repeat("y", 60), "", `got "` + strings.Repeat("y", 40) + `"...`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := tok.EncodeLines(context.Background(), strings.NewReader(tt.in), &out)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("error %v, want %q", err, tt.err)
			}
			if out.String() != tt.out {
				t.Errorf("output %q, want %q", out.String(), tt.out)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tok.EncodeLines(ctx, strings.NewReader("\"a\"\n"), &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if err := tok.EncodeLines(context.Background(), strings.NewReader("\"a\"\n"), errWriter{}); err == nil || !strings.Contains(err.Error(), "write: disk full") {
		t.Errorf("failing writer: %v", err)
	}
}
