package executor

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/internal/httpx"
)

// sameRequestDecoding fails t unless decodeExecuteRequest decodes body as httpx.DecodeStrict
// does: the same request, or the same API error.
func sameRequestDecoding(t interface {
	Helper()
	Fatalf(string, ...any)
}, body []byte) {
	t.Helper()
	var got, want ExecuteRequest
	gerr := decodeExecuteRequest(body, &got)
	werr := httpx.DecodeStrict(body, &want)
	switch {
	case (gerr == nil) != (werr == nil):
		t.Fatalf("%q:\n fast %v\n strict %v", body, gerr, werr)
	case gerr != nil:
		var ge, we *httpx.Error
		if !errors.As(gerr, &ge) || !errors.As(werr, &we) || *ge != *we {
			t.Fatalf("%q: errors differ:\n fast %#v\n strict %#v", body, gerr, werr)
		}
	case got.Verdict != want.Verdict || string(got.Arguments) != string(want.Arguments) ||
		(got.Arguments == nil) != (want.Arguments == nil):
		t.Fatalf("%q: requests differ:\n fast %q %q\n strict %q %q", body, got.Verdict, got.Arguments, want.Verdict, want.Arguments)
	}
}

func TestDecodeExecuteRequest(t *testing.T) {
	tests := []struct {
		body string
		fast bool // read by the hand-written reader, not handed on
	}{
		{`{"verdict":"eyJ.eyJ.sig","arguments":{"account":"1102534471"}}`, true},
		{` { "arguments" : { "a" : [1, 2.50, {"b": null}] } , "verdict" : "x" } ` + "\n", true},
		{`{"verdict":"a\u0041\n","arguments":{}}`, true},
		{`{"arguments":{"n":123456789012345678901234567890}}`, true},
		{`{}`, true},
		{`{"verdict":"x"}`, true},
		{`{"verdict":"x","arguments":null}`, false},
		{`{"verdict":"x","arguments":[1]}`, false},
		{`{"verdict":"x","arguments":"{}"}`, false},
		{`{"verdict":null,"arguments":{}}`, false},
		{`{"verdict":1,"arguments":{}}`, false},
		{`{"verdict":"x","Verdict":"y","arguments":{}}`, false},
		{`{"VERDICT":"x","arguments":{}}`, false},
		{`{"verdict":"x","arguments":{},"extra":1}`, false},
		{`{"verdict":"x","verdict":"y","arguments":{}}`, false},
		{`{"verdict":"x","arguments":{"a":1},"arguments":{"b":2}}`, false},
		{`{"verd\u0069ct":"x","arguments":{}}`, true}, // encoding/json matches the unescaped name too
		{`{"verdict":"x","arguments":{}} {}`, false},
		{`{"verdict":"x","arguments":{}`, false},
		{`{"verdict":"x",}`, false},
		{`{"verdict":"\ud800","arguments":{}}`, false},
		{"{\"verdict\":\"\xff\",\"arguments\":{}}", false},
		{`{"verdict":"x","arguments":{"a":"` + "\xff" + `"}}`, true},
		{`{"verdict":"x","arguments":` + strings.Repeat(`{"a":`, 2000) + `1` + strings.Repeat(`}`, 2000) + `}`, false},
		{`[]`, false},
		{`null`, false},
		{``, false},
		{`"x"`, false},
	}
	for _, tt := range tests {
		var req ExecuteRequest
		if got := readExecuteRequest([]byte(tt.body), &req); got != tt.fast {
			t.Errorf("%.80q: read by the fast reader %v, want %v", tt.body, got, tt.fast)
		}
		sameRequestDecoding(t, []byte(tt.body))
	}
}

// requestGen writes execute request bodies: mostly well-shaped, with what a strict decoder must
// get right drawn in — names in other cases or escaped, repeated and unknown members, values of
// other types, nulls, whitespace, escapes, bad bytes, truncation and trailing data.
type requestGen struct {
	t *rapid.T
	b strings.Builder
}

func (g *requestGen) chance(label string, pct int) bool {
	return rapid.IntRange(0, 99).Draw(g.t, label) < pct
}

func (g *requestGen) ws() {
	if g.chance("ws", 15) {
		g.b.WriteString(rapid.SampledFrom([]string{" ", "\n", "\t ", "\r\n  "}).Draw(g.t, "space"))
	}
}

