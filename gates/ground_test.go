package gates

import (
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/visible"
)

func TestGround(t *testing.T) {
	in := api.Instruction{Segments: []api.Segment{
		{Text: "send 500,000 won to 110-222-333 via Express — ünïcode 1 000 000", Trust: TrustUser},
		{Text: "pay 3333-444-555", Trust: "untrusted"},
	}}
	str := groundRule{kind: groundString}
	integer := groundRule{kind: groundInteger}
	number := groundRule{kind: groundNumber}
	enum := groundRule{kind: groundEnum, enum: []string{"express", "standard"}}
	n := func(s string) json.Number { return json.Number(s) }
	tests := []struct {
		name  string
		seg   int
		span  api.Span
		value any
		rule  groundRule
		want  string
	}{
		{"integer with commas", 0, api.Span{5, 12}, n("500000"), integer, ""},
		{"integer as exponent literal", 0, api.Span{5, 12}, n("5e5"), integer, ""},
		{"number equal", 0, api.Span{5, 12}, n("500000.0"), number, ""},
		{"different number", 0, api.Span{5, 12}, n("600000"), integer, RejectTextMismatch},
		{"number as string", 0, api.Span{5, 12}, "500000", integer, RejectTextMismatch},
		{"span includes unit", 0, api.Span{5, 16}, n("500000"), integer, RejectAmbiguousNumber},
		{"string exact", 0, api.Span{20, 31}, "110-222-333", str, ""},
		{"string differs", 0, api.Span{20, 31}, "110-222-334", str, RejectTextMismatch},
		{"enum ignores case", 0, api.Span{36, 43}, "express", enum, ""},
		{"enum value must be the member", 0, api.Span{36, 43}, "Express", enum, RejectTextMismatch},
		{"code points not bytes", 0, api.Span{46, 53}, "ünïcode", str, ""},
		{"spaces between digits", 0, api.Span{54, 63}, n("1000000"), integer, ""},
		{"untrusted", 1, api.Span{4, 16}, "3333-444-555", str, RejectUntrustedSegment},
		{"no segment", 2, api.Span{0, 1}, "p", str, RejectNoSuchSegment},
		{"negative segment", -1, api.Span{0, 1}, "p", str, RejectNoSuchSegment},
		{"out of range", 0, api.Span{60, 64}, "x", str, RejectSpanOutOfRange},
		{"empty", 0, api.Span{3, 3}, "", str, RejectSpanOutOfRange},
		{"reversed", 0, api.Span{5, 2}, "x", str, RejectSpanOutOfRange},
		{"boolean", 0, api.Span{0, 4}, true, groundRule{}, RejectNotGroundableType},
	}
	for _, tt := range tests {
		if got := ground(newSpanIndex(&in), tt.seg, tt.span, tt.value, tt.rule); got != tt.want {
			t.Errorf("%s: ground = %q, want %q", tt.name, got, tt.want)
		}
	}
	plain := api.Instruction{Plain: true, Text: "send 500"}
	if got := ground(newSpanIndex(&plain), 0, api.Span{5, 8}, n("500"), integer); got != RejectInstructionNotSplit {
		t.Errorf("plain instruction: %q", got)
	}
}

// spanTextScan is what a span means, walked the slow way: count code points as a range loop
// reads them (an invalid byte is one) and cut at start and end.
func spanTextScan(text string, span api.Span) (string, bool) {
	start, end := span[0], span[1]
	if start < 0 || end <= start {
		return "", false
	}
	i, from := 0, -1
	for off := range text {
		if i == start {
			from = off
		}
		if i == end {
			return text[from:off], true
		}
		i++
	}
	if i == end && from >= 0 {
		return text[from:], true
	}
	return "", false
}

