package tokenizer

import (
	"fmt"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// The split patterns that have a hand-written matcher. Go's RE2 has no
// look-ahead (the `\s+(?!\S)` alternative), and a backtracking engine is far
// slower than a matcher written for the one pattern.
const (
	// qwen2Pattern is the Qwen2 / Qwen3 pre-tokenizer split regex.
	qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// qwen35Pattern is the Qwen3.5 one: marks (\p{M}) count as letters.
	qwen35Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// llama3Pattern is the Llama 3 one: numbers in runs of up to three.
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// gpt2Pattern is the split applied by a ByteLevel pre-tokenizer with
	// use_regex set.
	gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// matcher finds the non-overlapping matches of a split pattern.
type matcher interface {
	// matches appends the [start, end) byte spans of the matches in s, in
	// order, to dst.
	matches(s string, dst [][2]int) [][2]int
}

// newMatcher returns the hand-written matcher for the Qwen and GPT-2 patterns
// and a regexp2 matcher for anything else. (regexp2 classifies characters with
// Go's Unicode 15.0 tables; the hand-written matchers follow Unicode 16.0, as
// Hugging Face's Oniguruma does.)
func newMatcher(pattern string, literal bool) (matcher, error) {
	if !literal {
		switch pattern {
		case qwen2Pattern:
			return &qwenMatcher{cls: newClasses(), digits: 1}, nil
		case qwen35Pattern:
			return &qwenMatcher{cls: newClasses(), marks: true, digits: 1}, nil
		case llama3Pattern:
			return &qwenMatcher{cls: newClasses(), digits: 3}, nil
		case gpt2Pattern:
			return &gpt2Matcher{cls: newClasses()}, nil
		}
	}
	expr := pattern
	if literal {
		expr = regexp2.Escape(pattern)
	}
	re, err := regexp2.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("compile split pattern %q: %w", pattern, err)
	}
	return regexMatcher{re: re}, nil
}

// regexMatcher runs any pattern through regexp2 (a backtracking engine with
// look-around, as Oniguruma has).
type regexMatcher struct {
	re *regexp2.Regexp
}

func (m regexMatcher) matches(s string, dst [][2]int) [][2]int {
	// Errors come only from timeouts and stack limits, neither of which is
	// set; with no result the whole text is left unsplit.
	idx, _ := m.re.FindAllStringIndex(s, -1)
	for _, p := range idx {
		dst = append(dst, [2]int{p[0], p[1]})
	}
	return dst
}

// qwenMatcher is the Qwen2/3 split pattern (with marks set, the Qwen3.5
// one; with digits 3, the Llama 3 one) written out by hand. Alternatives are tried in order at each position
// with the same backtracking outcome as the regex; see next.
type qwenMatcher struct {
	cls    classes
	marks  bool // Qwen3.5: \p{M} joins \p{L} in the letter run and leaves the punctuation class
	digits int  // the most numbers in one match: 1 (Qwen), 3 (Llama 3)
}

func (m *qwenMatcher) matches(s string, dst [][2]int) [][2]int {
	for i := 0; i < len(s); {
		e := progress(s, i, m.next(s, i))
		dst = append(dst, [2]int{i, e})
		i = e
	}
	return dst
}

// next returns the end of the match that starts at s[i]; every position
// starts a match, because the alternatives together cover every character.
// s must be valid UTF-8.
func (m *qwenMatcher) next(s string, i int) int {
	c0, w0 := m.cls.at(s, i)
	b := s[i]

	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if b == '\'' && i+1 < len(s) {
		if n := contraction(s[i+1:]); n > 0 {
			return i + 1 + n
		}
	}

	body := clsLetter
	punctExcl := clsSpace | clsLetter | clsNumber
	if m.marks {
		body |= clsMark
		punctExcl |= clsMark
	}

	// [^\r\n\p{L}\p{N}]?\p{L}+ (Qwen3.5: [\p{L}\p{M}]+)
	if c0&(clsNewline|clsLetter|clsNumber) == 0 && i+w0 < len(s) {
		if c1, _ := m.cls.at(s, i+w0); c1&body != 0 {
			return m.run(s, i+w0, body)
		}
	}
	if c0&body != 0 {
		return m.run(s, i, body)
	}

	// \p{N} (Llama 3: \p{N}{1,3})
	if c0&clsNumber != 0 {
		e := i + w0
		for k := 1; k < m.digits && e < len(s); k++ {
			c, w := m.cls.at(s, e)
			if c&clsNumber == 0 {
				break
			}
			e += w
		}
		return e
	}

	// ` ?[^\s\p{L}\p{N}]+[\r\n]*` (Qwen3.5 also leaves out \p{M})
	j := i
	if b == ' ' {
		j = i + 1
	}
	if j < len(s) {
		if c, _ := m.cls.at(s, j); c&punctExcl == 0 {
			e := m.runNot(s, j, punctExcl)
			for e < len(s) && (s[e] == '\r' || s[e] == '\n') {
				e++
			}
			return e
		}
	}

	if c0&clsSpace != 0 {
		// The whitespace run s[i:end]; lastNL is just past its last \r or \n,
		// lastStart is where its last character starts.
		end, lastNL, lastStart, count := i, -1, i, 0
		for end < len(s) {
			c, w := m.cls.at(s, end)
			if c&clsSpace == 0 {
				break
			}
			if c&clsNewline != 0 {
				lastNL = end + w
			}
			lastStart = end
			end += w
			count++
		}
		// \s*[\r\n]+: backtracking leaves the match just past the run's last
		// line break.
		if lastNL >= 0 {
			return lastNL
		}
		// \s+(?!\S): the whole run at the end of the text, else the run less
		// its last character (which the next match then starts with).
		if end == len(s) {
			return end
		}
		if count >= 2 {
			return lastStart
		}
		// \s+
		return end
	}
	// Not reached for valid UTF-8: every character is a letter, number,
	// space or falls in the punctuation class.
	return i + w0
}

// progress returns e, or the end of the character at s[i] if e would not
// move past i: a safeguard against a matcher bug looping forever.
func progress(s string, i, e int) int {
	if e > i {
		return e
	}
	_, w := utf8.DecodeRuneInString(s[i:])
	return i + w
}

// gpt2Matcher is the split pattern of a ByteLevel pre-tokenizer with
// use_regex (GPT-2's) written out by hand, like qwenMatcher.
type gpt2Matcher struct {
	cls classes
}

func (m *gpt2Matcher) matches(s string, dst [][2]int) [][2]int {
	q := qwenMatcher{cls: m.cls}
	for i := 0; i < len(s); {
		e := progress(s, i, m.next(&q, s, i))
		dst = append(dst, [2]int{i, e})
		i = e
	}
	return dst
}

// next returns the end of the match that starts at s[i].
func (m *gpt2Matcher) next(q *qwenMatcher, s string, i int) int {
	// 's|'t|'re|'ve|'m|'ll|'d (case-sensitive)
	if s[i] == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		case 'r', 'v':
			if i+2 < len(s) && s[i+2] == 'e' {
				return i + 3
			}
		case 'l':
			if i+2 < len(s) && s[i+2] == 'l' {
				return i + 3
			}
		}
	}
	//  ?\p{L}+|  ?\p{N}+|  ?[^\s\p{L}\p{N}]+
	j := i
	if s[i] == ' ' {
		j = i + 1
	}
	if j < len(s) {
		c, _ := m.cls.at(s, j)
		switch {
		case c&clsLetter != 0:
			return q.run(s, j, clsLetter)
		case c&clsNumber != 0:
			return q.run(s, j, clsNumber)
		case c&clsSpace == 0:
			return q.runNot(s, j, clsSpace|clsLetter|clsNumber)
		}
	}
	// \s+(?!\S)|\s+
	end, lastStart, count := i, i, 0
	for end < len(s) {
		c, w := m.cls.at(s, end)
		if c&clsSpace == 0 {
			break
		}
		lastStart = end
		end += w
		count++
	}
	switch {
	case count == 0: // not reached: every character is in one class
		_, w := m.cls.at(s, i)
		return i + w
	case end == len(s) || count == 1:
		return end
	default:
		return lastStart
	}
}

