package console

import (
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/verdictgate/verdict/visible"
)

// shownJSON is a JSON value as an approver reads it: indented, numbers and strings exactly as
// sent, and every rune a person would not see (visible.Hidden) inside a string written as its
// \u escape, which denotes the same string. It also says how many there were.
func shownJSON(v jsontext.Value) (string, int) {
	if len(v) == 0 {
		return "(none)", 0
	}
	c := v.Clone()
	if err := c.Indent(jsontext.WithIndent("  ")); err != nil {
		return shownText(string(v)) // not JSON: shown as it came, marked, never reinterpreted
	}
	var b strings.Builder
	n := 0
	for _, r := range string(c) {
		if visible.Hidden(r) && r != '\n' {
			n++
			// A rune past U+FFFF is escaped as its UTF-16 surrogate pair, as JSON writes it.
			for _, u := range utf16.AppendRune(nil, r) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
			continue
		}
		b.WriteRune(r)
	}
	return b.String(), n
}

// shownText is a text as an approver reads it: every rune a person would not see replaced by a
// mark naming its code point (visible.Mark), so that nothing in it is invisible or reorders
// what follows.
func shownText(s string) (string, int) { return visible.Mark(s) }
