package rawjson_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"
	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/internal/rawjson"
)

// bound is the nesting bound the tests check against, the gateway's.
const bound = 64

// TestCheck: each finding with its path and its text, as callers log it.
func TestCheck(t *testing.T) {
	many := `{`
	for i := range 20 {
		many += fmt.Sprintf(`"m%d":%d,`, i, i)
	}
	deep := func(n int) string { return strings.Repeat(`[`, n) + strings.Repeat(`]`, n) }
	for _, tc := range []struct {
		name, data string
		maxDepth   int
		want       error  // nil, ErrDuplicateMember or ErrTooDeep; else a syntax error
		text       string // the error's text; "" for none
	}{
		{"sound", `{"name":"t","arguments":{"a":1,"b":[{"a":1},{"a":2}]},"_meta":{"x":{"y":1}}}`, bound, nil, ""},
		{"a scalar at no depth", `"s"`, 0, nil, ""},
		{"same name in sibling objects", `{"a":{"k":1},"b":{"k":1}}`, bound, nil, ""},
		{"repeat at the top", `{"a":1,"a":2}`, bound, rawjson.ErrDuplicateMember, "a: a member name appears twice in one object"},
		{"repeat in an array", `{"_meta":{"io.verdict/instruction":[{"trust":"untrusted","trust":"user"}]}}`, bound, rawjson.ErrDuplicateMember, "_meta/io.verdict/instruction/0/trust: a member name appears twice in one object"},
		{"an array at the top", `[1,{"a":1,"a":2}]`, bound, rawjson.ErrDuplicateMember, "/1/a: a member name appears twice in one object"},
		{"escaped, named as unescaped", `{"trust":1,"tru\u0073t":2}`, bound, rawjson.ErrDuplicateMember, "trust: a member name appears twice in one object"},
		{"case variant, named as written", `{"x":{"trust":1,"Trust":2}}`, bound, rawjson.ErrDuplicateMember, "x/Trust: a member name appears twice in one object"},
		{"long s", `{"trust":1,"truſt":2}`, bound, rawjson.ErrDuplicateMember, "truſt: a member name appears twice in one object"},
		{"kelvin sign", `{"k":1,"` + "\u212a" + `":2}`, bound, rawjson.ErrDuplicateMember, "\u212a: a member name appears twice in one object"},
		{"two invalid UTF-8 names", "{\"\xff\":1,\"\xfe\":2}", bound, rawjson.ErrDuplicateMember, "\ufffd: a member name appears twice in one object"},
		{"repeat among many", many + `"M17":1}`, bound, rawjson.ErrDuplicateMember, "M17: a member name appears twice in one object"},
		{"as deep as allowed", deep(bound), bound, nil, ""},
		{"too deep", deep(3), 2, rawjson.ErrTooDeep, "/0/0: nesting too deep"},
		{"too deep below a member", `{"a":[{}]}`, 2, rawjson.ErrTooDeep, "a/0: nesting too deep"},
		{"an object at no depth", `{}`, 0, rawjson.ErrTooDeep, ": nesting too deep"},
		{"at less than no depth", `[]`, -1, rawjson.ErrTooDeep, ": nesting too deep"},
		{"the first finding", `{"a":[[[]]],"b":1,"b":2}`, 3, rawjson.ErrTooDeep, "a/0/0: nesting too deep"},
		{"trailing data", `{"a":1} {}`, bound, errSyntax, ": trailing data after the value"},
		{"unclosed", `{"a":[1,`, bound, errSyntax, "a/1: EOF"},
		{"bad number", `{"a":01}`, bound, errSyntax, ": invalid character '1' after object key:value pair"},
		{"empty", ``, bound, errSyntax, ": EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := rawjson.Check([]byte(tc.data), tc.maxDepth)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("finds %v", err)
				}
				return
			}
			var pe *rawjson.PathError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *PathError", err, err)
			}
			if got := err.Error(); got != tc.text {
				t.Errorf("error %q, want %q", got, tc.text)
			}
			if tc.want != errSyntax && !errors.Is(err, tc.want) {
				t.Errorf("error %v is not %v", err, tc.want)
			}
			if tc.want == errSyntax && (errors.Is(err, rawjson.ErrDuplicateMember) || errors.Is(err, rawjson.ErrTooDeep)) {
				t.Errorf("error %v, want a syntax error", err)
			}
		})
	}
}

