package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// MaxWordBytes is the longest pre-token (a run the pre-tokenizer does not
// split, such as letters without a space) that EncodeLimit tokenises: BPE
// holds some 40 bytes of work per byte of a word, so a longer one is refused
// instead (real text has no such runs; a 1 MiB word would already be some
// thousands of tokens).
const MaxWordBytes = 1 << 20

// LimitError is the error of [Tokenizer.EncodeLimit]: the text has more
// tokens than allowed, or a word too long to tokenise.
type LimitError struct {
	// Max is the limit asked for.
	Max int
	// AtLeast is a lower bound of the text's tokens, above Max (0 when the
	// reason is Word).
	AtLeast int
	// Word is the byte length of a pre-token over MaxWordBytes (0 when
	// the reason is AtLeast).
	Word int
}

// Error says which limit and what was found.
func (e *LimitError) Error() string {
	if e.Word > 0 {
		return fmt.Sprintf("a run of %d bytes without a break is more than the %d tokenised as one piece", e.Word, MaxWordBytes)
	}
	return fmt.Sprintf("at least %d tokens, more than %d", e.AtLeast, e.Max)
}

// MaxTokenBytes returns the most bytes of (normalized) text one token
// covers, or 0 when that is unbounded (unknown bytes fused into one token).
func (t *Tokenizer) MaxTokenBytes() int { return t.model.maxTokenBytes }

// maxTokenBytesOf computes MaxTokenBytes for the model built from vocab
// and the added tokens: a vocabulary token covers as many bytes as its
// byte-level string has characters (a byte-fallback token such as "<0x41>"
// covers fewer), an added token its content. Fused unknown bytes, and added
// tokens that swallow the whitespace beside them, have no bound.
func maxTokenBytesOf(m *bpeModel, vocab map[string]int32, added []addedTokenJSON) int {
	if !m.allBytes && m.fuseUnk && m.unkID >= 0 {
		return 0
	}
	n := 1
	for k := range vocab {
		n = max(n, utf8.RuneCountInString(k))
	}
	for _, a := range added {
		if a.Lstrip || a.Rstrip {
			return 0
		}
		if a.Content != nil {
			n = max(n, len(*a.Content))
		}
	}
	return n
}

// maxShrink bounds how much a normalizer shortens text (NFC composes a
// Hangul syllable from three 3-byte jamo; NFKC folds a 3-byte full-width
// letter to one byte).
const maxShrink = 4

// EncodeLimit returns what [Tokenizer.Encode] returns when s has at most
// max tokens, and a *LimitError otherwise. It stops as soon as it knows: a
// piece whose byte length alone implies more than the tokens left (every
// token covers at most MaxTokenBytes bytes) is not tokenised, nor is a word
// over MaxWordBytes, so text of any length costs at most about max tokens'
// work and memory.
func (t *Tokenizer) EncodeLimit(s string, max int) ([]int32, error) {
	mb := t.model.maxTokenBytes
	// more reports whether n bytes of text surely hold more tokens than the
	// `left` still allowed, with shrink the most normalization could
	// shorten them.
	more := func(n, left, shrink int) bool {
		return mb > 0 && n > (left+1)*mb*shrink
	}
	over := func(atLeast int) error { return &LimitError{Max: max, AtLeast: atLeast} }
	lowerBound := func(n, done int) int { return done + (n+mb-1)/mb }
	if more(len(s), max, maxShrink) {
		return nil, over(lowerBound(len(s)/maxShrink, 0))
	}
	s = toValidUTF8(s)
	out := make([]int32, 0, min(len(s)/3+4, max+1))
	text := func(text string) error {
		if more(len(text), max-len(out), 1) {
			return over(lowerBound(len(text), len(out)))
		}
		var err error
		out, err = t.encodeTextLimit(out, text, max)
		return err
	}
	var segBuf [8]segment
	for _, seg := range t.rawAdded.split(s, segBuf[:0]) {
		if seg.tok != nil {
			out = append(out, seg.tok.id)
		} else if txt := s[seg.start:seg.end]; txt != "" {
			if t.norm != nil {
				if more(len(txt), max-len(out), maxShrink) {
					return nil, over(lowerBound(len(txt)/maxShrink, len(out)))
				}
				txt = t.norm.normalize(txt)
			}
			if t.normAdded == nil {
				if err := text(txt); err != nil {
					return nil, err
				}
			} else {
				var inner [8]segment
				for _, sub := range t.normAdded.split(txt, inner[:0]) {
					if sub.tok != nil {
						out = append(out, sub.tok.id)
					} else if err := text(txt[sub.start:sub.end]); err != nil {
						return nil, err
					}
				}
			}
		}
		if len(out) > max {
			return nil, over(len(out))
		}
	}
	return out, nil
}

// encodeTextLimit is encodeText stopping once out holds more than max
// tokens, and refusing a word over MaxWordBytes.
func (t *Tokenizer) encodeTextLimit(out []int32, text string, max int) ([]int32, error) {
	word := func(w string) error {
		if len(w) > MaxWordBytes {
			return &LimitError{Max: max, Word: len(w)}
		}
		out = t.model.appendWord(out, w)
		if len(out) > max {
			return &LimitError{Max: max, AtLeast: len(out)}
		}
		return nil
	}
	if qm := t.pre.fast; qm != nil {
		for i := 0; i < len(text); {
			e := progress(text, i, qm.next(text, i))
			if err := word(text[i:e]); err != nil {
				return out, err
			}
			i = e
		}
		return out, nil
	}
	for _, p := range t.pre.pieces(text) {
		if err := word(p); err != nil {
			return out, err
		}
	}
	return out, nil
}
