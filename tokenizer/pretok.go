package tokenizer

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites text before pre-tokenization.
type normalizer interface {
	normalize(s string) string
}

// unicodeNorm is one of the four Unicode normalization forms.
type unicodeNorm struct {
	form norm.Form
	cls  classes
}

func (n unicodeNorm) normalize(s string) string {
	if n.form == norm.NFC && n.cls.isNFC(s) {
		return s
	}
	if n.form.QuickSpanString(s) == len(s) {
		return s
	}
	return n.form.String(s)
}

// normSequence applies normalizers in order.
type normSequence []normalizer

func (seq normSequence) normalize(s string) string {
	for _, n := range seq {
		s = n.normalize(s)
	}
	return s
}

// preTokenizer splits normalized text into the pieces BPE runs on.
type preTokenizer struct {
	// fast is set when the whole pre-tokenizer is one Qwen-pattern Split
	// (Isolated, not inverted) and a plain ByteLevel: the matcher's matches
	// are the pieces.
	fast *qwenMatcher
	// Otherwise the stages run in order, each on every piece of the last.
	stages []stage
}

// stage is one pre-tokenizer step: it appends the pieces of s to dst.
type stage interface {
	split(s string, dst []string) []string
}

func (p *preTokenizer) pieces(text string) []string {
	cur := []string{text}
	for _, st := range p.stages {
		next := make([]string, 0, len(cur)*2)
		for _, s := range cur {
			next = st.split(s, next)
		}
		cur = next
	}
	return cur
}

// prefixSpaceStage is ByteLevel's add_prefix_space: a space is put before
// every piece that does not start with one.
type prefixSpaceStage struct{}

func (prefixSpaceStage) split(s string, dst []string) []string {
	if s == "" {
		return dst
	}
	if !strings.HasPrefix(s, " ") {
		s = " " + s
	}
	return append(dst, s)
}
