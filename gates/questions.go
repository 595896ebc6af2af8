package gates

import (
	"cmp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/verdictgate/verdict/policy"
)

// maxPhrase bounds the schema text a question quotes: a title or description past it is not
// a label but a manual, and the question falls back to the argument's name.
const maxPhrase = 160

// askValue is the question for an argument's value, in the first words that exist: the
// policy's question for the field (the operator's words), the schema's title ("What is the
// recipient account?"), its description ("Please give the account number to send money to."),
// and only then the argument's name, quoted as it is
// rather than mangled into words.
func askValue(f *policy.Field, p *property, name string) string {
	if f != nil && f.Question != "" {
		return f.Question
	}
	if p != nil {
		if t := phrase(p.title); t != "" {
			return "What is the " + lowerFirst(t) + "?"
		}
		if d := phrase(p.description); d != "" {
			return "Please give the " + lowerFirst(d) + "."
		}
	}
	return "What value should " + `"` + name + `"` + " have?"
}

// askConfirm is the approval of an argument's value, named in the schema's words when it has
// them ("Please confirm the recipient account."), else by its exact name.
func askConfirm(p *property, name string) string {
	if p != nil {
		if w := cmp.Or(phrase(p.title), phrase(p.description)); w != "" {
			return "Please confirm the " + lowerFirst(w) + "."
		}
	}
	return `Please confirm the value of "` + name + `".`
}

// askReview is the review of a drafted value: the policy's question for the field when it has
// one, else named by the schema's title ("Please review the message drafted for you: approve it
// exactly as shown, or refuse."), else by the argument's exact name.
func askReview(f *policy.Field, p *property, name string) string {
	if f != nil && f.Question != "" {
		return f.Question
	}
	what := `"` + name + `"`
	if p != nil {
		if t := phrase(p.title); t != "" {
			what = "the " + lowerFirst(t)
		}
	}
	return "Please review " + what + " drafted for you: approve it exactly as shown, or refuse."
}

// askPrior is the question that offers the value from last time for confirmation.
func askPrior(f *policy.Field, p *property, name string) string {
	return askValue(f, p, name) + " Last time it was the value shown: keep it, or give a new one."
}

// phrase is schema text fit to quote in a question: one line, trimmed, without its final
// period, not too long; "" otherwise.
func phrase(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	s = strings.TrimRight(s, ".:;!? ")
	for _, article := range []string{"The ", "the ", "A ", "a ", "An ", "an "} {
		s = strings.TrimPrefix(s, article)
	}
	if s == "" || utf8.RuneCountInString(s) > maxPhrase || strings.ContainsAny(s, "[]") {
		// Brackets hold labels ([Required], [Notice]) that are instructions, not words.
		return ""
	}
	return s
}

// lowerFirst lower-cases the first letter of a phrase that starts a sentence ("Recipient
// account"), but not of an acronym or a name in capitals ("IBAN").
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == len(s) {
		return strings.ToLower(s)
	}
	next, _ := utf8.DecodeRuneInString(s[n:])
	if unicode.IsUpper(r) && !unicode.IsUpper(next) {
		return string(unicode.ToLower(r)) + s[n:]
	}
	return s
}
