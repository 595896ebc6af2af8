package gates

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/visible"
)

// tokenEdgesOracle is the token rule of docs/grounding.md computed another way than tokens.go:
// UAX #29 words from uniseg's Step API (grapheme by grapheme), then merged where a joiner run
// with a letter or digit on both sides, or two characters of a script written without spaces,
// meet at a word boundary, then split where a digit meets a CJK letter. It returns the set of
// code point offsets a grounded span may start or end at.
//
// A character the user does not see (visible.Hidden but the carriage return; the
// default-ignorable ones are held to the published property by package visible's tests) is
// not seen: the edges are those of the text without them, except that none lies beside one.
func tokenEdgesOracle(text string) map[int]bool {
	runes := []rune(text)
	var seen []rune
	at := make([]int, len(runes)+1)
	for i, r := range runes {
		at[i] = len(seen)
		if !oracleUnseen(r) {
			seen = append(seen, r)
		}
	}
	at[len(runes)] = len(seen)
	seenEdges := seenEdgesOracle(string(seen))
	edges := map[int]bool{}
	for p := 0; p <= len(runes); p++ {
		beside := p > 0 && oracleUnseen(runes[p-1]) || p < len(runes) && oracleUnseen(runes[p])
		if !beside && seenEdges[at[p]] {
			edges[p] = true
		}
	}
	return edges
}

// oracleUnseen is what grounding does not see: visible.Hidden, but the carriage return.
func oracleUnseen(r rune) bool { return r != '\r' && visible.Hidden(r) }

// seenEdgesOracle is tokenEdgesOracle of a text without default-ignorable characters.
func seenEdgesOracle(text string) map[int]bool {
	runes := []rune(text)
	n := len(runes)
	word := map[int]bool{0: true, n: true}
	pos, rest, state := 0, text, -1
	for len(rest) > 0 {
		var cluster string
		var b int
		cluster, rest, b, state = uniseg.StepString(rest, state)
		pos += utf8.RuneCountInString(cluster)
		if b&uniseg.MaskWord != 0 {
			word[pos] = true
		}
	}
	joiner := func(r rune) bool { return strings.ContainsRune("-_.@/+:'\\\u2010\u2011\u2019", r) }
	wordChar := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) }
	noSpace := func(r rune) bool {
		return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Thai, unicode.Lao,
			unicode.Khmer, unicode.Myanmar) || r == 'ー'
	}
	cjk := func(r rune) bool {
		return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
	}
	// Every maximal joiner run flanked by word characters joins: no edge touches it.
	for i := 0; i < n; {
		if !joiner(runes[i]) {
			i++
			continue
		}
		j := i
		for j < n && joiner(runes[j]) {
			j++
		}
		if i > 0 && j < n && wordChar(runes[i-1]) && wordChar(runes[j]) {
			for k := i; k <= j; k++ {
				delete(word, k)
			}
		}
		i = j
	}
	edges := map[int]bool{0: true, n: true}
	for p := 1; p < n; p++ {
		a, b := runes[p-1], runes[p]
		for k := p - 1; k > 0 && unicode.IsMark(a); k-- {
			a = runes[k-1]
		}
		switch {
		case unicode.IsMark(b), noSpace(a) && noSpace(b):
		case unicode.IsDigit(a) && cjk(b), cjk(a) && unicode.IsDigit(b):
			edges[p] = true
		case word[p]:
			edges[p] = true
		}
	}
	return edges
}

