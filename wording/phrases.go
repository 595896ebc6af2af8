package wording

import "strings"

// A Phrase is wording looked for in a text. One AtLineStart is found at the start of a line only
// ("Note:" at a line's start is a heading; "Please note:" is not). A phrase that reads as
// nothing (no letter, digit, '[' or ':') is in every text.
type Phrase struct {
	Text        string
	AtLineStart bool
}

// Phrases is a set of phrases, each found in a text as the text reads ([Skeleton]) with
// spacing, punctuation other than '[' and ':', and markup left out: case, characters a host
// does not draw, lookalike letters and "**Note**:" or "> Note :" do not hide one. The zero
// value holds no phrase. A Phrases is not changed after NewPhrases and may be used by any
// number of goroutines.
type Phrases struct {
	ps []phrase
}

// phrase is a Phrase with its compacted skeleton, which every text is compared against.
type phrase struct {
	Phrase
	skel string
}

// NewPhrases returns the set of ps, each read once.
func NewPhrases(ps ...Phrase) Phrases {
	out := Phrases{ps: make([]phrase, len(ps))}
	for i, p := range ps {
		out.ps[i] = phrase{Phrase: p, skel: compact(Skeleton(p.Text), false)}
	}
	return out
}

// All returns the phrases of the set, in the order they were given. The slice is the caller's.
func (p Phrases) All() []Phrase {
	out := make([]Phrase, len(p.ps))
	for i, r := range p.ps {
		out[i] = r.Phrase
	}
	return out
}

// In returns the Text of the first phrase of the set that s uses, in the order they were
// given, or "".
func (p Phrases) In(s string) string {
	sk := Skeleton(s)
	whole, lines := compact(sk, false), strings.Split(compact(sk, true), "\n")
	for _, r := range p.ps {
		w := r.skel
		if !r.AtLineStart {
			if strings.Contains(whole, w) {
				return r.Text
			}
			continue
		}
		for _, l := range lines {
			if strings.HasPrefix(l, w) {
				return r.Text
			}
		}
	}
	return ""
}
