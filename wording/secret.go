package wording

import (
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// secretWords are the words that make a text one that asks for a secret. Each is matched as
// whole words, case-insensitively and by skeleton; a phrase of several words matches however it
// is split ("one-time code", "oneTimeCode", "onetime_code"), and every entry matches with a
// plural s. It is read only: SecretWords hands out a copy. The list is in docs/operations.md.
var secretWords = []string{
	"pin", "passwd", "otp", "totp", "2fa", "cvv", "cvc", "token", "secret", "mnemonic",
	"pass word", "pass code", "pass phrase",
	"one time code", "one time password", "one time pin",
	"verification code", "security code",
	"seed phrase", "recovery phrase", "private key", "api key",
}

// SecretWords returns the entries [Secret] looks for, in the order it tries them, each as
// lower-case words separated by single spaces. The slice is the caller's.
func SecretWords() []string { return slices.Clone(secretWords) }

// Secret returns the entry of [SecretWords] s uses, or "". s may be a sentence or a name: it is
// read as words split at camelCase, and as words split only between letters and digits and the
// rest, so that neither "cardPin" nor "Your PiN" hides one; and each reading again with runs of
// single letters read as one word, so that "P.I.N." does not either. A word that merely
// contains an entry ("pinned", "secretary") is not one.
func Secret(s string) string {
	for _, camel := range []bool{true, false} {
		ws := words(s, camel)
		if e := secretInWords(ws); e != "" {
			return e
		}
		if e := secretInWords(joinInitials(ws)); e != "" {
			return e
		}
	}
	return ""
}

// joinInitials joins each run of one-character words into one word.
func joinInitials(ws []string) []string {
	var out []string
	run := ""
	for _, w := range ws {
		if len([]rune(w)) == 1 {
			run += w
			continue
		}
		if run != "" {
			out, run = append(out, run), ""
		}
		out = append(out, w)
	}
	if run != "" {
		out = append(out, run)
	}
	return out
}

// secretInWords returns the first entry of secretWords that ws, a text's words, spells, or "".
func secretInWords(ws []string) string {
	for _, e := range secretWords {
		parts := strings.Fields(e)
		joined := strings.Join(parts, "")
		for i := range ws {
			if len(parts) == 1 {
				if ws[i] == joined || ws[i] == joined+"s" {
					return e
				}
				continue
			}
			// A phrase matches consecutive whole words that spell it,
			// however they are split.
			acc := ""
			for j := i; j < len(ws) && len(acc) <= len(joined); j++ {
				acc += ws[j]
				if acc == joined || acc == joined+"s" {
					return e
				}
			}
		}
	}
	return ""
}

// words splits s into the words it reads as, each as its skeleton of letters and digits: at
// every character that is not a letter, digit or mark (spaces, punctuation, symbols:
// "card_pin", "card-pin", "card.pin") and, with camel, at a change to upper case ("cardPin",
// "PINCode") and from a letter to a digit ("cvv2"). A character a host does not draw splits
// nothing, and neither does the markup a host may render within a word ('*', '~', '`':
// "P**I**N" shows as PIN).
func words(s string, camel bool) []string {
	rs := []rune(norm.NFKD.String(s))
	var out []string
	var cur []rune
	flush := func() {
		if w := compact(Skeleton(string(cur)), false); w != "" {
			out = append(out, w)
		}
		cur = cur[:0]
	}
	// prev is the last letter or digit of the word so far, 0 at its start.
	var prev rune
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			switch {
			case prev == 0 || !camel:
			case unicode.IsUpper(r) && unicode.IsLower(prev):
				flush()
			case unicode.IsUpper(r) && unicode.IsUpper(prev) && nextIsLower(rs[i+1:]):
				flush()
			case unicode.IsDigit(r) && unicode.IsLetter(prev):
				flush()
			}
			cur = append(cur, r)
			prev = r
		case joins(r):
			cur = append(cur, r)
		default:
			flush()
			prev = 0
		}
	}
	flush()
	return out
}

// joins reports whether r, not a letter or digit, is part of the word it stands in: a mark, a
// character Fold drops as not drawn, or markup.
func joins(r rune) bool {
	return unicode.IsMark(r) || r == '*' || r == '~' || r == '`' || Fold(string(r)) == ""
}

// nextIsLower reports whether the next letter or digit of rs is lower case: "PINCode" splits
// before the C.
func nextIsLower(rs []rune) bool {
	for _, r := range rs {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.IsLower(r)
		}
		if !joins(r) {
			return false
		}
	}
	return false
}
