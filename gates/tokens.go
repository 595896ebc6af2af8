package gates

import (
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// Token boundaries decide where a located span may start and end (docs/grounding.md). A value
// grounds only from whole tokens the user typed: a span whose start or end falls inside a token
// would ground a piece of it — 1500 out of 15000, the account 330-000-001 out of 330-000-0015 —
// which is a value the user never typed.
//
// The rule is built on Unicode word boundaries (UAX #29, as package uniseg implements them),
// with three changes, each in the direction of refusing:
//
//   - a run of joiners (see isJoiner) with a letter or digit on both sides holds one token
//     together, so 110-222-333, ann.lee@example.com and a/b+c are one token each;
//   - between two characters of a script written without spaces between words (Han, Hiragana,
//     Katakana, Thai, Lao, Khmer, Myanmar) no span may start or end: UAX #29 does not find the
//     words there, and a guess could cut a name in two;
//   - a character the user does not see (unseen: the default-ignorable code points such as
//     zero-width characters, variation selectors, tags and fillers, and the other characters
//     visible.Hidden marks — controls, private-use, unassigned — but the carriage return)
//     neither separates two tokens the user sees nor joins them: every rule is applied to the
//     segment as the user sees it, without them (codePoints.seenSpan), and no span may hold
//     one or start or end beside one. Text pasted
//     into the user's words with an invisible character inside a number or a name cannot make a
//     piece of what they see a whole token, nor hide a scale word after a number;
//
// and one in the direction of grounding, where UAX #29 keeps a number and the letters after it
// together although they are separate words:
//
//   - a digit beside a letter of a CJK script (Han, Hiragana, Katakana, Hangul) is a token
//     edge, so 15000 grounds from 15000원을 (a number, the won unit and a particle).

// maxJoinerRun bounds how far one check walks over joiners or combining marks; a longer run is
// treated as holding the token together (refused, never grounded), so that a check costs O(1)
// however the text is built.
const maxJoinerRun = 32

// isJoiner reports whether r is one of the characters that hold an identifier together when a
// letter or digit stands on both sides: a-b, a_b, a.b, a@b, a/b, a+b, a:b, a'b, a\b.
func isJoiner(r rune) bool {
	switch r {
	case '-', '_', '.', '@', '/', '+', ':', '\'', '\\',
		'\u2010', // hyphen
		'\u2011', // non-breaking hyphen
		'\u2019': // right single quotation mark, typed as an apostrophe
		return true
	}
	return false
}

// isWordChar is a letter, a digit (any number) or a combining mark.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r)
}

// noSpaceScript reports whether r belongs to a script written without spaces between words.
func noSpaceScript(r rune) bool {
	if r < 0x0E00 { // below Thai: Latin, Greek, Cyrillic, Arabic, Indic, …
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana,
		unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar) ||
		r == '\u30FC' // the prolonged sound mark, written inside Japanese words
}

