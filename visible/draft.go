package visible

import (
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// Concealed counts the runes of s that text shown for a person's approval may not carry, and
// returns the first of them: every rune [Mark] would mark (an invalid byte counts as U+FFFD),
// except a zero width joiner inside an emoji sequence. That one joins two pictographs into one
// picture (👩‍💻), so it is part of what is seen: it is exempt when Unicode's grapheme cluster
// rules (UAX #29 GB11, as package uniseg implements them) join it to the symbol after it.
func Concealed(s string) (n int, first rune) {
	if firstToMark(s, false) == len(s) {
		return 0, 0
	}
	state := -1
	for rest := s; len(rest) > 0; {
		var cluster string
		cluster, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		for i := 0; i < len(cluster); {
			r, size := utf8.DecodeRuneInString(cluster[i:])
			i += size
			bad := r == utf8.RuneError && size == 1 || Hidden(r)
			if r == ZWJ && i < len(cluster) {
				next, _ := utf8.DecodeRuneInString(cluster[i:])
				bad = !unicode.Is(unicode.So, next)
			}
			if !bad {
				continue
			}
			if n == 0 {
				first = r
			}
			n++
		}
	}
	return n, first
}