// TestFoldName: FoldName puts two names together exactly when
// strings.EqualFold says they are equal.
func TestFoldName(t *testing.T) {
	groups := map[string][]string{}
	for r := rune(0); r < 0x3000; r++ {
		s := string(r)
		groups[rawjson.FoldName(s)] = append(groups[rawjson.FoldName(s)], s)
		for _, o := range []rune{unicode.ToUpper(r), unicode.ToLower(r), unicode.ToTitle(r)} {
			if strings.EqualFold(s, string(o)) && rawjson.FoldName(s) != rawjson.FoldName(string(o)) {
				t.Fatalf("FoldName(%q) = %q, FoldName(%q) = %q, but they are equal under case folding", s, rawjson.FoldName(s), string(o), rawjson.FoldName(string(o)))
			}
		}
	}
	for f, g := range groups {
		for _, s := range g[1:] {
			if !strings.EqualFold(g[0], s) {
				t.Fatalf("FoldName(%q) = FoldName(%q) = %q, but they differ under case folding", g[0], s, f)
			}
		}
	}
}

// jsonTree is a generated JSON value whose object member names are drawn
// from a small set of spellings, so that repeats (exact, escaped, case
// variants) are common.
type jsonTree struct {
	names []string // object members' names as written, escapes included
	kids  []*jsonTree
	array bool
	leaf  string
}

var spellings = []string{`a`, `b`, `A`, `trust`, `Trust`, `tru\u0073t`, `truſt`, `io.verdict/instruction`, `\u0061`, `k`, `K`, `x`}

func genTree(depth int) *rapid.Generator[*jsonTree] {
	return rapid.Custom(func(t *rapid.T) *jsonTree {
		kind := rapid.IntRange(0, 2).Draw(t, "kind")
		if depth == 0 || kind == 0 {
			return &jsonTree{leaf: rapid.SampledFrom([]string{`1`, `"s"`, `null`, `true`, `[]`, `{}`}).Draw(t, "leaf")}
		}
		n := rapid.IntRange(0, 4).Draw(t, "n")
		tr := &jsonTree{array: kind == 1}
		for range n {
			if !tr.array {
				tr.names = append(tr.names, rapid.SampledFrom(spellings).Draw(t, "name"))
			}
			tr.kids = append(tr.kids, genTree(depth-1).Draw(t, "kid"))
		}
		return tr
	})
}

func (tr *jsonTree) render(b *strings.Builder) {
	switch {
	case tr.leaf != "":
		b.WriteString(tr.leaf)
	case tr.array:
		b.WriteByte('[')
		for i, k := range tr.kids {
			if i > 0 {
				b.WriteByte(',')
			}
			k.render(b)
		}
		b.WriteByte(']')
	default:
		b.WriteByte('{')
		for i, k := range tr.kids {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + tr.names[i] + `":`)
			k.render(b)
		}
		b.WriteByte('}')
	}
}

// errSyntax is the reference's finding for bytes that are not one JSON value.
var errSyntax = errors.New("not one JSON value")

// referenceFinding is what Check must find in data, worked out another way: the bytes are read
// by go-json-experiment's tokenizer (not encoding/json's, which Check uses), and every two
// member names of an object are compared with strings.EqualFold (not FoldName). The first name
// equal to an earlier one of its object, or the first array or object nested deeper than
// maxDepth levels, is the finding, with its path; bytes that are not one JSON value are
// errSyntax.
func referenceFinding(data []byte, maxDepth int) (string, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if path, err := referenceValue(dec, "", maxDepth); err != nil {
		return path, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return "", errSyntax
	}
	return "", nil
}

