// Package suggest finds the known name a mistyped one was probably meant to be, for error
// messages that say "did you mean …?".
package suggest

import "strings"

// Closest returns the candidate nearest to name by optimal string alignment distance
// (insertions, deletions, substitutions and transpositions of adjacent characters, compared
// ignoring case), when it is near enough to be a typo: at most 2 edits, and fewer than half the
// longer name's characters. It returns "" when no candidate qualifies or two are equally near.
func Closest(name string, candidates []string) string {
	best, bestD, tie := "", -1, false
	for _, c := range candidates {
		if c == name {
			return ""
		}
		d := distance(strings.ToLower(name), strings.ToLower(c))
		longer := max(len([]rune(name)), len([]rune(c)))
		if d > 2 || 2*d >= longer {
			continue
		}
		switch {
		case bestD < 0 || d < bestD:
			best, bestD, tie = c, d, false
		case d == bestD && c != best:
			tie = true
		}
	}
	if tie {
		return ""
	}
	return best
}

// DidYouMean is Closest formatted for an error message: ` (did you mean "x"?)`, or "".
func DidYouMean(name string, candidates []string) string {
	if c := Closest(name, candidates); c != "" {
		return ` (did you mean "` + c + `"?)`
	}
	return ""
}

// distance is the optimal string alignment distance between a and b, in code points.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