// numberOracle is the written-number grammar of docs/grounding.md as regular expressions, one
// per group separator (RE2 has no back-references to hold one separator throughout).
func numberOracle(text string, fraction bool) (string, bool) {
	for _, sep := range []string{"", ",", "_", "'", " ", "\u00a0", "\u202f", "\u2009"} {
		grouped := ""
		if sep != "" {
			grouped = `|[1-9][0-9]{0,2}(?:` + regexp.QuoteMeta(sep) + `[0-9]{3})+`
		}
		re := regexp.MustCompile(`^([+-]?)(0|[1-9][0-9]*` + grouped + `)(?:\.([0-9]+))?$`)
		m := re.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		intPart := m[2]
		if sep != "" {
			if !strings.Contains(intPart, sep) && strings.ContainsAny(intPart, ",_' \u00a0\u202f\u2009") {
				continue
			}
			intPart = strings.ReplaceAll(intPart, sep, "")
		}
		if m[3] != "" {
			if !fraction || (!strings.Contains(m[2], sep) || sep == "") && len(m[2]) <= 3 && m[2] != "0" && len(m[3]) == 3 {
				return "", false
			}
			intPart += "." + m[3]
		}
		if m[1] == "-" {
			intPart = "-" + intPart
		}
		return intPart, true
	}
	return "", false
}

// spanOf is the code point span of the nth (from 0) occurrence of sub in text.
func spanOf(t interface{ Fatalf(string, ...any) }, text, sub string, nth int) api.Span {
	from := 0
	for {
		i := strings.Index(text[from:], sub)
		if i < 0 {
			t.Fatalf("%q not in %q", sub, text)
		}
		if nth == 0 {
			s := utf8.RuneCountInString(text[:from+i])
			return api.Span{s, s + utf8.RuneCountInString(sub)}
		}
		nth--
		from += i + len(sub)
	}
}