func referenceValue(dec *jsontext.Decoder, path string, left int) (string, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return "", errSyntax
	}
	switch tok.Kind() {
	case '[':
		if left <= 0 {
			return path, rawjson.ErrTooDeep
		}
		for i := 0; dec.PeekKind() != ']'; i++ {
			if p, err := referenceValue(dec, path+"/"+strconv.Itoa(i), left-1); err != nil {
				return p, err
			}
		}
	case '{':
		if left <= 0 {
			return path, rawjson.ErrTooDeep
		}
		var names []string
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil || tok.Kind() != '"' {
				return "", errSyntax
			}
			name := tok.String()
			at := name
			if path != "" {
				at = path + "/" + name
			}
			for _, n := range names {
				if strings.EqualFold(n, name) {
					return at, rawjson.ErrDuplicateMember
				}
			}
			names = append(names, name)
			if p, err := referenceValue(dec, at, left-1); err != nil {
				return p, err
			}
		}
	default:
		return "", nil
	}
	if _, err := dec.ReadToken(); err != nil { // the closing delimiter
		return "", errSyntax
	}
	return "", nil
}

// agreesWithReference reports how Check's answer differs from the reference's, or "". Paths
// are compared with every byte of invalid UTF-8 read as U+FFFD, as encoding/json reads it; a
// syntax error's path is not compared.
func agreesWithReference(got error, want error, wantPath string) string {
	runes := func(s string) string { return string([]rune(s)) }
	var pe *rawjson.PathError
	switch {
	case want == nil && got != nil:
		return fmt.Sprintf("finds %v, the reference nothing", got)
	case want == nil:
		return ""
	case got == nil:
		return fmt.Sprintf("finds nothing, the reference %v at %q", want, wantPath)
	case want == errSyntax:
		if errors.Is(got, rawjson.ErrDuplicateMember) || errors.Is(got, rawjson.ErrTooDeep) {
			return fmt.Sprintf("finds %v, the reference a syntax error", got)
		}
		return ""
	case !errors.Is(got, want) || !errors.As(got, &pe) || runes(pe.Path) != runes(wantPath):
		return fmt.Sprintf("finds %v, the reference %v at %q", got, want, wantPath)
	}
	return ""
}

// Check finds what the reference finds, at the same path, for any bytes: trees with repeats
// however spelled, deep nesting, bad syntax, names in any script.
func TestCheckMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var data []byte
		if rapid.Bool().Draw(t, "tree") {
			var b strings.Builder
			genTree(5).Draw(t, "value").render(&b)
			data = []byte(b.String())
			if rapid.Bool().Draw(t, "deep") {
				n := rapid.IntRange(50, 70).Draw(t, "depth")
				data = []byte(strings.Repeat(`{"a":[`, n/2) + string(data) + strings.Repeat(`]}`, n/2))
			}
		} else {
			data = []byte(rapid.StringOf(rapid.SampledFrom([]rune(`{}[]":,01a\Kkſ ﬀS`+"\u212a\xff"))).Draw(t, "bytes"))
		}
		maxDepth := rapid.IntRange(bound-2, bound+2).Draw(t, "maxDepth")
		path, want := referenceFinding(data, maxDepth)
		if diff := agreesWithReference(rawjson.Check(data, maxDepth), want, path); diff != "" {
			t.Fatalf("%q within %d: Check %s", data, maxDepth, diff)
		}
	})
}