var (
	reqNames   = []string{"verdict", "arguments", "Verdict", "ARGUMENTS", "verd\\u0069ct", "argument\\u0073", "extra", "", "verdıct"}
	reqStrings = []string{`"eyJ.eyJ.sig"`, `""`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u0000"`, `"\ud83d\ude00"`, `"\ud800"`,
		`"é"`, "\"\xff\"", "\"a\x01\"", `"\u2028<&>"`}
	reqScalars = []string{"null", "true", "false", "0", "-0", "1.50", "1e400", "123456789012345678901234567890", "-", "01", "nul"}
)

func (g *requestGen) value(depth int) {
	g.ws()
	switch k := rapid.IntRange(0, 4).Draw(g.t, "kind"); {
	case k == 0 || depth <= 0 && k >= 3:
		g.b.WriteString(rapid.SampledFrom(reqStrings).Draw(g.t, "string"))
	case k <= 2:
		g.b.WriteString(rapid.SampledFrom(reqScalars).Draw(g.t, "scalar"))
	case k == 3:
		g.object(depth - 1)
	default:
		g.b.WriteString("[")
		for i := range rapid.IntRange(0, 3).Draw(g.t, "len") {
			if i > 0 {
				g.b.WriteString(",")
			}
			g.value(depth - 1)
		}
		g.b.WriteString("]")
	}
	g.ws()
}

func (g *requestGen) object(depth int) {
	g.b.WriteString("{")
	for i := range rapid.IntRange(0, 3).Draw(g.t, "members") {
		if i > 0 {
			g.b.WriteString(",")
		}
		g.ws()
		g.b.WriteString(`"` + rapid.SampledFrom([]string{"a", "b", "account", "A", "x\\n"}).Draw(g.t, "key") + `":`)
		g.value(depth)
	}
	g.b.WriteString("}")
}

// body writes a request: the two members (each maybe dropped, repeated, renamed or of another
// type) and maybe an unknown one, in any order.
func (g *requestGen) body() []byte {
	names := []string{"verdict", "arguments"}
	if g.chance("odd names", 30) {
		names = rapid.SliceOfN(rapid.SampledFrom(reqNames), 0, 4).Draw(g.t, "names")
	}
	g.ws()
	g.b.WriteString("{")
	for i, n := range names {
		if i > 0 {
			g.b.WriteString(",")
		}
		g.ws()
		g.b.WriteString(`"` + n + `"`)
		g.ws()
		g.b.WriteString(":")
		switch {
		case g.chance("other value", 10):
			g.value(2)
		case n == "arguments":
			g.ws()
			g.object(3)
			g.ws()
		default:
			g.ws()
			g.b.WriteString(rapid.SampledFrom(reqStrings).Draw(g.t, "verdict"))
			g.ws()
		}
	}
	g.b.WriteString("}")
	g.ws()
	s := g.b.String()
	if g.chance("trailing", 5) {
		s += rapid.SampledFrom([]string{"{}", "x", ",", "null"}).Draw(g.t, "trailing")
	}
	if g.chance("truncate", 5) && len(s) > 0 {
		s = s[:rapid.IntRange(0, len(s)-1).Draw(g.t, "cut")]
	}
	return []byte(s)
}

func TestDecodeExecuteRequestMatchesDecodeStrict(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		g := &requestGen{t: rt}
		sameRequestDecoding(rt, g.body())
	})
}

func FuzzDecodeExecuteRequest(f *testing.F) {
	for _, s := range []string{
		`{"verdict":"eyJ.eyJ.sig","arguments":{"account":"1102534471"}}`,
		`{"verdict":"x","Verdict":"y","arguments":{}}`,
		`{"verdict":"x","arguments":null}`,
		`{"arguments":{"a":[1,{"b":"\u00e9"}]},"verdict":"\ud83d\ude00"}`,
		`{"verdict":"x","verdict":"y"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameRequestDecoding(t, body)
	})
}

func BenchmarkDecodeExecuteRequest(b *testing.B) {
	body := []byte(`{"verdict":"` + strings.Repeat("eyJhbGciOiJFZERTQSJ9", 25) + `","arguments":{"account":"1102534471","amount":500000,"memo":"rent"}}`)
	for _, bb := range []struct {
		name   string
		decode func([]byte, *ExecuteRequest) error
	}{
		{"fast", decodeExecuteRequest},
		{"strict", func(body []byte, req *ExecuteRequest) error { return httpx.DecodeStrict(body, req) }},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var req ExecuteRequest
				if err := bb.decode(body, &req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
