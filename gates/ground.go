package gates

import (
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/visible"
)

// Rejection reasons of a located candidate (docs/design.md).
const (
	RejectNoSuchSegment       = "no_such_segment"
	RejectSpanOutOfRange      = "span_out_of_range"
	RejectUntrustedSegment    = "untrusted_segment"
	RejectTextMismatch        = "text_mismatch"
	RejectNotGroundableType   = "not_groundable_type"
	RejectInstructionNotSplit = "instruction_not_segmented"
	// RejectPartialToken: the span starts or ends inside a token the user typed (docs/grounding.md).
	RejectPartialToken = "partial_token"
	// RejectHiddenCharacters: the span holds a character the user does not see (a
	// default-ignorable code point, a control, a private-use or unassigned code point,
	// docs/grounding.md).
	RejectHiddenCharacters = "hidden_characters"
	// RejectAmbiguousNumber: the span's number is not written in one unambiguous form, or a
	// scale word or suffix follows it.
	RejectAmbiguousNumber = "ambiguous_number"
)

// TrustUser is the only segment trust that can ground a value.
const TrustUser = "user"

// groundKind is how a value of a property can be found in text.
type groundKind uint8

const (
	groundNone groundKind = iota
	groundString
	groundEnum
	groundInteger
	groundNumber
)

// groundRule is derived once per property schema.
type groundRule struct {
	kind groundKind
	enum []string
}

// ungroundableFormats are string formats whose values are derived ("tomorrow" → a date) and so
// cannot be checked against typed text.
var ungroundableFormats = map[string]bool{"date": true, "date-time": true, "time": true, "duration": true}

// ruleFor derives the grounding rule of a property schema (already $ref-resolved).
func ruleFor(prop map[string]any) groundRule {
	if prop == nil {
		return groundRule{}
	}
	typ := ""
	switch t := prop["type"].(type) {
	case string:
		typ = t
	case []any:
		for _, e := range t {
			s, _ := e.(string)
			if s == "null" {
				continue
			}
			if typ != "" {
				return groundRule{} // a union of types has no single text rule
			}
			typ = s
		}
	}
	enum, enumOK := stringEnum(prop)
	switch typ {
	case "":
		if enumOK {
			return groundRule{kind: groundEnum, enum: enum}
		}
	case "string":
		if f, _ := prop["format"].(string); ungroundableFormats[f] {
			return groundRule{}
		}
		if _, has := prop["enum"]; has || prop["const"] != nil {
			if enumOK {
				return groundRule{kind: groundEnum, enum: enum}
			}
			return groundRule{}
		}
		return groundRule{kind: groundString}
	case "integer":
		return groundRule{kind: groundInteger}
	case "number":
		return groundRule{kind: groundNumber}
	}
	return groundRule{}
}

func stringEnum(prop map[string]any) ([]string, bool) {
	if c, ok := prop["const"].(string); ok {
		return []string{c}, true
	}
	raw, ok := prop["enum"].([]any)
	if !ok || len(raw) == 0 {
		return nil, false
	}
	return stringList(raw)
}

// ground checks a located candidate against the instruction and returns "" when the span text
// denotes the value, else the rejection reason. Only user-trusted segments can ground, and only
// from whole tokens (docs/grounding.md).
func ground(x *spanIndex, seg int, span api.Span, value any, rule groundRule) string {
	in := x.in
	if in.Plain {
		return RejectInstructionNotSplit
	}
	if seg < 0 || seg >= len(in.Segments) {
		return RejectNoSuchSegment
	}
	if in.Segments[seg].Trust != TrustUser {
		return RejectUntrustedSegment
	}
	text, ok := x.text(seg, span)
	if !ok {
		return RejectSpanOutOfRange
	}
	cp, span, reason := x.points(seg).seenSpan(span)
	if reason != "" {
		return reason
	}
	switch rule.kind {
	case groundNone:
		return RejectNotGroundableType
	case groundInteger, groundNumber:
		lit, reading := readNumber(text, rule.kind == groundNumber)
		switch {
		case reading == numberNot:
			return RejectTextMismatch
		case reading == numberAmbiguous, cp.scaleAfter(span[1]):
			return RejectAmbiguousNumber
		case !sameNumber(lit, value):
			return RejectTextMismatch
		case !cp.wholeNumber(span[0], span[1]):
			return RejectPartialToken
		}
	default:
		if !denotes(text, value, rule) {
			return RejectTextMismatch
		}
	}
	if !cp.tokenEdge(span[0]) || !cp.tokenEdge(span[1]) {
		return RejectPartialToken
	}
	return ""
}

// wholeTokens reports whether [start, end) of segment seg, which must be in range, starts and
// ends on token edges.
func (x *spanIndex) wholeTokens(seg int, span api.Span) bool {
	cp, span, reason := x.points(seg).seenSpan(span)
	return reason == "" && cp.tokenEdge(span[0]) && cp.tokenEdge(span[1])
}

// spanIndex reads code point spans out of the segments of one instruction. A request may point
// hundreds of locations into one segment; walking its text for each would make a wide call
// quadratic, so the first lookup in a segment records where each code point starts and every
// lookup after that is O(1). A segment no location points into costs nothing.
type spanIndex struct {
	in   *api.Instruction
	segs []codePoints // by segment index; allocated on first use
}