func TestSpanIndex(t *testing.T) {
	in := api.Instruction{Segments: []api.Segment{
		{Text: "send 500,000 won"},
		{Text: "ünïcode — 1 000 €"},
		{Text: "a\xffb\xe2\x82"}, // invalid UTF-8: each bad byte is one code point
		{Text: ""},
	}}
	tests := []struct {
		seg  int
		span api.Span
		want string
		ok   bool
	}{
		{0, api.Span{5, 12}, "500,000", true},
		{0, api.Span{0, 16}, "send 500,000 won", true},
		{0, api.Span{13, 17}, "", false},
		{0, api.Span{-1, 3}, "", false},
		{0, api.Span{4, 4}, "", false},
		{0, api.Span{6, 2}, "", false},
		{1, api.Span{0, 7}, "ünïcode", true},
		{1, api.Span{8, 9}, "—", true},
		{1, api.Span{16, 17}, "€", true},
		{1, api.Span{0, 17}, "ünïcode — 1 000 €", true},
		{1, api.Span{16, 18}, "", false},
		{1, api.Span{17, 20}, "", false}, // in range in bytes, not in code points
		{2, api.Span{1, 2}, "\xff", true},
		{2, api.Span{3, 5}, "\xe2\x82", true},
		{2, api.Span{0, 6}, "", false},
		{3, api.Span{0, 1}, "", false},
	}
	x := newSpanIndex(&in)
	for _, tt := range tests {
		got, ok := x.text(tt.seg, tt.span)
		if got != tt.want || ok != tt.ok {
			t.Errorf("segment %d span %v = %q, %v; want %q, %v", tt.seg, tt.span, got, ok, tt.want, tt.ok)
		}
		if ref, refOK := spanTextScan(in.Segments[tt.seg].Text, tt.span); ref != got || refOK != ok {
			t.Errorf("segment %d span %v: index says %q, %v, scan says %q, %v", tt.seg, tt.span, got, ok, ref, refOK)
		}
	}
}

// The index agrees with the scan on any text, however many lookups share it.
func FuzzSpanIndex(f *testing.F) {
	f.Add("send 500,000 won", 5, 12, 0, 4)
	f.Add("ünïcode — 1 000 €", 0, 7, 8, 9)
	f.Add("a\xffb\xe2\x82", 1, 3, 3, 5)
	f.Fuzz(func(t *testing.T, text string, s1, e1, s2, e2 int) {
		in := api.Instruction{Segments: []api.Segment{{Text: "another segment"}, {Text: text}}}
		x := newSpanIndex(&in)
		for _, span := range []api.Span{{s1, e1}, {s2, e2}, {s1, e2}, {s2, e1}} {
			got, ok := x.text(1, span)
			want, wantOK := spanTextScan(text, span)
			if got != want || ok != wantOK {
				t.Fatalf("span %v of %q: index %q, %v; scan %q, %v", span, text, got, ok, want, wantOK)
			}
		}
	})
}

func TestRuleFor(t *testing.T) {
	tests := []struct {
		schema string
		kind   groundKind
	}{
		{`{"type":"string"}`, groundString},
		{`{"type":["string","null"]}`, groundString},
		{`{"type":["string","integer"]}`, groundNone},
		{`{"type":"string","format":"date"}`, groundNone},
		{`{"type":"string","format":"email"}`, groundString},
		{`{"type":"string","enum":["a","b"]}`, groundEnum},
		{`{"enum":["a","b"]}`, groundEnum},
		{`{"type":"string","enum":["a",1]}`, groundNone},
		{`{"type":"integer"}`, groundInteger},
		{`{"type":"number"}`, groundNumber},
		{`{"type":"boolean"}`, groundNone},
		{`{"type":"object"}`, groundNone},
		{`{}`, groundNone},
	}
	for _, tt := range tests {
		var m map[string]any
		if err := json.Unmarshal([]byte(tt.schema), &m); err != nil {
			t.Fatal(err)
		}
		if got := ruleFor(m).kind; got != tt.kind {
			t.Errorf("ruleFor(%s) = %v, want %v", tt.schema, got, tt.kind)
		}
	}
}

