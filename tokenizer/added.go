package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens, with the id
// Hugging Face gives it.
type addedToken struct {
	content    string
	id         int32
	singleWord bool
	lstrip     bool
	rstrip     bool
	normalized bool
	special    bool
}

// addedMatcher finds added tokens in text the way Hugging Face's
// AddedVocabulary does: leftmost-longest matches of the token contents,
// non-overlapping, then single_word / lstrip / rstrip applied to each.
type addedMatcher struct {
	// byFirst lists, for each first byte, the patterns that start with it,
	// longest first.
	byFirst [256][]addedPattern
}

type addedPattern struct {
	text string
	tok  *addedToken
}

func newAddedMatcher(pats []addedPattern) *addedMatcher {
	if len(pats) == 0 {
		return nil
	}
	m := &addedMatcher{}
	for _, p := range pats {
		if p.text == "" {
			continue
		}
		b := p.text[0]
		m.byFirst[b] = append(m.byFirst[b], p)
	}
	for b := range m.byFirst {
		l := m.byFirst[b]
		sort.SliceStable(l, func(i, j int) bool { return len(l[i].text) > len(l[j].text) })
	}
	return m
}

// find returns the leftmost-longest match in s at or after from.
func (m *addedMatcher) find(s string, from int) (start, end int, tok *addedToken) {
	for i := from; i < len(s); i++ {
		for _, p := range m.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], p.text) {
				return i, i + len(p.text), p.tok
			}
		}
	}
	return -1, -1, nil
}

// segment is a piece of text; tok is the added token it is, or nil for
// ordinary text.
type segment struct {
	start, end int
	tok        *addedToken
}

// split appends the segments of s to dst: added-token matches and the text
// between them (Hugging Face's AddedVocabulary::find_matches).
func (m *addedMatcher) split(s string, dst []segment) []segment {
	if m == nil {
		return append(dst, segment{0, len(s), nil})
	}
	startOffset := 0
	for pos := 0; pos < len(s); {
		start, stop, tok := m.find(s, pos)
		if tok == nil {
			break
		}
		pos = stop
		if tok.singleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if tok.lstrip {
			start = max(spaceLeftmostAtEnd(s[:start]), startOffset)
		}
		if tok.rstrip {
			stop += spaceRightmostAtStart(s[stop:])
		}
		// A match inside the spaces an earlier rstrip took is dropped; Hugging
		// Face would emit overlapping pieces here.
		if start < startOffset {
			continue
		}
		if startOffset < start {
			dst = append(dst, segment{startOffset, start, nil})
		}
		dst = append(dst, segment{start, stop, tok})
		startOffset = stop
		pos = max(pos, stop)
	}
	if startOffset != len(s) {
		dst = append(dst, segment{startOffset, len(s), nil})
	}
	return dst
}

// isWordRune reports whether r is in the Rust regex crate's Unicode \w
// (Unicode 16.0: the runes unicode16 corrects are letters, marks and decimal
// digits).
func isWordRune(r rune) bool {
	if k := sort.Search(len(unicode16), func(i int) bool { return unicode16[i].hi >= r }); k < len(unicode16) && unicode16[k].lo <= r {
		return unicode16[k].cls != 0
	}
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordRune(r)
}

// spaceLeftmostAtEnd returns where the whitespace at the end of s starts.
func spaceLeftmostAtEnd(s string) int {
	i := len(s)
	for i > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= w
	}
	return i
}

// spaceRightmostAtStart returns the length of the whitespace starting s.
func spaceRightmostAtStart(s string) int {
	i := 0
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += w
	}
	return i
}