// run returns the end of the run of characters in class set want starting at i.
func (m *qwenMatcher) run(s string, i int, want uint8) int {
	for i < len(s) {
		c, w := m.cls.at(s, i)
		if c&want == 0 {
			break
		}
		i += w
	}
	return i
}

// runNot returns the end of the run of characters in none of the classes
// excl, starting at i.
func (m *qwenMatcher) runNot(s string, i int, excl uint8) int {
	for i < len(s) {
		c, w := m.cls.at(s, i)
		if c&excl != 0 {
			break
		}
		i += w
	}
	return i
}

// contraction returns the length of the case-insensitive contraction suffix
// (s, t, re, ve, m, ll, d) at the start of s, or 0. As in Oniguruma's Unicode
// case folding, U+017F (long s) matches s.
func contraction(s string) int {
	lower := func(b byte) byte { return b | 0x20 }
	switch lower(s[0]) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) > 1 && lower(s[1]) == 'e' {
			return 2
		}
	case 'l':
		if len(s) > 1 && lower(s[1]) == 'l' {
			return 2
		}
	}
	if len(s) > 1 && s[0] == 0xC5 && s[1] == 0xBF { // ſ
		return 2
	}
	return 0
}

// splitBehavior is what a Split pre-tokenizer does with the matched spans.
type splitBehavior int