func TestNormalize(t *testing.T) {
	tests := map[string]string{
		"Send  Money!":     "send money",
		"  send-money  ":   "send money",
		"ＳＥＮＤ　ＭＯＮＥＹ":       "send money", // full width, NFKC
		"pay\u00a0rent 2x": "pay rent 2x",
		"送金する":             "送金する",
		"!!!":              "",
		"Ⅻ":                "xii",
	}
	for in, want := range tests {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

type fataler interface {
	Fatalf(format string, args ...any)
}

// checkGrounded asserts what grounding promises: a user segment, a span in range, and span
// text that denotes the value under the rule.
func checkGrounded(t fataler, in *api.Instruction, seg int, span api.Span, value any, rule groundRule) {
	if in.Plain || seg < 0 || seg >= len(in.Segments) || in.Segments[seg].Trust != TrustUser {
		t.Fatalf("grounded outside a user segment: %d", seg)
	}
	runes := []rune(in.Segments[seg].Text)
	if span[0] < 0 || span[1] > len(runes) || span[0] >= span[1] {
		t.Fatalf("grounded with span %v over %d code points", span, len(runes))
	}
	text := string(runes[span[0]:span[1]])
	for _, r := range text {
		if r != '\r' && visible.Hidden(r) {
			t.Fatalf("grounded span %v of %q holds U+%04X, which the user does not see", span, in.Segments[seg].Text, r)
		}
	}
	switch rule.kind {
	case groundString:
		if value != text {
			t.Fatalf("string %q grounded on %q", value, text)
		}
	case groundEnum:
		if s, _ := value.(string); !strings.EqualFold(s, text) {
			t.Fatalf("enum %q grounded on %q", value, text)
		}
	case groundInteger, groundNumber:
		lit, ok := numberOracle(text, rule.kind == groundNumber)
		want, _ := new(big.Rat).SetString(string(value.(json.Number)))
		got, _ := new(big.Rat).SetString(lit)
		if !ok || got == nil || got.Cmp(want) != 0 {
			t.Fatalf("number %v grounded on %q", value, text)
		}
	default:
		t.Fatalf("grounded a %v rule", rule.kind)
	}
	edges := tokenEdgesOracle(in.Segments[seg].Text)
	if !edges[span[0]] || !edges[span[1]] {
		t.Fatalf("grounded span %v of %q ends inside a token (edges %v)", span, in.Segments[seg].Text, edges)
	}
}

func FuzzGround(f *testing.F) {
	f.Add("send 500,000 won", "user", 5, 12, "500000", uint8(groundInteger))
	f.Add("to 110-222-333", "user", 3, 14, "110-222-333", uint8(groundString))
	f.Add("via EXPRESS", "untrusted", 4, 11, "express", uint8(groundEnum))
	f.Add("ünï 1 0", "user", 4, 7, "10", uint8(groundNumber))
	f.Add("send 15000 won", "user", 5, 9, "1500", uint8(groundInteger))
	f.Add("to 330-000-0015.", "user", 3, 14, "330-000-001", uint8(groundString))
	f.Add("pay 12,50 eur", "user", 4, 9, "1250", uint8(groundInteger))
	f.Add("送金15000円", "user", 2, 7, "15000", uint8(groundInteger))
	f.Add("15000원을 보내", "user", 0, 5, "15000", uint8(groundInteger))
	f.Add("mail ann.lee@example.com.", "user", 5, 12, "ann.lee", uint8(groundString))
	f.Fuzz(func(t *testing.T, text, trust string, start, end int, value string, kind uint8) {
		if !utf8.ValidString(text) {
			return
		}
		in := api.Instruction{Segments: []api.Segment{{Text: text, Trust: trust}}}
		rule := groundRule{kind: groundKind(kind % 5)}
		var v any = value
		if rule.kind == groundEnum {
			rule.enum = []string{value}
		}
		if rule.kind == groundInteger || rule.kind == groundNumber {
			if _, ok := new(big.Rat).SetString(value); !ok || strings.ContainsAny(value, "/") {
				return
			}
			v = json.Number(value)
		}
		if ground(newSpanIndex(&in), 0, api.Span{start, end}, v, rule) == "" {
			checkGrounded(t, &in, 0, api.Span{start, end}, v, rule)
		}
	})
}

// No slot is ever known from an untrusted segment, or from a span whose text does not denote
// the value.
func TestGroundingProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nseg := rapid.IntRange(1, 4).Draw(t, "segments")
		in := api.Instruction{}
		for i := 0; i < nseg; i++ {
			in.Segments = append(in.Segments, api.Segment{
				Text:  rapid.StringOfN(rapid.RuneFrom([]rune("0123456789,_ .-+abcXYZé€ü")), 0, 24, -1).Draw(t, "text"),
				Trust: rapid.SampledFrom([]string{"user", "untrusted", "tool_result", ""}).Draw(t, "trust"),
			})
		}
		seg := rapid.IntRange(-1, nseg).Draw(t, "seg")
		span := api.Span{rapid.IntRange(-2, 26).Draw(t, "start"), rapid.IntRange(-2, 26).Draw(t, "end")}
		kind := groundKind(rapid.IntRange(1, 4).Draw(t, "kind"))
		rule := groundRule{kind: kind}
		var value any
		switch kind {
		case groundInteger, groundNumber:
			value = json.Number(rapid.SampledFrom([]string{"0", "1", "10", "100", "1000", "-5", "0.5", "12345"}).Draw(t, "num"))
		case groundEnum:
			rule.enum = []string{"abc", "xyz"}
			value = rapid.SampledFrom([]string{"abc", "xyz", "ABC"}).Draw(t, "enum")
		default:
			value = rapid.StringOfN(rapid.RuneFrom([]rune("0123456789abc ")), 1, 6, -1).Draw(t, "str")
		}
		if ground(newSpanIndex(&in), seg, span, value, rule) == "" {
			checkGrounded(t, &in, seg, span, value, rule)
		}
	})
}