// TestGroundTokens is every class of span that must not ground (a piece of a token, a number
// in no one written form) beside the controls that must.
func TestGroundTokens(t *testing.T) {
	str := groundRule{kind: groundString}
	integer := groundRule{kind: groundInteger}
	number := groundRule{kind: groundNumber}
	enum := groundRule{kind: groundEnum, enum: []string{"express", "standard"}}
	n := func(s string) json.Number { return json.Number(s) }
	tests := []struct {
		name, text, sub string
		nth             int
		value           any
		rule            groundRule
		want            string
	}{
		// A piece of a number.
		{"number prefix", "send 15000 won to 330-000-0015", "1500", 0, n("1500"), integer, RejectPartialToken},
		{"number suffix", "send 15000 won to 330-000-0015", "5000", 0, n("5000"), integer, RejectPartialToken},
		{"number infix", "send 15000 won to 330-000-0015", "500", 0, n("500"), integer, RejectPartialToken},
		{"number whole", "send 15000 won to 330-000-0015", "15000", 0, n("15000"), integer, ""},
		{"grouped prefix", "send 2,500,000 won", "2,500", 0, n("2500"), integer, RejectPartialToken},
		{"space-grouped prefix", "send 1 000 000 won", "1 000", 0, n("1000"), integer, RejectPartialToken},
		{"space-grouped suffix", "send 12 345 won", "345", 0, n("345"), integer, RejectPartialToken},
		{"without its sign", "balance -500 today", "500", 0, n("500"), integer, RejectPartialToken},
		{"with its sign", "balance -500 today", "-500", 0, n("-500"), integer, ""},
		{"integer part of a fraction", "pay .5 now", "5", 0, n("5"), integer, RejectPartialToken},
		{"before a vulgar fraction", "pay 1½ now", "1", 0, n("1"), integer, RejectPartialToken},
		{"number inside an account", "to 330-000-0015", "0015", 0, n("15"), integer, RejectAmbiguousNumber},
		{"digits of an account", "to 330-000-0015", "330", 0, n("330"), integer, RejectPartialToken},

		// A piece of an identifier.
		{"account one short", "to 330-000-0015 now", "330-000-001", 0, "330-000-001", str, RejectPartialToken},
		{"account without its head", "to 330-000-0015 now", "30-000-0015", 0, "30-000-0015", str, RejectPartialToken},
		{"account infix", "to 330-000-0015 now", "000", 0, "000", str, RejectPartialToken},
		{"account first group", "to 330-000-0015 now", "330", 0, "330", str, RejectPartialToken},
		{"account whole", "to 330-000-0015 now", "330-000-0015", 0, "330-000-0015", str, ""},
		{"account before a period", "to account 110-222-333.", "110-222-333", 0, "110-222-333", str, ""},
		{"underscore id prefix", "ref inv_2024_001 ok", "inv_2024", 0, "inv_2024", str, RejectPartialToken},
		{"path prefix", "open /srv/data/report.txt", "/srv/data", 0, "/srv/data", str, RejectPartialToken},
		{"url without its scheme", "see https://x.example/a", "x.example/a", 0, "x.example/a", str, RejectPartialToken},

		// A piece of a word or a name.
		{"name prefix", "pay Annabelle Lee", "Anna", 0, "Anna", str, RejectPartialToken},
		{"name suffix", "pay Annabelle Lee", "belle", 0, "belle", str, RejectPartialToken},
		{"name infix", "pay Annabelle Lee", "nab", 0, "nab", str, RejectPartialToken},
		{"name whole", "pay Annabelle Lee", "Annabelle", 0, "Annabelle", str, ""},
		{"several whole tokens", "pay Annabelle Lee", "Annabelle Lee", 0, "Annabelle Lee", str, ""},
		{"name at the end", "pay Annabelle Lee", "Lee", 0, "Lee", str, ""},
		{"hyphenated name half", "pay Mary-Ann now", "Mary", 0, "Mary", str, RejectPartialToken},
		{"enum inside a word", "ship expressway", "express", 0, "express", enum, RejectPartialToken},
		{"enum whole", "ship express, please", "express", 0, "express", enum, ""},
		{"before a combining mark", "to 110-222-333\u0301 now", "110-222-333", 0, "110-222-333", str, RejectPartialToken},

		// A piece of an e-mail address.
		{"mail local part", "mail ann.lee@example.com.", "ann.lee", 0, "ann.lee", str, RejectPartialToken},
		{"mail suffix", "mail ann.lee@example.com.", "lee@example.com", 0, "lee@example.com", str, RejectPartialToken},
		{"mail without tld", "mail ann.lee@example.com.", "ann.lee@example", 0, "ann.lee@example", str, RejectPartialToken},
		{"mail domain", "mail ann.lee@example.com.", "example.com", 0, "example.com", str, RejectPartialToken},
		{"mail whole", "mail ann.lee@example.com.", "ann.lee@example.com", 0, "ann.lee@example.com", str, ""},
		{"mail in angle brackets", "to <ann@example.com>", "ann@example.com", 0, "ann@example.com", str, ""},

		// Decimal commas, bad groupings, lists, leading zeros.
		{"decimal comma as integer", "pay 12,50 eur", "12,50", 0, n("1250"), integer, RejectAmbiguousNumber},
		{"decimal comma as number", "pay 12,50 eur", "12,50", 0, n("12.5"), number, RejectAmbiguousNumber},
		{"decimal comma half", "pay 0,5 eur", "0,5", 0, n("5"), integer, RejectAmbiguousNumber},
		{"a list", "pay 10, 20 eur", "10, 20", 0, n("1020"), integer, RejectAmbiguousNumber},
		{"lakh grouping", "pay 1,00,000", "1,00,000", 0, n("100000"), integer, RejectAmbiguousNumber},
		{"group of four", "pay 1,0000", "1,0000", 0, n("10000"), integer, RejectAmbiguousNumber},
		{"short last group", "pay 1,000,00", "1,000,00", 0, n("100000"), integer, RejectAmbiguousNumber},
		{"long first group", "pay 1000,000", "1000,000", 0, n("1000000"), integer, RejectAmbiguousNumber},
		{"mixed separators", "pay 1,000 000", "1,000 000", 0, n("1000000"), integer, RejectAmbiguousNumber},
		{"points as groups", "pay 1.000.000", "1.000.000", 0, n("1000000"), integer, RejectAmbiguousNumber},
		{"comma then point groups", "pay 1.000,50", "1.000,50", 0, n("1000.5"), number, RejectAmbiguousNumber},
		{"leading zeros", "pay 007 now", "007", 0, n("7"), integer, RejectAmbiguousNumber},
		{"grouped leading zero", "pay 0,500 now", "0,500", 0, n("500"), integer, RejectAmbiguousNumber},
		{"fraction for an integer", "pay 12.0 now", "12.0", 0, n("12"), integer, RejectAmbiguousNumber},
		{"three fraction digits", "pay 1.500 now", "1.500", 0, n("1.5"), number, RejectAmbiguousNumber},
		{"exponent", "pay 1e3 now", "1e3", 0, n("1000"), integer, RejectAmbiguousNumber},

		// Scale words and suffixes.
		{"k suffix", "pay 15k now", "15k", 0, n("15000"), integer, RejectAmbiguousNumber},
		{"k suffix, digits only", "pay 15k now", "15", 0, n("15"), integer, RejectAmbiguousNumber},
		{"m suffix", "pay 1.5m now", "1.5m", 0, n("1500000"), integer, RejectAmbiguousNumber},
		{"m suffix, digits only", "pay 1.5m now", "1.5", 0, n("1.5"), number, RejectAmbiguousNumber},
		{"million", "pay 2 million now", "2", 0, n("2"), integer, RejectAmbiguousNumber},
		{"Thousand", "pay 3 Thousand now", "3", 0, n("3"), integer, RejectAmbiguousNumber},
		{"Mio.", "zahle 1,5 Mio. Euro", "1,5", 0, n("1.5"), number, RejectAmbiguousNumber},
		{"Mio. after whole digits", "zahle 15 Mio. Euro", "15", 0, n("15"), integer, RejectAmbiguousNumber},
		{"a unit is not a scale", "pay 15 kg now", "15", 0, n("15"), integer, ""},

		// Controls that must still ground.
		{"grouped in quotes", `pay "1,250" now`, "1,250", 0, n("1250"), integer, ""},
		{"grouped in parentheses", "pay (2,500,000) now", "2,500,000", 0, n("2500000"), integer, ""},
		{"grouped with spaces", "pay 1 000 000", "1 000 000", 0, n("1000000"), integer, ""},
		{"grouped with no-break spaces", "pay 1\u00a0000\u00a0000 €", "1\u00a0000\u00a0000", 0, n("1000000"), integer, ""},
		{"grouped with underscores", "pay 1_000", "1_000", 0, n("1000"), integer, ""},
		{"grouped with apostrophes", "zahle 1'000 CHF", "1'000", 0, n("1000"), integer, ""},
		{"grouped fraction", "pay 1,234.5 now", "1,234.5", 0, n("1234.5"), number, ""},
		{"fraction", "pay 1.5 now", "1.5", 0, n("1.5"), number, ""},
		{"three fraction digits after zero", "pay 0.500 now", "0.500", 0, n("0.5"), number, ""},
		{"three fraction digits after four", "pay 1234.567 now", "1234.567", 0, n("1234.567"), number, ""},
		{"zero", "pay 0 now", "0", 0, n("0"), integer, ""},
		{"number before a period", "pay 500.", "500", 0, n("500"), integer, ""},
		{"number before a comma and a list", "pay 10, then 20", "10", 0, n("10"), integer, ""},
		{"currency sign before", "pay $500 now", "500", 0, n("500"), integer, ""},
		{"at text start and end", "500", "500", 0, n("500"), integer, ""},

		// Scripts written without spaces, and particles attached to numbers.
		{"ja number between han", "送金15000円", "15000", 0, n("15000"), integer, ""},
		{"ja number prefix", "送金15000円", "1500", 0, n("1500"), integer, RejectPartialToken},
		{"ja scale", "タナカさんに1万円", "1", 0, n("1"), integer, RejectAmbiguousNumber},
		{"ja name inside text", "田中さんに送って", "田中", 0, "田中", str, RejectPartialToken},
		{"ja name in brackets", "「田中」に送って", "田中", 0, "田中", str, ""},
		{"ja katakana name before particle", "タナカに送って", "タナカ", 0, "タナカ", str, RejectPartialToken},
		{"zh name inside text", "给张三转账500元", "张三", 0, "张三", str, RejectPartialToken},
		{"zh number", "给张三转账500元", "500", 0, n("500"), integer, ""},
		{"zh grouped number", "转账1,500元", "1,500", 0, n("1500"), integer, ""},
		{"ko number with unit and particle", "15000원을 보내줘", "15000", 0, n("15000"), integer, ""},
		{"ko number prefix", "15000원을 보내줘", "1500", 0, n("1500"), integer, RejectPartialToken},
		{"ko scale", "1만원 보내줘", "1", 0, n("1"), integer, RejectAmbiguousNumber},
		{"ko name with particle", "김철수에게 보내", "김철수", 0, "김철수", str, RejectPartialToken},
		{"ko name before a space", "김철수 님께 보내", "김철수", 0, "김철수", str, ""},
		{"th number", "โอนเงิน 500 บาท", "500", 0, n("500"), integer, ""},
		{"th word inside text", "โอนเงิน 500 บาท", "เงิน", 0, "เงิน", str, RejectPartialToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := api.Instruction{Segments: []api.Segment{{Text: tt.text, Trust: TrustUser}}}
			span := spanOf(t, tt.text, tt.sub, tt.nth)
			if got := ground(newSpanIndex(&in), 0, span, tt.value, tt.rule); got != tt.want {
				t.Errorf("ground(%q, %q) = %q, want %q", tt.text, tt.sub, got, tt.want)
			}
		})
	}
}

