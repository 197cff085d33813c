package tokenizertest

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// TestMixedText checks that the text is deterministic, about as long as
// asked, valid UTF-8, and holds each kind of text it promises.
func TestMixedText(t *testing.T) {
	const n = 200_000
	s := MixedText(n)
	if s != MixedText(n) {
		t.Fatal("two calls gave different text")
	}
	if len(s) < n || len(s) > n+4096 {
		t.Errorf("%d bytes, want about %d", len(s), n)
	}
	if !utf8.ValidString(s) {
		t.Error("not valid UTF-8")
	}
	for _, want := range []string{"func (t *Tokenizer)", `"score": `, "的", "привет", "👍🏽", "<|im_start|>assistant\n", "\r\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in the text", want)
		}
	}
	if norm.NFC.IsNormalString(s) {
		t.Error("the text is already NFC: the tokenizer's normaliser has nothing to do")
	}
}