const (
	behaviorIsolated splitBehavior = iota
	behaviorRemoved
	behaviorMergedWithPrevious
	behaviorMergedWithNext
	behaviorContiguous
)

func parseBehavior(s string) (splitBehavior, error) {
	switch s {
	case "Isolated":
		return behaviorIsolated, nil
	case "Removed":
		return behaviorRemoved, nil
	case "MergedWithPrevious":
		return behaviorMergedWithPrevious, nil
	case "MergedWithNext":
		return behaviorMergedWithNext, nil
	case "Contiguous":
		return behaviorContiguous, nil
	}
	return 0, fmt.Errorf("unknown split behavior %q", s)
}

// span is a piece of text and whether it was a match of the pattern.
type span struct {
	start, end int
	match      bool
}

// splitStage is one Split pre-tokenizer.
type splitStage struct {
	m        matcher
	behavior splitBehavior
	invert   bool
}

// split appends the non-empty pieces of s to dst, as Hugging Face's
// NormalizedString::split does for the stage's behavior.
func (st *splitStage) split(s string, dst []string) []string {
	if s == "" {
		return dst
	}
	// Matches and the gaps between them, flagged (flags flipped by invert).
	var spans []span
	prev := 0
	for _, p := range st.m.matches(s, nil) {
		if prev != p[0] {
			spans = append(spans, span{prev, p[0], st.invert})
		}
		spans = append(spans, span{p[0], p[1], !st.invert})
		prev = p[1]
	}
	if prev != len(s) {
		spans = append(spans, span{prev, len(s), st.invert})
	}

	var out []span // pieces; match marks a piece to remove
	switch st.behavior {
	case behaviorIsolated:
		for _, sp := range spans {
			out = append(out, span{sp.start, sp.end, false})
		}
	case behaviorRemoved:
		out = spans
	case behaviorContiguous:
		prevMatch := false
		for _, sp := range spans {
			if sp.match == prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prevMatch = sp.match
		}
	case behaviorMergedWithPrevious:
		prevMatch := false
		for _, sp := range spans {
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prevMatch = sp.match
		}
	case behaviorMergedWithNext:
		prevMatch := false
		for k := len(spans) - 1; k >= 0; k-- {
			sp := spans[k]
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].start = sp.start
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prevMatch = sp.match
		}
		for a, z := 0, len(out)-1; a < z; a, z = a+1, z-1 {
			out[a], out[z] = out[z], out[a]
		}
	}
	for _, sp := range out {
		if !sp.match && sp.end > sp.start {
			dst = append(dst, s[sp.start:sp.end])
		}
	}
	return dst
}