func TestReadNumber(t *testing.T) {
	tests := []struct {
		text     string
		fraction bool
		lit      string
		reading  numberReading
	}{
		{"500,000", false, "500000", numberOK},
		{"1_000", false, "1000", numberOK},
		{"-12", false, "-12", numberOK},
		{"+7", false, "7", numberOK},
		{"-0", false, "-0", numberOK},
		{"1 000 000", false, "1000000", numberOK},
		{"3.25", true, "3.25", numberOK},
		{"1,000.5", true, "1000.5", numberOK},
		{"12345678901234567890123", false, "12345678901234567890123", numberOK},
		{"3.25", false, "", numberAmbiguous},
		{"007", false, "", numberAmbiguous},
		{"1e3", false, "", numberAmbiguous},
		{"100,", false, "", numberAmbiguous},
		{"1..2", true, "", numberAmbiguous},
		{"5.", true, "", numberAmbiguous},
		{"1.000,5", true, "", numberAmbiguous},
		{"12 won", false, "", numberAmbiguous},
		{"٥٠٠", false, "", numberAmbiguous},
		{"５００", false, "", numberAmbiguous},
		{",100", false, "", numberNot},
		{".5", true, "", numberNot},
		{"", false, "", numberNot},
		{"-", false, "", numberNot},
		{"five", false, "", numberNot},
	}
	for _, tt := range tests {
		lit, reading := readNumber(tt.text, tt.fraction)
		if lit != tt.lit || reading != tt.reading {
			t.Errorf("readNumber(%q, %v) = %q, %v; want %q, %v", tt.text, tt.fraction, lit, reading, tt.lit, tt.reading)
		}
		if want, ok := numberOracle(tt.text, tt.fraction); ok != (tt.reading == numberOK) || want != tt.lit {
			t.Errorf("numberOracle(%q, %v) = %q, %v: the test's two readings disagree", tt.text, tt.fraction, want, ok)
		}
	}
}

