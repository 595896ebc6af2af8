package console

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// hidden reports whether r would not be seen, or would change how what follows it is seen:
// controls, format characters (zero-width, bidirectional overrides and isolates), and
// non-characters. Such a rune in a value an approver reviews is shown by its code point.
func hidden(r rune) bool {
	return r == utf8.RuneError || unicode.Is(unicode.Cc, r) && r != '\n' && r != '\t' ||
		unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Bidi_Control, r) ||
		unicode.Is(unicode.Noncharacter_Code_Point, r) || unicode.Is(unicode.Co, r) ||
		r == '\u2028' || r == '\u2029'
}

// shownJSON is a JSON value as an approver reads it: indented, numbers and strings exactly as
// sent, and every hidden rune inside a string written as its \u escape, which denotes the same
// string. It also says how many hidden runes there were.
func shownJSON(v jsontext.Value) (string, int) {
	if len(v) == 0 {
		return "(none)", 0
	}
	c := v.Clone()
	if err := c.Indent(jsontext.WithIndent("  ")); err != nil {
		return string(v), 0 // not JSON: shown as it came, never reinterpreted
	}
	var b strings.Builder
	n := 0
	for _, r := range string(c) {
		if hidden(r) && r != '\n' {
			n++
			if r > 0xffff {
				r1, r2 := utf16Pair(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
				continue
			}
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String(), n
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// shownText is a draft as an approver reads it: every hidden rune replaced by a visible mark
// naming its code point, so that nothing in the text is invisible or reorders what follows.
func shownText(s string) (string, int) {
	var b strings.Builder
	n := 0
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				n++
				fmt.Fprintf(&b, "⟦byte %#02x⟧", s[i])
				continue
			}
		}
		if hidden(r) {
			n++
			fmt.Fprintf(&b, "⟦U+%04X⟧", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String(), n
}