// Characters the user does not see neither separate nor join what they do see.
func TestGroundIgnorable(t *testing.T) {
	str := groundRule{kind: groundString}
	integer := groundRule{kind: groundInteger}
	tests := []struct {
		text  string
		sub   string
		nth   int
		value any
		rule  groundRule
		want  string
	}{
		{"send 15\u200b000 won", "000", 0, json.Number("0"), integer, RejectPartialToken},
		{"send 15\u200b000 won", "15", 0, json.Number("15"), integer, RejectPartialToken},
		{"send 15\u200b000 won", "15\u200b000", 0, "15\u200b000", str, RejectHiddenCharacters},
		{"send 15 \u200bthousand", "15", 0, json.Number("15"), integer, RejectAmbiguousNumber},
		{"send 15\ufe0f thousand", "15", 0, json.Number("15"), integer, RejectPartialToken},
		{"to 330-000-001\u2065-5", "330-000-001", 0, "330-000-001", str, RejectPartialToken},
		{"to 12\u2060-34 now", "34", 0, "34", str, RejectPartialToken},
		{"to 12\u2065x-34 now", "34", 0, "34", str, RejectPartialToken},
		{"pay Anna\U000E0100belle", "Anna", 0, "Anna", str, RejectPartialToken},
		{"pay Anna\u3164 Lee", "Anna", 0, "Anna", str, RejectPartialToken},
		{"\u200bsend 500 now", "500", 0, json.Number("500"), integer, ""},
		{"send 500 now \u200b", "500", 0, json.Number("500"), integer, ""},
		{"send 500 now to 1\u200b2", "500", 0, json.Number("500"), integer, ""},
		{"to ann.lee@x\u200b.com.", "ann.lee", 0, "ann.lee", str, RejectPartialToken},
		{"send 15\x00000 won", "15", 0, json.Number("15"), integer, RejectPartialToken},
		{"pay Anna\x00belle", "Anna", 0, "Anna", str, RejectPartialToken},
		{"pay Anna\ue000belle", "Anna", 0, "Anna", str, RejectPartialToken},
		{"pay Anna\u2028belle", "Anna", 0, "Anna", str, RejectPartialToken},
		{"send 15\u2800000 won", "15", 0, json.Number("15"), integer, RejectPartialToken},
		{"send 15\u0378000 won", "15", 0, json.Number("15"), integer, RejectPartialToken},
		{"send 500\r\nnow", "500", 0, json.Number("500"), integer, ""},
		{"a\xe2\u200b\x82\xac xyz q", "y", 0, "y", str, RejectPartialToken},
	}
	for _, tt := range tests {
		in := api.Instruction{Segments: []api.Segment{{Text: tt.text, Trust: TrustUser}}}
		span := spanOf(t, tt.text, tt.sub, tt.nth)
		if got := ground(newSpanIndex(&in), 0, span, tt.value, tt.rule); got != tt.want {
			t.Errorf("ground(%q, %q) = %q, want %q", tt.text, tt.sub, got, tt.want)
		}
	}
}

