package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// TestMergeSmallAgainstLarge: the in-place merge used for short words and
// the priority-queue merge (Hugging Face's algorithm) must agree.
func TestMergeSmallAgainstLarge(t *testing.T) {
	tok := qwen3Tokenizer(t)
	m := tok.model
	r := rand.New(rand.NewPCG(3, 4))
	var words []string
	for _, c := range readGolden(t, goldenQwen3).Cases {
		for i := 0; i < len(c.Text); {
			e := tok.pre.fast.next(c.Text, i)
			words = append(words, c.Text[i:e])
			i = e
		}
	}
	for range 2000 {
		words = append(words, randomText(r, 1+r.IntN(12)))
	}
	checked := 0
	for _, w := range words {
		if len(w) > smallWord {
			continue
		}
		small := make([]int32, len(w))
		for i := 0; i < len(w); i++ {
			small[i] = m.byteID[w[i]]
		}
		small = m.mergeSmall(small)
		large := m.mergeLarge(nil, m.initial(w))
		if !slices.Equal(small, large) {
			t.Errorf("%q: small %v, large %v", w, small, large)
		}
		checked++
	}
	if checked < 2000 {
		t.Fatalf("only %d words checked", checked)
	}
}

// TestLongWords covers words past the small-merge limit and the cache:
// decode round trips of long runs, and the golden cases that hold no space.
func TestLongWords(t *testing.T) {
	tok := qwen3Tokenizer(t)
	for _, n := range []int{49, 300, 5000} {
		s := strings.Repeat("a", n)
		ids := tok.Encode(s)
		if got := tok.Decode(ids); got != s {
			t.Fatalf("round trip of %d a's failed", n)
		}
	}
	g := readGolden(t, goldenQwen3)
	for _, c := range g.Cases {
		if len(c.Text) > smallWord && !strings.ContainsAny(c.Text, " \t\n") {
			if got := tok.Encode(c.Text); !equalIDs(got, c.IDs) {
				t.Errorf("%q: %v, want %v", c.Text, got, c.IDs)
			}
		}
	}
}

// TestConcurrentEncode encodes from several goroutines at once (run with
// -race to check the cache) and compares with a sequential encoding.
func TestConcurrentEncode(t *testing.T) {
	tok := tinyTokenizer(t)
	g := readGolden(t, goldenTiny)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range g.Cases {
				c := g.Cases[(k*7+w*13)%len(g.Cases)]
				if got := tok.Encode(c.Text); !equalIDs(got, c.IDs) {
					errs <- c.Text
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent Encode(%q) differs from the golden ids", s)
	}
}

// expectedRoundTrip is what decode(encode(s)) must give for valid UTF-8 s:
// s with each stretch between added tokens put in NFC (added tokens are
// matched before normalization, so NFC never joins across them).
func expectedRoundTrip(tok *Tokenizer, s string) string {
	var contents []string
	for c := range tok.added {
		contents = append(contents, c)
	}
	// Longest first, so the first one found at a position is the longest.
	slices.SortFunc(contents, func(a, b string) int { return len(b) - len(a) })
	var out strings.Builder
	text := 0
	for i := 0; i < len(s); {
		found := ""
		for _, c := range contents {
			if strings.HasPrefix(s[i:], c) {
				found = c
				break
			}
		}
		if found == "" {
			i++
			continue
		}
		out.WriteString(norm.NFC.String(s[text:i]))
		out.WriteString(found)
		i += len(found)
		text = i
	}
	out.WriteString(norm.NFC.String(s[text:]))
	return out.String()
}

// FuzzEncode checks that no input panics and that decode(encode(s)) is s in
// NFC for valid UTF-8 (for the tiny tokenizer, whose added tokens have no
// strip or single-word options).
func FuzzEncode(f *testing.F) {
	tok := tinyTokenizer(f)
	for _, c := range readGolden(f, goldenTiny).Cases {
		f.Add(c.Text)
	}
	f.Add("\xff\xfe<|im_start|>\xe2\x82")
	f.Add("<|im_start|>\u0338 <\u0338")
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		dec := tok.Decode(ids)
		if !utf8.ValidString(s) {
			if !utf8.ValidString(dec) {
				t.Fatalf("Decode gave invalid UTF-8 for %q", s)
			}
			return
		}
		if want := expectedRoundTrip(tok, s); dec != want {
			t.Fatalf("decode(encode(%q)) = %q, want %q", s, dec, want)
		}
	})
}
