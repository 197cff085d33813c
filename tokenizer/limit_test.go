package tokenizer

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestEncodeLimit holds EncodeLimit to Encode on every golden text, at the
// exact token count and one below it: at or above the count it gives
// Encode's ids; below it a *LimitError whose lower bound is above the limit
// and no more than the true count.
func TestEncodeLimit(t *testing.T) {
	for _, c := range []struct {
		golden string
		tok    func(testing.TB) *Tokenizer
	}{{goldenTiny, tinyTokenizer}, {goldenQwen3, qwen3Tokenizer}} {
		tok := c.tok(t)
		texts := []string{"", strings.Repeat("ab ", 400), strings.Repeat("x", 3000), "a\xffb"}
		for _, g := range readGolden(t, c.golden).Cases {
			texts = append(texts, g.Text)
		}
		for _, s := range texts {
			want := tok.Encode(s)
			for _, max := range []int{len(want), len(want) + 5} {
				got, err := tok.EncodeLimit(s, max)
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("%s: EncodeLimit(%.40q, %d) = %v, %v; want Encode's %v", c.golden, s, max, got, err, want)
				}
			}
			for _, max := range []int{len(want) - 1, len(want) / 3, 0} {
				if max < 0 || max >= len(want) {
					continue
				}
				_, err := tok.EncodeLimit(s, max)
				var le *LimitError
				if !errors.As(err, &le) || le.Max != max || le.AtLeast <= max || le.AtLeast > len(want) {
					t.Fatalf("%s: EncodeLimit(%.40q, %d) of a %d-token text: %v; want a LimitError with %d < AtLeast <= %d", c.golden, s, max, len(want), err, max, len(want))
				}
			}
		}
	}
}

// TestMaxTokenBytes checks the bound against every token's own bytes.
func TestMaxTokenBytes(t *testing.T) {
	for _, tok := range []*Tokenizer{tinyTokenizer(t), qwen3Tokenizer(t)} {
		mb := tok.MaxTokenBytes()
		longest := 0
		for id := range tok.VocabSize() {
			longest = max(longest, len(tok.Decode([]int32{int32(id)})))
		}
		if mb < longest || mb > 4*longest {
			t.Errorf("MaxTokenBytes = %d; the longest token decodes to %d bytes", mb, longest)
		}
	}
}

// TestEncodeLimitBoundsWork: huge texts over the limit, in one word or in
// many, cost next to nothing; a word over MaxWordBytes is refused as such.
func TestEncodeLimitBoundsWork(t *testing.T) {
	tok := qwen3Tokenizer(t)
	huge := strings.Repeat("a", 64<<20)
	spaced := strings.Repeat("word ", 12<<20)
	for _, c := range []struct {
		name string
		s    string
		max  int
	}{{"64 MiB in one word", huge, 4096}, {"60 MiB of words", spaced, 4096}, {"a long word under a large limit", huge[:MaxWordBytes*3], 1 << 30}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := tok.EncodeLimit(c.s, c.max)
		runtime.ReadMemStats(&after)
		var le *LimitError
		if !errors.As(err, &le) {
			t.Fatalf("%s: %v, want a LimitError", c.name, err)
		}
		if c.max > len(c.s) {
			if le.Word != MaxWordBytes*3 {
				t.Errorf("%s: %v, want the word's length", c.name, err)
			}
		} else if le.AtLeast <= c.max {
			t.Errorf("%s: %v", c.name, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
			t.Errorf("%s: EncodeLimit allocated %d MB", c.name, got>>20)
		}
	}
}

// TestLongWordCache: words past the word cache, repeated and interleaved,
// tokenise as they do the first time (the long-word cache is a ring of four).
func TestLongWordCache(t *testing.T) {
	tok := qwen3Tokenizer(t)
	var ws []string
	for i := range 6 {
		ws = append(ws, strings.Repeat(string(rune('a'+i)), 300+i*1000)+strings.Repeat("xyz", 100*i))
	}
	first := make([][]int32, len(ws))
	for i, w := range ws {
		first[i] = tok.Encode(w)
	}
	for round := range 3 {
		for i := len(ws) - 1; i >= 0; i-- {
			if got := tok.Encode(ws[i]); !slices.Equal(got, first[i]) {
				t.Fatalf("round %d, word %d: %v, the first time %v", round, i, got, first[i])
			}
		}
	}
}