// Default-ignorable characters inserted anywhere into the user's words: a span that holds one
// or has one beside either end never grounds, and every other span is decided exactly as the
// same span of the text without them.
func TestPropertyIgnorableNeitherSeparatesNorJoins(t *testing.T) {
	alphabet := []rune("0123456789abkmXYZ -_.@/+:',;!?é\u0301€张三送金円원을김タ万만\u00a0")
	ignorable := []rune{0x00AD, 0x034F, 0x061C, 0x115F, 0x17B4, 0x180B, 0x180E, 0x200B, 0x200C, 0x200D,
		0x200E, 0x202E, 0x2060, 0x2065, 0x2066, 0x3164, 0xFE00, 0xFE0F, 0xFEFF, 0xFFA0, 0xFFF0,
		0x1BCA0, 0x1D173, 0xE0001, 0xE0041, 0xE0100, 0xE01EF, 0xE0FFF,
		// Not default-ignorable, but not seen either: controls, separators, private use,
		// unassigned, the braille blank.
		0x00, 0x07, 0x1B, 0x7F, 0x80, 0x85, 0x2028, 0x2029, 0x2800, 0xE000, 0xF0000, 0x0378, 0xFFF9}
	for _, r := range ignorable {
		if !visible.Hidden(r) || r == '\r' {
			t.Fatalf("U+%04X is not hidden", r)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		base := []rune(rapid.StringOfN(rapid.RuneFrom(alphabet), 1, 24, -1).Draw(t, "text"))
		text := slices.Clone(base)
		for k := rapid.IntRange(1, 4).Draw(t, "inserted"); k > 0; k-- {
			at := rapid.IntRange(0, len(text)).Draw(t, "at")
			text = slices.Insert(text, at, rapid.SampledFrom(ignorable).Draw(t, "char"))
		}
		seenAt := make([]int, len(text)+1)
		for i, r := range text {
			seenAt[i+1] = seenAt[i]
			if r == '\r' || !visible.Hidden(r) {
				seenAt[i+1]++
			}
		}
		s := rapid.IntRange(0, len(text)-1).Draw(t, "start")
		e := rapid.IntRange(s+1, len(text)).Draw(t, "end")
		sub := string(text[s:e])
		var value any = sub
		rule := groundRule{kind: groundString}
		if lit, reading := readNumber(sub, true); reading == numberOK && rapid.Bool().Draw(t, "as number") {
			value, rule = json.Number(lit), groundRule{kind: groundNumber}
		}
		in := api.Instruction{Segments: []api.Segment{{Text: string(text), Trust: TrustUser}}}
		got := ground(newSpanIndex(&in), 0, api.Span{s, e}, value, rule)
		holds := seenAt[e]-seenAt[s] != e-s
		unseen := func(r rune) bool { return r != '\r' && visible.Hidden(r) }
		beside := s > 0 && unseen(text[s-1]) || e < len(text) && unseen(text[e])
		if holds || beside {
			if got == "" {
				t.Fatalf("span %v %q of %q grounded beside or over a character the user does not see", api.Span{s, e}, sub, string(text))
			}
			return
		}
		seen := api.Instruction{Segments: []api.Segment{{Text: string(base), Trust: TrustUser}}}
		if want := ground(newSpanIndex(&seen), 0, api.Span{seenAt[s], seenAt[e]}, value, rule); got != want {
			t.Fatalf("span %q of %q: %q, but of %q as the user sees it: %q", sub, string(text), got, string(base), want)
		}
		if got == "" {
			checkGrounded(t, &in, 0, api.Span{s, e}, value, rule)
		}
	})
}
