package tokenizer

import (
	"sort"
	"sync"

	"golang.org/x/text/unicode/norm"
	"unicode"
	"unicode/utf8"
)

// Character classes used by the hand-written splitters. A rune's class is a
// set of these bits.
const (
	clsLetter  uint8 = 1 << iota // \p{L}
	clsNumber                    // \p{N}
	clsMark                      // \p{M}
	clsSpace                     // \s (Unicode White_Space, as Oniguruma and Go agree)
	clsNewline                   // \r or \n
	clsNotNFC                    // may change under NFC or combine with what precedes it
)

// bmpClasses holds the class of every rune of the Basic Multilingual Plane.
// It is built once, on first use, and never written again.
var bmpClasses = sync.OnceValue(func() *[0x10000]uint8 {
	var t [0x10000]uint8
	for r := rune(0); r < 0x10000; r++ {
		t[r] = classifySlow(r)
		if r >= 0x80 {
			s := string(r)
			if !norm.NFC.PropertiesString(s).BoundaryBefore() || norm.NFC.String(s) != s {
				t[r] |= clsNotNFC
			}
		}
	}
	return &t
})

// classRange gives the letter/number/mark class of the runes lo..hi.
type classRange struct {
	lo, hi rune
	cls    uint8
}

// classifySlow returns the class of r. Letters, numbers and marks follow
// Unicode 16.0, as the Oniguruma regex engine inside Hugging Face tokenizers
// does: Go's own tables (Unicode 15.0) with unicode16's corrections.
func classifySlow(r rune) uint8 {
	var c uint8
	k := sort.Search(len(unicode16), func(i int) bool { return unicode16[i].hi >= r })
	switch {
	case k < len(unicode16) && unicode16[k].lo <= r:
		c = unicode16[k].cls
	case unicode.IsLetter(r):
		c |= clsLetter
	case unicode.IsNumber(r):
		c |= clsNumber
	case unicode.IsMark(r):
		c |= clsMark
	}
	if unicode.IsSpace(r) {
		c |= clsSpace
	}
	if r == '\r' || r == '\n' {
		c |= clsNewline
	}
	return c
}

// classes is a rune classifier bound to the BMP table.
type classes struct {
	bmp *[0x10000]uint8
}

func newClasses() classes { return classes{bmp: bmpClasses()} }

// at decodes the rune starting at s[i] and returns its class and width in
// bytes. s must be valid UTF-8.
func (c classes) at(s string, i int) (uint8, int) {
	b := s[i]
	if b < utf8.RuneSelf {
		return c.bmp[b], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r < 0x10000 {
		return c.bmp[r], w
	}
	return classifySlow(r), w
}

// isNFC reports whether s is certainly in NFC: every rune is in the BMP, is
// unchanged by NFC and cannot combine with the rune before it. (A false
// answer means "look closer", not "not NFC".)
func (c classes) isNFC(s string) bool {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 || c.bmp[r]&clsNotNFC != 0 {
			return false
		}
		i += w
	}
	return true
}