// cjkLetter reports whether r is a letter of a CJK script, beside which a digit ends a token.
func cjkLetter(r rune) bool {
	if r < 0x1100 {
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// len is the number of code points of the segment.
func (cp *codePoints) len() int {
	if cp.ascii {
		return len(cp.textv)
	}
	return len(cp.start) - 1
}

// at is the code point at index i (0 <= i < len); an invalid byte reads as utf8.RuneError.
func (cp *codePoints) at(i int) rune {
	if cp.ascii {
		return rune(cp.textv[i])
	}
	r, _ := utf8.DecodeRuneInString(cp.textv[cp.start[i]:cp.start[i+1]])
	return r
}

// buildWords records the UAX #29 word boundaries of the segment, once, on the first check
// that needs them: bit i is set when a boundary lies before code point i.
func (cp *codePoints) buildWords() {
	n := cp.len()
	cp.words = make([]uint64, n/64+1)
	set := func(i int) { cp.words[i/64] |= 1 << (i % 64) }
	set(0)
	i, rest, state := 0, cp.textv, -1
	for len(rest) > 0 {
		var w string
		w, rest, state = uniseg.FirstWordInString(rest, state)
		if cp.ascii {
			i += len(w)
		} else {
			i += utf8.RuneCountInString(w)
		}
		set(i)
	}
}

// wordBoundary reports whether UAX #29 puts a word boundary before code point p.
func (cp *codePoints) wordBoundary(p int) bool {
	if cp.ascii {
		return asciiWordBoundary(cp.textv, p)
	}
	if cp.words == nil { // never empty once built: it holds at least the bit for offset 0
		cp.buildWords()
	}
	return cp.words[p/64]&(1<<(p%64)) != 0
}

// ASCII text has a fast path. The UAX #29 rules that can apply to ASCII alone look at most two
// characters on either side of a position, so a check needs no pass over the segment; uniseg's
// pass costs about 30 ns a byte, which for a 200-argument request (one segment of 3 KB) was more
// than a tenth of the whole preflight (BenchmarkPreflightSlots, BenchmarkGroundToken).
// TestASCIIWordBoundary holds this to uniseg on every short string over every ASCII class.

// wbClass is the Word_Break property of an ASCII character.
type wbClass uint8

const (
	wbOther wbClass = iota
	wbCR
	wbLF
	wbNewline
	wbSpace // WSegSpace
	wbLetter
	wbNumeric
	wbExtendNumLet
	wbMidNumLet
	wbMidLetter
	wbMidNum
	wbSingleQuote
)

func asciiClass(c byte) wbClass {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return wbLetter
	case c >= '0' && c <= '9':
		return wbNumeric
	}
	switch c {
	case '\r':
		return wbCR
	case '\n':
		return wbLF
	case '\v', '\f':
		return wbNewline
	case ' ':
		return wbSpace
	case '_':
		return wbExtendNumLet
	case '.':
		return wbMidNumLet
	case ':':
		return wbMidLetter
	case ',', ';':
		return wbMidNum
	case '\'':
		return wbSingleQuote
	}
	return wbOther
}

// asciiWordBoundary reports whether UAX #29 puts a word boundary before byte p of the ASCII
// text s (0 < p < len(s)), rule by rule (WB3 to WB13b; the rest cannot apply to ASCII).
func asciiWordBoundary(s string, p int) bool {
	a, b := asciiClass(s[p-1]), asciiClass(s[p])
	midLetter := func(c wbClass) bool { return c == wbMidLetter || c == wbMidNumLet || c == wbSingleQuote }
	midNum := func(c wbClass) bool { return c == wbMidNum || c == wbMidNumLet || c == wbSingleQuote }
	before := func() wbClass { // the class two characters back
		if p >= 2 {
			return asciiClass(s[p-2])
		}
		return wbOther
	}
	after := func() wbClass { // the class one character ahead
		if p+1 < len(s) {
			return asciiClass(s[p+1])
		}
		return wbOther
	}
	switch {
	case a == wbCR && b == wbLF: // WB3
		return false
	case a == wbCR || a == wbLF || a == wbNewline, b == wbCR || b == wbLF || b == wbNewline: // WB3a, WB3b
		return true
	case a == wbSpace && b == wbSpace: // WB3d
		return false
	case a == wbLetter && b == wbLetter: // WB5
		return false
	case a == wbLetter && midLetter(b) && after() == wbLetter: // WB6
		return false
	case midLetter(a) && b == wbLetter && before() == wbLetter: // WB7
		return false
	case a == wbNumeric && b == wbNumeric, a == wbLetter && b == wbNumeric, a == wbNumeric && b == wbLetter: // WB8, WB9, WB10
		return false
	case midNum(a) && b == wbNumeric && before() == wbNumeric: // WB11
		return false
	case a == wbNumeric && midNum(b) && after() == wbNumeric: // WB12
		return false
	case (a == wbLetter || a == wbNumeric || a == wbExtendNumLet) && b == wbExtendNumLet: // WB13a
		return false
	case a == wbExtendNumLet && (b == wbLetter || b == wbNumeric): // WB13b
		return false
	}
	return true // WB999
}

// tokenEdge reports whether a span may start or end at code point p (0 <= p <= len).
func (cp *codePoints) tokenEdge(p int) bool {
	n := cp.len()
	if p <= 0 || p >= n {
		return true
	}
	b := cp.at(p)
	if unicode.IsMark(b) {
		return false // a combining mark belongs to the character before it
	}
	a, ok := cp.baseBefore(p)
	if !ok {
		return false
	}
	if cp.joined(p) {
		return false
	}
	if noSpaceScript(a) && noSpaceScript(b) {
		return false
	}
	if (unicode.IsDigit(a) && cjkLetter(b)) || (cjkLetter(a) && unicode.IsDigit(b)) {
		return true
	}
	return cp.wordBoundary(p)
}

// baseBefore is the character before p that combining marks after it belong to; ok is false
// when more than maxJoinerRun marks stand before p.
func (cp *codePoints) baseBefore(p int) (rune, bool) {
	for i := p - 1; i >= 0 && p-i <= maxJoinerRun; i-- {
		if r := cp.at(i); !unicode.IsMark(r) {
			return r, true
		}
	}
	return 0, p <= maxJoinerRun
}

// joined reports whether p touches a run of joiners with a letter or digit on both sides.
func (cp *codePoints) joined(p int) bool {
	n := cp.len()
	l := p
	for l > 0 && isJoiner(cp.at(l-1)) {
		if l--; p-l > maxJoinerRun {
			return true
		}
	}
	r := p
	for r < n && isJoiner(cp.at(r)) {
		if r++; r-p > maxJoinerRun {
			return true
		}
	}
	if l == p && r == p {
		return false
	}
	return l > 0 && r < n && isWordChar(cp.at(l-1)) && isWordChar(cp.at(r))
}