// The reader and the grammar's regular expressions agree on any text.
func FuzzReadNumber(f *testing.F) {
	for _, s := range []string{"500,000", "1 000", "12,50", "0.500", "1.500", "-0012", "1'000'000.25", "10, 20", "1\u00a0000"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, text string, fraction bool) {
		lit, reading := readNumber(text, fraction)
		want, ok := numberOracle(text, fraction)
		if (reading == numberOK) != ok || lit != want {
			t.Fatalf("readNumber(%q, %v) = %q, %v; the grammar says %q, %v", text, fraction, lit, reading, want, ok)
		}
	})
}

// A span with an end inside a token never grounds, whatever the text: every located candidate
// that grounds passes checkGrounded, which holds its ends against tokenEdgesOracle.
func TestPropertyPartialTokenNeverGrounds(t *testing.T) {
	alphabet := []rune("0123456789abcXYZ -_.@/+:',;!?()\"é\u0301€½张三送金円원을김タナカ万만\u00a0")
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.StringOfN(rapid.RuneFrom(alphabet), 1, 32, -1).Draw(t, "text")
		n := utf8.RuneCountInString(text)
		s := rapid.IntRange(0, n-1).Draw(t, "start")
		e := rapid.IntRange(s+1, n).Draw(t, "end")
		span := api.Span{s, e}
		sub := string([]rune(text)[s:e])
		in := api.Instruction{Segments: []api.Segment{{Text: text, Trust: TrustUser}}}
		// The value is exactly the span's text (or its number), so that only the token and
		// number rules can refuse it.
		var value any = sub
		rule := groundRule{kind: groundString}
		if lit, reading := readNumber(sub, true); reading == numberOK && rapid.Bool().Draw(t, "as number") {
			value, rule = json.Number(lit), groundRule{kind: groundNumber}
		}
		if ground(newSpanIndex(&in), 0, span, value, rule) == "" {
			checkGrounded(t, &in, 0, span, value, rule)
		}
	})
}