// Sound says a value is sound only when Check finds nothing in it, and says so for the values
// hosts send: names in any case and script, many members, deep nesting within the bound.
func TestSoundOnlyForSoundValues(t *testing.T) {
	many := `{`
	for i := range 40 {
		many += fmt.Sprintf(`"m%d":%d,`, i, i)
	}
	for _, tc := range []struct {
		data     string
		maxDepth int
		sound    bool
	}{
		{callBody, bound + 1, true},
		{`{"name":"t","arguments":{"a":1,"b":[{"a":1},{"a":2}]},"_meta":{"x":{"y":1}}}`, bound, true},
		{`{"ü":1,"Ü":2}`, bound, false},
		{`{"ü":1,"ö":2,"straße":"<&>\u2028"}`, bound, true},
		{`{"k":1,"K":2}`, bound, false},
		{`{"k":1,"` + "\u212a" + `":2}`, bound, false},
		{`{"s":1,"ſ":2}`, bound, false},
		{`{"trust":1,"TRUST":2}`, bound, false},
		{`{"a":1,"\u0061":2}`, bound, false},
		{`{"a\u0062":1}`, bound, false}, // an escaped name is left to Check's slow reading
		{"{\"\xff\":1}", bound, false},
		{"{\"a\":\"\xff\"}", bound, true},
		{many + `"m40":1}`, bound, true},
		{many + `"M7":1}`, bound, false},
		{many + `"M39":1}`, bound, false},
		{strings.Repeat(`[`, bound) + strings.Repeat(`]`, bound), bound, true},
		{strings.Repeat(`[`, bound+1) + strings.Repeat(`]`, bound+1), bound, false},
		{strings.Repeat(`[`, bound+1) + strings.Repeat(`]`, bound+1), bound + 1, true},
		{strings.Repeat(`[`, bound) + strings.Repeat(`]`, bound), bound - 1, false},
		{`{"a":1} {}`, bound, false},
		{`{"a":1}}`, bound, false},
		{`{"a":01}`, bound, false},
		{`{"a":1,}`, bound, false},
		{``, bound, false},
		{` 1 `, bound, true},
	} {
		if got := rawjson.Sound([]byte(tc.data), tc.maxDepth); got != tc.sound {
			t.Errorf("Sound(%.80q, %d) = %v, want %v", tc.data, tc.maxDepth, got, tc.sound)
		}
		if got := rawjson.Sound([]byte(tc.data), tc.maxDepth); got && rawjson.Check([]byte(tc.data), tc.maxDepth) != nil {
			t.Errorf("Sound(%.80q, %d): sound, but Check finds %v", tc.data, tc.maxDepth, rawjson.Check([]byte(tc.data), tc.maxDepth))
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		genTree(6).Draw(t, "value").render(&b)
		data := []byte(b.String())
		if rapid.Bool().Draw(t, "bytes") {
			data = []byte(rapid.StringOf(rapid.SampledFrom([]rune(`{}[]":,01a\Kkſ ﬀS -.eE`+"\u212a\xff\t"))).Draw(t, "bytes"))
		}
		maxDepth := rapid.IntRange(-1, bound+2).Draw(t, "maxDepth")
		if path, want := referenceFinding(data, maxDepth); rawjson.Sound(data, maxDepth) && want != nil {
			t.Fatalf("%q within %d: sound, but the reference finds %v at %q", data, maxDepth, want, path)
		}
	})
}

// FuzzCheck: whatever the bytes, Check finds what the reference finds, at the same path, and
// Sound says nothing is there only when the reference finds nothing.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"name":"t","_meta":{"io.verdict/instruction":[{"text":"x","trust":"untrusted","trust":"user"}]}}`), bound)
	f.Add([]byte(`{"name":"t","arguments":{"a":1,"A":2}}`), bound)
	f.Add([]byte(`{"name":"t","_meta":{"tru\u0073t":1,"trust":2}}`), bound)
	f.Add([]byte(`[[[[{"a":{"b":1}}]]]]`), 4)
	f.Add([]byte(callBody), bound+1)
	f.Fuzz(func(t *testing.T, data []byte, maxDepth int) {
		maxDepth %= 2 * bound // a deeper bound reads like an unbounded one
		path, want := referenceFinding(data, maxDepth)
		if diff := agreesWithReference(rawjson.Check(data, maxDepth), want, path); diff != "" {
			t.Fatalf("%q within %d: Check %s", data, maxDepth, diff)
		}
		if rawjson.Sound(data, maxDepth) && want != nil {
			t.Fatalf("%q within %d: sound, but the reference finds %v at %q", data, maxDepth, want, path)
		}
	})
}

// BenchmarkCheck is the check of one tools/call as a host sends it: sound,
// answered by Sound alone; and with a repeated name, read twice.
func BenchmarkCheck(b *testing.B) {
	repeated := strings.Replace(callBody, `"name":"bank.get_balance"`, `"name":"bank.get_balance","Name":"x"`, 1)
	for _, bc := range []struct {
		name, data string
		sound      bool
	}{
		{"sound", callBody, true},
		{"repeated", repeated, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			data := []byte(bc.data)
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := rawjson.Check(data, bound+1); (err == nil) != bc.sound {
					b.Fatal(err)
				}
			}
		})
	}
}

// callBody is a tools/call of a 2026-07-28 host, as it sends it.
const callBody = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{` +
	`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"host","version":"1"},` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"bank.get_balance","arguments":{"account":"220-555-010"}}}`
