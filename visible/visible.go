// Package visible decides which characters a person is not shown where they stand, and shows
// text with each of them marked. Every place that shows a person a value the gate decides on —
// the gateway's forms and review texts, the console, prior values, approvals, tool errors —
// goes through [Hidden] and [Mark], so that what a person approves is all of what is bound.
//
// The core of the rule is Unicode's Default_Ignorable_Code_Point property ([DefaultIgnorable]):
// characters a renderer draws as nothing when it does not support them, and often when it does
// (zero-width characters, variation selectors, tag characters, Hangul fillers, bidirectional
// controls). A value made of "December rent. Thanks!" and 45 variation selectors looks like the
// first part alone; the selectors still reach the tool.
package visible

import (
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// ZWJ is the zero width joiner, which joins emoji into one picture (a family, a flag).
const ZWJ = '\u200D'

// DefaultIgnorable reports whether r has the Default_Ignorable_Code_Point property, derived from
// the standard library's Unicode tables (unicode.Version) as DerivedCoreProperties.txt derives it:
//
//	Other_Default_Ignorable_Code_Point + Cf + Variation_Selector
//	− White_Space − U+FFF9..FFFB (interlinear annotation)
//	− U+13430..1343F (Egyptian hieroglyph format controls) − Prepended_Concatenation_Mark
//
// The tables, not a list written here, say which code points these are, so a Go release with a
// newer Unicode version brings its new members. TestDefaultIgnorableTable holds the derivation
// to the published list.
func DefaultIgnorable(r rune) bool {
	if r < 0xAD { // the first member is U+00AD SOFT HYPHEN
		return false
	}
	if !unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Cf, unicode.Variation_Selector) {
		return false
	}
	switch {
	case r >= 0xFFF9 && r <= 0xFFFB, r >= 0x13430 && r <= 0x1343F:
		return false
	}
	return !unicode.In(r, unicode.White_Space, unicode.Prepended_Concatenation_Mark)
}

// Hidden reports whether r would not be seen where it stands, or would change how what follows
// it is seen:
//
//   - default-ignorable code points (see [DefaultIgnorable]), bidirectional controls among them;
//   - every other format character except the prepended concatenation marks, which Unicode
//     requires to be drawn (the interlinear annotation characters hide the text they enclose);
//   - controls other than newline and tab, and the line and paragraph separators;
//   - private-use code points, surrogates, noncharacters and code points Unicode has not
//     assigned (unicode.Version): no two hosts agree on what they look like, if anything;
//   - U+2800 BRAILLE PATTERN BLANK, a symbol drawn as a blank that no property above covers.
//
// A literal U+FFFD is drawn (as the replacement character); invalid UTF-8 is marked by [Mark]
// byte by byte.
func Hidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7F:
		return true
	case r < 0xA0:
		return r >= 0x80 // C1 controls
	case r <= 0xFFFF:
		return hiddenBMP()[r/64]&(1<<(r%64)) != 0
	}
	return hidden(r)
}

// hiddenBMP is Hidden for the Basic Multilingual Plane, one bit a code point, worked out from
// the tables once, on first use: grounding and marking ask it of every rune of a text, and
// the tables cost tens of nanoseconds a rune (a segment of Han text spent more on them than a
// whole preflight takes).
var hiddenBMP = sync.OnceValue(func() *[0x10000 / 64]uint64 {
	var t [0x10000 / 64]uint64
	for r := rune(0); r <= 0xFFFF; r++ {
		if hidden(r) {
			t[r/64] |= 1 << (r % 64)
		}
	}
	return &t
})

// hidden is Hidden from the tables, for a code point past U+009F.
func hidden(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return false
	case r == 0x2800:
		return true
	}
	if DefaultIgnorable(r) {
		return true
	}
	if unicode.In(r, unicode.Cf) {
		return !unicode.Is(unicode.Prepended_Concatenation_Mark, r)
	}
	return unicode.In(r, unicode.Cc, unicode.Co, unicode.Cs, unicode.Zl, unicode.Zp, unicode.Noncharacter_Code_Point) ||
		!assigned(r)
}

// assigned reports whether Unicode (unicode.Version) assigns r: whether its general category is
// one of L, M, N, P, S, Z, Cc, Cf, Co and Cs. (unicode.C also holds Cn, the unassigned.)
func assigned(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z,
		unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// Mark is s as a person should be shown it: every hidden rune (see [Hidden]) replaced by a mark
// naming its code point, ⟦U+200B⟧, and every byte that is not UTF-8 by ⟦byte 0xff⟧, so that
// nothing in the text is invisible or reorders what follows. n is how many were marked.
// Newlines and tabs are kept as they are.
func Mark(s string) (shown string, n int) { return mark(s, false) }

// Text is s as a person is shown it: [Mark]'s text, without the count. A bidirectional
// override reorders what a host displays (so "pay 100" can show as something else), zero-width
// characters and variation selectors hide text, and a person approves what they can see.
func Text(s string) string {
	t, _ := mark(s, false)
	return t
}

// Line is [Text] for a value quoted inside a line of someone else's (a value from last time,
// what an approval approves): it marks newlines and tabs as well, so that the value cannot begin
// a line of its own that reads as theirs.
func Line(s string) string {
	t, _ := mark(s, true)
	return t
}

func mark(s string, line bool) (string, int) {
	i := firstToMark(s, line)
	if i == len(s) {
		return s, 0
	}
	n := 0
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n++
			fmt.Fprintf(&b, "⟦byte %#02x⟧", s[i])
		case Hidden(r) || line && (r == '\n' || r == '\t'):
			n++
			fmt.Fprintf(&b, "⟦U+%04X⟧", r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String(), n
}

// firstToMark is the byte offset of the first rune of s that mark replaces, or len(s).
func firstToMark(s string, line bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && (line || c != '\n' && c != '\t') || c == 0x7F {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || Hidden(r) {
			return i
		}
		i += size
	}
	return len(s)
}

// Count is the number of runes and invalid bytes of s that [Mark] marks.
func Count(s string) int {
	_, n := mark(s, false)
	return n
}