// Integers written in a valid grouping ground; written in any invalid grouping, never.
func TestPropertyNumberGroupings(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Int64().Draw(t, "value")
		digits := strconv.FormatInt(v, 10)
		sign := ""
		if v < 0 {
			sign, digits = "-", digits[1:]
		}
		sep := rapid.SampledFrom([]string{",", "_", "'", " ", "\u00a0", "\u202f", "\u2009"}).Draw(t, "sep")
		// Valid: groups of three from the right, the first of one to three digits.
		var groups []string
		for len(digits) > 3 {
			groups = append([]string{digits[len(digits)-3:]}, groups...)
			digits = digits[:len(digits)-3]
		}
		groups = append([]string{digits}, groups...)
		written := sign + strings.Join(groups, sep)
		if rapid.Bool().Draw(t, "ungrouped") {
			written = sign + strings.Join(groups, "")
		}
		text := "pay " + written + " now"
		span := spanOf(t, text, written, 0)
		in := api.Instruction{Segments: []api.Segment{{Text: text, Trust: TrustUser}}}
		for _, rule := range []groundRule{{kind: groundInteger}, {kind: groundNumber}} {
			if got := ground(newSpanIndex(&in), 0, span, json.Number(strconv.FormatInt(v, 10)), rule); got != "" {
				t.Fatalf("%q as %v: %q", written, rule.kind, got)
			}
		}

		// Invalid: regroup the same digits with sizes other than three somewhere, or mix
		// separators, or pad with a leading zero.
		all := strings.Join(groups, "")
		var bad string
		switch rapid.IntRange(0, 2).Draw(t, "how") {
		case 0:
			if len(all) < 2 {
				return
			}
			cut := rapid.IntRange(1, len(all)-1).Draw(t, "cut")
			if (len(all)-cut)%3 == 0 && cut <= 3 {
				cut = len(all) - 1 - (len(all)-cut)%3 // a last group of one or two digits
				if cut < 1 || (len(all)-cut)%3 == 0 {
					return
				}
			}
			bad = all[:cut] + sep + all[cut:]
		case 1:
			if len(groups) < 3 {
				return
			}
			other := map[string]string{",": " ", " ": ",", "_": ",", "'": ",", "\u00a0": ",", "\u202f": ",", "\u2009": ","}[sep]
			bad = groups[0] + sep + groups[1] + other + strings.Join(groups[2:], sep)
		case 2:
			bad = "0" + written[len(sign):]
		}
		bad = sign + bad
		text = "pay " + bad + " now"
		span = spanOf(t, text, bad, 0)
		in = api.Instruction{Segments: []api.Segment{{Text: text, Trust: TrustUser}}}
		for _, rule := range []groundRule{{kind: groundInteger}, {kind: groundNumber}} {
			if got := ground(newSpanIndex(&in), 0, span, json.Number(strconv.FormatInt(v, 10)), rule); got == "" {
				t.Fatalf("%q grounded %d as %v", bad, v, rule.kind)
			}
		}
	})
}

