package tokenizer

import (
	"strings"
	"sync"
	"testing"

	"github.com/startlux/startlux/tokenizer/tokenizertest"
)

func goldenTexts(b *testing.B, name string) ([]string, int) {
	g := readGolden(b, name)
	texts := make([]string, len(g.Cases))
	n := 0
	for i, c := range g.Cases {
		texts[i] = c.Text
		n += len(c.Text)
	}
	return texts, n
}

var mixedOnce = sync.OnceValue(func() string { return tokenizertest.MixedText(1_000_000) })

// BenchmarkEncodeGolden encodes the golden corpus (369 strings, 60 kB) with
// the real Qwen3 vocabulary; MB/s is input text.
func BenchmarkEncodeGolden(b *testing.B) {
	tok := qwen3Tokenizer(b)
	texts, n := goldenTexts(b, goldenQwen3)
	b.SetBytes(int64(n))
	for b.Loop() {
		for _, s := range texts {
			tok.Encode(s)
		}
	}
}

// BenchmarkEncodeMixed encodes 1 MB of mixed text as one string.
func BenchmarkEncodeMixed(b *testing.B) {
	tok := qwen3Tokenizer(b)
	text := mixedOnce()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text)
	}
}

// BenchmarkEncodeMixedLines encodes the same text one line at a time.
func BenchmarkEncodeMixedLines(b *testing.B) {
	tok := qwen3Tokenizer(b)
	text := mixedOnce()
	lines := strings.SplitAfter(text, "\n")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		for _, l := range lines {
			tok.Encode(l)
		}
	}
}

// BenchmarkEncodeMixedParallel encodes lines from all goroutines at once.
func BenchmarkEncodeMixedParallel(b *testing.B) {
	tok := qwen3Tokenizer(b)
	lines := strings.SplitAfter(mixedOnce(), "\n")
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	b.SetBytes(int64(n) / int64(len(lines)))
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			tok.Encode(lines[i%len(lines)])
			i++
		}
	})
}

// BenchmarkDecodeMixed decodes the ids of the 1 MB mixed text.
func BenchmarkDecodeMixed(b *testing.B) {
	tok := qwen3Tokenizer(b)
	text := mixedOnce()
	ids := tok.Encode(text)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Decode(ids)
	}
}

// BenchmarkLoadQwen3 loads the real Qwen3 tokenizer.json.
func BenchmarkLoadQwen3(b *testing.B) {
	data := qwen3Bytes(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := FromJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}
