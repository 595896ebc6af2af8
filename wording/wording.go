package wording

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/verdictgate/verdict/visible"
)

// Fold is s without the characters a host does not draw (the default-ignorable code points,
// visible.DefaultIgnorable), case-folded: two texts that a host draws alike up to case fold
// alike. It is for matching only; what a person is shown marks those characters instead
// (visible.Mark).
func Fold(s string) string {
	s = strings.Map(func(r rune) rune {
		if visible.DefaultIgnorable(r) {
			return -1
		}
		return r
	}, s)
	return cases.Fold().String(s)
}

// Skeleton is s as it reads, for comparing wording: compatibility characters decomposed
// (fullwidth and mathematical letters, ligatures), folded ([Fold]), without combining marks,
// and with common lookalikes of Latin letters, of ':' and of '[' replaced by them. Two texts a
// person reads as the same words have the same skeleton, whatever code points spell them.
func Skeleton(s string) string {
	s = Fold(norm.NFKD.String(s))
	var b strings.Builder
	for _, r := range s {
		if unicode.In(r, unicode.Mn, unicode.Me) {
			continue
		}
		if l, ok := lookalikes[r]; ok {
			r = l
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Same reports whether a and b read as the same wording: their skeletons are equal once
// spacing, punctuation other than '[' and ':', and markup are left out. A schema's
// "format": "pass-word" reads as "password".
func Same(a, b string) bool {
	return compact(Skeleton(a), false) == compact(Skeleton(b), false)
}

// compact keeps of a skeleton what wording is told apart by: letters, digits, '[' and ':', and
// line breaks as '\n' when lines is set. Spaces, other punctuation and markup ("**Note**:",
// "> Note:") do not hide a phrase.
func compact(s string, lines bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '[' || r == ':':
			b.WriteRune(r)
		case lines && isLineBreak(r):
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// isLineBreak reports whether r ends a line where a host draws text: Unicode's mandatory
// breaks, so that a phrase reserved at the start of a line is found after any of them.
func isLineBreak(r rune) bool { return strings.ContainsRune("\n\r\v\f\u0085\u2028\u2029", r) }

// lookalikes maps letters that read as Latin ones (after case folding: Cyrillic, Greek, small
// capitals, dotless i) to those, and characters that read as ':' or '[' to them. Compatibility
// forms (fullwidth, mathematical, circled) are left to NFKD. It is read only.
var lookalikes = map[rune]rune{
	// Cyrillic.
	'а': 'a', 'в': 'b', 'е': 'e', 'һ': 'h', 'н': 'h', 'і': 'i', 'ј': 'j', 'к': 'k', 'ӏ': 'l', 'м': 'm',
	'о': 'o', 'р': 'p', 'ԛ': 'q', 'ѕ': 's', 'т': 't', 'у': 'y', 'ԝ': 'w', 'х': 'x', 'ԁ': 'd', 'ь': 'b',
	// Greek.
	'α': 'a', 'β': 'b', 'ε': 'e', 'ζ': 'z', 'η': 'h', 'ι': 'i', 'κ': 'k', 'μ': 'm', 'ν': 'n', 'ο': 'o',
	'ρ': 'p', 'τ': 't', 'υ': 'u', 'χ': 'x', 'γ': 'y',
	// Latin small capitals and others.
	'ᴀ': 'a', 'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e', 'ꜰ': 'f', 'ɢ': 'g', 'ʜ': 'h', 'ɪ': 'i', 'ᴊ': 'j',
	'ᴋ': 'k', 'ʟ': 'l', 'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p', 'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't', 'ᴜ': 'u',
	'ᴠ': 'v', 'ᴡ': 'w', 'ʏ': 'y', 'ᴢ': 'z', 'ı': 'i', 'ɩ': 'i', 'ȷ': 'j', 'ɡ': 'g',
	// Colons.
	'꞉': ':', '∶': ':', '˸': ':', 'ː': ':', '׃': ':', '։': ':', '⁚': ':', '܃': ':', '᠄': ':',
	// Opening square brackets.
	'⁅': '[', '⟦': '[', '⦋': '[', '⦍': '[', '⦏': '[', '〔': '[', '〖': '[', '〘': '[', '〚': '[', '【': '[',
	'⟬': '[', '❲': '[', '⸢': '[', '⸤': '[',
}
