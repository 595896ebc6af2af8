package gates

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Numbers ground from one unambiguous written form only (docs/grounding.md):
//
//	sign?  ( 0 | [1-9][0-9]* | [1-9][0-9]{0,2} ( SEP [0-9]{3} )+ )  ( . [0-9]+ )?
//
// with ASCII digits, an optional + or -, one group separator SEP used throughout the number
// (',' '_' ''' a space, a no-break space, a narrow no-break space or a thin space), and a '.'
// fraction only where the field's type is number. A decimal comma (12,50), groups of another
// size (1,00,000), mixed separators (1,000 000), a list (10, 20), leading zeros (007), a fraction
// for an integer field, and a fraction of exactly three digits after one to three digits with
// no group separator (1.500: one and a half, or fifteen hundred) are ambiguous: the slot is asked.

// numberReading is what span text says as a number.
type numberReading uint8

const (
	numberOK        numberReading = iota // one unambiguous form; the literal is its value
	numberAmbiguous                      // digits, but not in one unambiguous form
	numberNot                            // not a number at all (a word, a name)
)

// isGroupSep reports whether r may separate groups of three digits.
func isGroupSep(r rune) bool {
	switch r {
	case ',', '_', '\'':
		return true
	}
	return isSpaceSep(r)
}

// isSpaceSep reports whether r is a space that may separate digit groups or a number from the
// word after it.
func isSpaceSep(r rune) bool {
	return r == ' ' || r == '\u00A0' || r == '\u202F' || r == '\u2009'
}

// readNumber reads span text as one written number and returns its plain decimal literal
// (an optional '-', digits, an optional fraction) when the reading is numberOK.
func readNumber(text string, fraction bool) (string, numberReading) {
	var b strings.Builder
	b.Grow(len(text))
	i := 0
	if i < len(text) && (text[i] == '+' || text[i] == '-') {
		if text[i] == '-' {
			b.WriteByte('-')
		}
		i++
	}
	if r, _ := utf8.DecodeRuneInString(text[i:]); !unicode.IsDigit(r) {
		return "", numberNot
	}
	// The integer part: the first group, then groups of exactly three after one separator.
	lead := i
	i = digitsEnd(text, i)
	first := i - lead
	switch {
	case first == 0:
		return "", numberAmbiguous // a digit of another script, or a fullwidth one
	case first > 1 && text[lead] == '0':
		return "", numberAmbiguous // leading zeros: an identifier, or a typo
	}
	b.WriteString(text[lead:i])
	var sep rune
	groups := 0
	for i < len(text) {
		r, w := utf8.DecodeRuneInString(text[i:])
		if !isGroupSep(r) {
			break
		}
		if sep != 0 && r != sep {
			return "", numberAmbiguous // mixed separators, or a list such as "10, 20"
		}
		sep = r
		j := i + w
		k := digitsEnd(text, j)
		if k-j != 3 || first > 3 || text[lead] == '0' {
			return "", numberAmbiguous // a decimal comma, or groups of another size
		}
		b.WriteString(text[j:k])
		i = k
		groups++
	}
	if i < len(text) && text[i] == '.' {
		j := i + 1
		k := digitsEnd(text, j)
		switch {
		case !fraction, k == j:
			return "", numberAmbiguous
		case groups == 0 && first <= 3 && k-j == 3 && text[lead] != '0':
			return "", numberAmbiguous // 1.500 reads as 1.5 or as 1500
		}
		b.WriteByte('.')
		b.WriteString(text[j:k])
		i = k
	}
	if i != len(text) {
		return "", numberAmbiguous // a unit, a suffix, an exponent, another number
	}
	return b.String(), numberOK
}

// digitsEnd is where the run of ASCII digits that starts at text[i] ends.
func digitsEnd(text string, i int) int {
	for i < len(text) && text[i] >= '0' && text[i] <= '9' {
		i++
	}
	return i
}

// wholeNumber reports whether nothing beside [s, e) continues the number: no digit or number
// character, no sign or point before it, and no group separator with a digit behind it on
// either side (the span 1 000 inside 1 000 000, or 500 inside -500, is part of a number).
func (cp *codePoints) wholeNumber(s, e int) bool {
	n := cp.len()
	if s > 0 {
		switch pc := cp.at(s - 1); {
		case unicode.IsNumber(pc), pc == '+', pc == '-', pc == '\u2212', pc == '.', pc == ',':
			return false
		case isGroupSep(pc) && s >= 2 && unicode.IsNumber(cp.at(s-2)):
			return false
		}
	}
	if e < n {
		switch nc := cp.at(e); {
		case unicode.IsNumber(nc):
			return false
		case (isGroupSep(nc) || nc == '.' || nc == ',') && e+1 < n && unicode.IsNumber(cp.at(e+1)):
			return false
		}
	}
	return true
}

// maxScaleWord bounds the word read after a number; no scale word is longer.
const maxScaleWord = 12

// scaleAfter reports whether the number ending at e is followed, directly or after up to three
// spaces, by a scale word or suffix (15k, 1.5m, 2 million, 1万): the value the user meant is
// not the digits typed.
func (cp *codePoints) scaleAfter(e int) bool {
	n := cp.len()
	j := e
	for k := 0; k < 3 && j < n && isSpaceSep(cp.at(j)); k++ {
		j++
	}
	if j >= n {
		return false
	}
	if cjkScale(cp.at(j)) {
		return true
	}
	var w [maxScaleWord]rune
	k := 0
	for j < n && unicode.IsLetter(cp.at(j)) {
		if k == maxScaleWord {
			return false
		}
		w[k] = unicode.ToLower(cp.at(j))
		k++
		j++
	}
	return k > 0 && scaleWord(string(w[:k]))
}

// cjkScale reports whether r is a CJK numeral of scale (ten, hundred, thousand, ten thousand,
// hundred million, …), which multiplies the number before it.
func cjkScale(r rune) bool {
	switch r {
	case '十', '百', '千', '万', '萬', '億', '亿', '兆', '京', '拾', '佰', '仟',
		'십', '백', '천', '만', '억', '조':
		return true
	}
	return false
}

// scaleWord reports whether w, lower case, is a word or suffix that scales a number written
// before it.
func scaleWord(w string) bool {
	switch w {
	case "k", "m", "b", "t", "bn", "mn", "mm", "mln", "mio", "mrd", "md", "tsd", "cr",
		"grand", "dozen", "hundred", "hundreds", "thousand", "thousands",
		"million", "millions", "billion", "billions", "trillion", "trillions",
		"lakh", "lakhs", "lac", "lacs", "crore", "crores",
		"mil", "mill", "millón", "millones", "mille", "mila", "milione", "milioni",
		"miliardo", "miliardi", "milliard", "milliards", "millier", "milliers",
		"tausend", "millionen", "milliarde", "milliarden":
		return true
	}
	return false
}
