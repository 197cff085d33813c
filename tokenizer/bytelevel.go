package tokenizer

import "unicode/utf8"

// byteLevelChars returns the GPT-2 byte-level alphabet: the character that
// stands for each byte in a byte-level vocabulary. Printable Latin-1 bytes
// stand for themselves; the rest are shifted to U+0100 and up, in byte order.
func byteLevelChars() [256]rune {
	var m [256]rune
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n := 0
	for b := 0; b < 256; b++ {
		if printable(b) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}

// byteLevelDecoder maps byte-level characters back to bytes.
type byteLevelDecoder map[rune]byte

func newByteLevelDecoder() byteLevelDecoder {
	d := make(byteLevelDecoder, 256)
	for b, r := range byteLevelChars() {
		d[r] = byte(b)
	}
	return d
}

// bytes returns the bytes a token string stands for, and false if some
// character of it is outside the byte-level alphabet.
func (d byteLevelDecoder) bytes(tok string) ([]byte, bool) {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := d[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// appendLossy appends src to dst with every ill-formed UTF-8 sequence replaced
// by U+FFFD, one replacement per maximal subpart (the Unicode recommendation,
// which Rust's String::from_utf8_lossy and Python's "replace" follow).
func appendLossy(dst []byte, src []byte) []byte {
	for i := 0; i < len(src); {
		b := src[i]
		if b < utf8.RuneSelf {
			dst = append(dst, b)
			i++
			continue
		}
		r, w := utf8.DecodeRune(src[i:])
		if r != utf8.RuneError || w > 1 {
			dst = append(dst, src[i:i+w]...)
			i += w
			continue
		}
		dst = append(dst, "\uFFFD"...)
		i += maximalSubpart(src[i:])
	}
	return dst
}

// maximalSubpart returns the length of the longest prefix of s (which starts
// with an ill-formed sequence) that is a prefix of some well-formed sequence,
// or 1 if there is none.
func maximalSubpart(s []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	var need int
	switch b := s[0]; {
	case b >= 0xC2 && b <= 0xDF:
		need = 1
	case b == 0xE0:
		need, lo = 2, 0xA0
	case b >= 0xE1 && b <= 0xEC, b == 0xEE, b == 0xEF:
		need = 2
	case b == 0xED:
		need, hi = 2, 0x9F
	case b == 0xF0:
		need, lo = 3, 0x90
	case b >= 0xF1 && b <= 0xF3:
		need = 3
	case b == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(s); k++ {
		c := s[n]
		if c < lo || c > hi {
			break
		}
		n++
		lo, hi = 0x80, 0xBF
	}
	return n
}

// toValidUTF8 returns s with ill-formed sequences replaced as appendLossy does.
func toValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string(appendLossy(make([]byte, 0, len(s)+8), []byte(s)))
}
