package tokenizer

import (
	"sync"
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
)

// bmpClasses holds the class of every rune of the Basic Multilingual Plane.
// It is built once, on first use, and never written again.
var bmpClasses = sync.OnceValue(func() *[0x10000]uint8 {
	var t [0x10000]uint8
	for r := rune(0); r < 0x10000; r++ {
		t[r] = classifySlow(r)
	}
	return &t
})

func classifySlow(r rune) uint8 {
	var c uint8
	switch {
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