// codePoints maps the code point offsets of one segment to byte offsets.
type codePoints struct {
	built bool
	ascii bool   // every code point is one byte: offsets are the same
	start []int  // the byte offset of every code point, then len(text); nil when ascii
	textv string // the segment's text

	words []uint64 // UAX #29 word boundaries by code point (tokens.go); built on first use

	// seen is the segment as the user sees it, without its default-ignorable characters, and
	// seenAt maps each code point offset of the segment (0..len) to its offset in seen: both
	// are set only when the segment holds such a character.
	seen   *codePoints
	seenAt []int
}

func newSpanIndex(in *api.Instruction) *spanIndex { return &spanIndex{in: in} }

// text returns the text of [start, end) in code points of segment seg, which must exist. An
// empty, reversed, negative or overlong span is out of range.
func (x *spanIndex) text(seg int, span api.Span) (string, bool) {
	text := x.in.Segments[seg].Text
	start, end := span[0], span[1]
	if start < 0 || end <= start || end > len(text) { // a code point is at least one byte
		return "", false
	}
	cp := x.points(seg)
	if cp.ascii {
		return text[start:end], true
	}
	if end >= len(cp.start) {
		return "", false
	}
	return text[cp.start[start]:cp.start[end]], true
}

// points is the code point index of segment seg, which must exist.
func (x *spanIndex) points(seg int) *codePoints {
	if x.segs == nil {
		x.segs = make([]codePoints, len(x.in.Segments))
	}
	cp := &x.segs[seg]
	if !cp.built {
		cp.build(x.in.Segments[seg].Text)
	}
	return cp
}

// build indexes text the way a range loop reads it: an invalid byte is one code point.
func (cp *codePoints) build(text string) {
	cp.built, cp.textv = true, text
	n := 0
	for n < len(text) && (text[n]-0x20 < 0x5F || text[n] == '\n' || text[n] == '\t' || text[n] == '\r') {
		n++ // printable ASCII, newline, tab or carriage return: seen, one byte a code point
	}
	if n == len(text) {
		cp.ascii = true
		return
	}
	cp.start = make([]int, 0, utf8.RuneCountInString(text)+1)
	hidden := false
	for off, r := range text {
		cp.start = append(cp.start, off)
		hidden = hidden || unseen(r)
	}
	cp.start = append(cp.start, len(text))
	if hidden {
		cp.buildSeen()
	}
}

// unseen reports whether the user does not see r where it stands, for grounding: every rune
// visible.Hidden marks for a person (the default-ignorable code points, other format
// characters, controls, separators, private-use and unassigned code points) except the
// carriage return, which a host draws as part of a line break.
func unseen(r rune) bool { return r != '\r' && visible.Hidden(r) }

// buildSeen sets seen and seenAt: the segment without the characters the user does not see.
// An invalid byte the segment keeps is written as U+FFFD, so that the bytes around a removed
// character never join into one code point: each kept code point stays one.
func (cp *codePoints) buildSeen() {
	n := cp.len()
	cp.seenAt = make([]int, n+1)
	var b strings.Builder
	b.Grow(len(cp.textv))
	k := 0
	for i := 0; i < n; i++ {
		cp.seenAt[i] = k
		seg := cp.textv[cp.start[i]:cp.start[i+1]]
		r, size := utf8.DecodeRuneInString(seg)
		switch {
		case unseen(r):
			continue
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteString(seg)
		}
		k++
	}
	cp.seenAt[n] = k
	cp.seen = &codePoints{}
	cp.seen.build(b.String())
}

// seenSpan is span, which must be in range, in the segment as the user sees it, and the
// code points to check it on. A span that holds a character the user does not see (unseen)
// denotes text the user did not see as they see it (hidden_characters); one with such a
// character beside either end would make a token of part of what they see as one
// (partial_token).
func (cp *codePoints) seenSpan(span api.Span) (*codePoints, api.Span, string) {
	if cp.seen == nil {
		return cp, span, ""
	}
	s, e := span[0], span[1]
	switch {
	case cp.seenAt[e]-cp.seenAt[s] != e-s:
		return nil, span, RejectHiddenCharacters
	case s > 0 && unseen(cp.at(s-1)), e < cp.len() && unseen(cp.at(e)):
		return nil, span, RejectPartialToken
	}
	return cp.seen, api.Span{cp.seenAt[s], cp.seenAt[e]}, ""
}

func denotes(text string, value any, rule groundRule) bool {
	switch rule.kind {
	case groundString:
		v, ok := value.(string)
		return ok && v == text
	case groundEnum:
		v, ok := value.(string)
		return ok && slices.Contains(rule.enum, v) && strings.EqualFold(text, v)
	}
	return false
}

// sameNumber reports whether lit, a plain decimal literal read from span text, denotes the JSON
// number value.
func sameNumber(lit string, value any) bool {
	n, ok := value.(json.Number)
	if !ok {
		return false
	}
	if plainInteger(string(n)) && plainInteger(lit) {
		return integerKey(string(n)) == integerKey(lit)
	}
	want, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return false
	}
	got, ok := new(big.Rat).SetString(lit)
	return ok && got.Cmp(want) == 0
}

func plainInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && strings.TrimLeft(s, "0123456789") == ""
}

// integerKey is a plain integer's value as text: no leading zeros, no sign on zero.
func integerKey(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(strings.TrimPrefix(s, "-"), "0")
	switch {
	case s == "":
		return "0"
	case neg:
		return "-" + s
	}
	return s
}

// Normalize is the comparison form of action names (docs/design.md): NFKC, lower case, every run
// of characters that are neither letters nor digits becomes one space, trimmed.
func Normalize(s string) string {
	s = strings.ToLower(norm.NFKC.String(s))
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if r == utf8.RuneError || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
