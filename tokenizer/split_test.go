package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dlclark/regexp2/v2"
)

// randomText returns a string of n pieces drawn from an alphabet rich in the
// cases the split patterns distinguish.
func randomText(r *rand.Rand, n int) string {
	alpha := []string{"a", "Z", "é", "e\u0301", "\u0301", "\u094d", "क", "ß", "'", "'s", "'T", "'re", "'Ve", "'LL", "'m", "'D", "'x",
		" ", " ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u2003", "\u3000", "\u2028", "\u0085", "\v", "\f", "\u200b", "\ufeff",
		"1", "42", "1234567", "٣", "½", "Ⅻ", ".", ",", "!", "-", "_", "(", "\"", "<", "|", "你", "好", "カ", "한", "я", "😀", "👍🏽"}
	var b strings.Builder
	for range n {
		b.WriteString(alpha[r.IntN(len(alpha))])
	}
	return b.String()
}

// TestHandMatchersAgainstRegexp2 runs the hand-written matchers and regexp2 on
// the same texts: the match spans must agree. (regexp2 follows .NET's case
// folding, in which "ſ" does not match "s", and Go's Unicode 15.0 tables, so
// the texts avoid "ſ" and later characters; see TestContractionLongS and
// TestUnicode16.)
func TestHandMatchersAgainstRegexp2(t *testing.T) {
	var texts []string
	for _, name := range []string{goldenTiny, goldenQwen3WithQwen35Splits} {
		for _, c := range readGolden(t, name).Cases {
			texts = append(texts, c.Text)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		texts = append(texts, randomText(r, 1+r.IntN(30)))
	}
	for _, pat := range []string{qwen2Pattern, qwen35Pattern, llama3Pattern, gpt2Pattern} {
		hand, err := newMatcher(pat, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := hand.(regexMatcher); ok {
			t.Fatalf("pattern %q did not get a hand-written matcher", pat)
		}
		re := regexMatcher{re: regexp2.MustCompile(pat)}
		bad := 0
		for _, s := range texts {
			if strings.Contains(s, "ſ") {
				continue
			}
			got, want := hand.matches(s, nil), re.matches(s, nil)
			if !slices.Equal(got, want) {
				bad++
				if bad < 5 {
					t.Errorf("%q:\n hand  %v\n regex %v", s, got, want)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%d of %d texts split differently", bad, len(texts))
		}
	}
}

// TestUnicode16 checks classes of characters added after Unicode 15.0 (Go's
// tables), which Hugging Face's Oniguruma (Unicode 16.0) knows: on the device
// HF tokenizers 0.23.2 split "𮯰'db" as "𮯰", "'d", "b".
func TestUnicode16(t *testing.T) {
	c := newClasses()
	tests := []struct {
		r    rune
		want uint8
	}{
		{0x2EBF0, clsLetter}, // CJK Extension I (15.1)
		{0x10D50, clsLetter}, // Garay letter (16.0)
		{0x1E5D0, clsLetter}, // Ol Onal letter (16.0)
		{0x10D40, clsNumber}, // Garay digit zero (16.0)
		{0x1E5EE, clsMark},   // Ol Onal sign (16.0)
		{0x11F00, clsMark},   // Kawi sign (15.0, Go knows it)
		{0x4E00, clsLetter},  // unchanged
		{0x323B0, 0},         // CJK Extension J is Unicode 17.0: not yet
	}
	for _, tt := range tests {
		s := string(tt.r)
		if got, _ := c.at(s, 0); got&(clsLetter|clsNumber|clsMark) != tt.want {
			t.Errorf("U+%04X: class %b, want %b", tt.r, got, tt.want)
		}
	}
	m := &qwenMatcher{cls: c, digits: 1}
	if got := m.matches("\U0002EBF0'db", nil); !slices.Equal(got, [][2]int{{0, 4}, {4, 6}, {6, 7}}) {
		t.Errorf("split %v", got)
	}
}

// TestContractionLongS: Oniguruma's Unicode case folding lets "'ſ" match
// "'s" (seen in Hugging Face tokenizers 0.23.2 output: "'ſ" is one piece).
func TestContractionLongS(t *testing.T) {
	m := &qwenMatcher{cls: newClasses(), digits: 1}
	got := m.matches("'ſa'Sb", nil)
	want := [][2]int{{0, 3}, {3, 4}, {4, 6}, {6, 7}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestSplitBehaviors uses the cases of Hugging Face's own Split tests: the
// pattern \w+|[^\w\s]+ inverted, so the spaces are the matches.
func TestSplitBehaviors(t *testing.T) {
	m, err := newMatcher(`\w+|[^\w\s]+`, false)
	if err != nil {
		t.Fatal(err)
	}
	const s = "How are you doing?"
	tests := []struct {
		b    splitBehavior
		want []string
	}{
		{behaviorRemoved, []string{"How", "are", "you", "doing", "?"}},
		{behaviorIsolated, []string{"How", " ", "are", " ", "you", " ", "doing", "?"}},
		{behaviorMergedWithPrevious, []string{"How ", "are ", "you ", "doing", "?"}},
		{behaviorMergedWithNext, []string{"How", " are", " you", " doing", "?"}},
		{behaviorContiguous, []string{"How", " ", "are", " ", "you", " ", "doing?"}},
	}
	for _, tt := range tests {
		st := &splitStage{m: m, behavior: tt.b, invert: true}
		if got := st.split(s, nil); !slices.Equal(got, tt.want) {
			t.Errorf("behavior %d: %q, want %q", tt.b, got, tt.want)
		}
	}
	// A literal pattern, not inverted, removed.
	lit, err := newMatcher("a.b", true)
	if err != nil {
		t.Fatal(err)
	}
	st := &splitStage{m: lit, behavior: behaviorRemoved}
	if got := st.split("xa.byaxb", nil); !slices.Equal(got, []string{"x", "yaxb"}) {
		t.Errorf("literal split: %q", got)
	}
}

// TestGPT2ByteLevel checks a ByteLevel pre-tokenizer that splits with its own
// regex and adds a prefix space (the GPT-2 configuration) on a small vocab.
func TestGPT2ByteLevel(t *testing.T) {
	m := minimalJSON()
	m["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true}
	tok, err := fromMap(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if tok.pre.fast != nil {
		t.Fatal("GPT-2 configuration took the Qwen fast path")
	}
	// "the" gets a prefix space and becomes "Ġthe"; the regex keeps "'s"
	// apart and the spaces before the last word: "  x" -> " " + " x".
	got := tok.Encode("the's  x")
	want := []int32{258, '\'', 's', ' ', ' ', 'x'}
	if !equalIDs(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}