// BenchmarkGroundToken is one grounding check of a span at the end of a 1 KB segment, on a
// fresh index: ASCII text takes the fast path; other text has its word boundaries computed
// once by uniseg.
func BenchmarkGroundToken(b *testing.B) {
	for _, bc := range []struct{ name, text string }{
		{"ascii", strings.Repeat("send 500,000 won to 110-222-333 via Express, ", 20) + "pay 1,250 now"},
		{"unicode", strings.Repeat("send 500,000 won to 110-222-333 via Exprèss, ", 20) + "pay 1,250 now"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n := utf8.RuneCountInString(bc.text)
			span := api.Span{n - 9, n - 4}
			b.SetBytes(int64(len(bc.text)))
			for b.Loop() {
				x := newSpanIndex(&api.Instruction{Segments: []api.Segment{{Text: bc.text, Trust: TrustUser}}})
				if got := ground(x, 0, span, json.Number("1250"), groundRule{kind: groundInteger}); got != "" {
					b.Fatal(got)
				}
			}
		})
	}
}

// The ASCII fast path agrees with uniseg on every string of up to five characters over one
// character of each ASCII word-break class (and a few of class Other).
func TestASCIIWordBoundary(t *testing.T) {
	alphabet := "a1_.:,;'\" -\r\n\v\f@"
	var walk func(prefix []byte)
	check := func(s string) {
		cp := codePoints{}
		cp.build(s)
		cp.ascii = false // force the uniseg pass
		cp.start = make([]int, len(s)+1)
		for i := range cp.start {
			cp.start[i] = i
		}
		for p := 1; p < len(s); p++ {
			if got, want := asciiWordBoundary(s, p), cp.wordBoundary(p); got != want {
				t.Fatalf("%q at %d: fast path %v, uniseg %v", s, p, got, want)
			}
		}
	}
	walk = func(prefix []byte) {
		if len(prefix) > 0 {
			check(string(prefix))
		}
		if len(prefix) == 5 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			walk(append(prefix, alphabet[i]))
		}
	}
	walk(make([]byte, 0, 5))
}

func FuzzASCIIWordBoundary(f *testing.F) {
	f.Add("send 500,000 won to 110-222-333.")
	f.Add("don't 3.14 a_b x:y\r\n")
	f.Fuzz(func(t *testing.T, s string) {
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return
			}
		}
		cp := codePoints{textv: s, built: true, start: make([]int, len(s)+1)}
		for i := range cp.start {
			cp.start[i] = i
		}
		for p := 1; p < len(s); p++ {
			if got, want := asciiWordBoundary(s, p), cp.wordBoundary(p); got != want {
				t.Fatalf("%q at %d: fast path %v, uniseg %v", s, p, got, want)
			}
		}
	})
}
