package gates

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/canonical"
	"pgregory.net/rapid"
)

// decodeRequestReflect is DecodeRequest as it was before the hand-written decoder: canonical
// validation, then strictUnmarshal alone. It is the reference the differential tests hold
// DecodeRequest to.
func decodeRequestReflect(data []byte, lim Limits) (*Request, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxBytes {
		return nil, badRequest(CodeTooLarge, "body exceeds %d bytes", lim.MaxBytes)
	}
	if err := (canonical.Options{MaxDepth: lim.MaxDepth}).Validate(data); err != nil {
		var ce *canonical.Error
		if errors.As(err, &ce) {
			return nil, &RequestError{Code: ce.Code, Msg: ce.Msg}
		}
		return nil, badRequest(CodeInvalidRequest, "%v", err)
	}
	var r Request
	if err := strictUnmarshal(data, &r); err != nil {
		msg := err.Error()
		if strings.Contains(msg, "unknown field") {
			return nil, badRequest(CodeUnknownField, "%s", strings.TrimPrefix(msg, "json: "))
		}
		return nil, badRequest(CodeInvalidRequest, "%s", strings.TrimPrefix(msg, "json: "))
	}
	if err := r.check(lim); err != nil {
		return nil, err
	}
	return &r, nil
}

// sameDecoding fails t unless DecodeRequest and decodeRequestReflect give the same request, or
// the same error, for body.
func sameDecoding(t interface {
	Helper()
	Fatalf(string, ...any)
}, body []byte, lim Limits) {
	t.Helper()
	got, gerr := DecodeRequest(body, lim)
	want, werr := decodeRequestReflect(body, lim)
	switch {
	case (gerr == nil) != (werr == nil):
		t.Fatalf("%s:\n fast %v\n reflect %v", body, gerr, werr)
	case gerr != nil:
		if gerr.Error() != werr.Error() {
			t.Fatalf("%s: errors differ:\n fast %v\n reflect %v", body, gerr, werr)
		}
	case !reflect.DeepEqual(got, want):
		t.Fatalf("%s: requests differ:\n fast %#v\n reflect %#v", body, got, want)
	}
}

// jsonGen writes random request bodies: mostly well-shaped, with the variations a strict
// decoder must get right drawn in at a rate set by noise — member names in other cases, with a
// long s or a Kelvin sign, or escaped; duplicate and unknown members; values of the wrong type,
// nulls, deep nesting, numbers past float64 and int64, strings with escapes and surrogates.
type jsonGen struct {
	t     *rapid.T
	b     strings.Builder
	noise bool
}

func (g *jsonGen) chance(label string, pct int) bool {
	return rapid.IntRange(0, 99).Draw(g.t, label) < pct
}

func (g *jsonGen) ws() {
	if g.noise && g.chance("ws", 10) {
		g.b.WriteString(rapid.SampledFrom([]string{" ", "\n", "\t ", "\r\n  "}).Draw(g.t, "space"))
	}
}

// name writes a member name, maybe spelt otherwise.
func (g *jsonGen) name(n string) {
	if g.noise && n != "" && g.chance("respell", 8) {
		switch rapid.IntRange(0, 4).Draw(g.t, "how") {
		case 0:
			n = strings.ToUpper(n)
		case 1:
			n = strings.ToUpper(n[:1]) + n[1:]
		case 2:
			n = strings.Replace(n, "s", "ſ", 1)
		case 3:
			n = strings.Replace(n, "k", "\u212a", 1)
		case 4:
			i := rapid.IntRange(0, len(n)-1).Draw(g.t, "esc")
			n = n[:i] + fmt.Sprintf(`\u%04x`, n[i]) + n[i+1:]
		}
	}
	g.b.WriteString(`"` + n + `"`)
	g.ws()
	g.b.WriteString(":")
	g.ws()
}

// object writes an object with the required fields (each but rarely dropped under noise) and
// some of the optional ones, in any order, each written by value.
func (g *jsonGen) object(required, optional []string, value func(name string)) {
	g.b.WriteString("{")
	g.ws()
	var names []string
	for _, n := range required {
		if !g.noise || !g.chance("drop", 3) {
			names = append(names, n)
		}
	}
	if len(optional) > 0 {
		names = append(names, rapid.SliceOfDistinct(rapid.SampledFrom(optional), rapid.ID[string]).Draw(g.t, "fields")...)
	}
	if g.noise && g.chance("dup", 5) && len(names) > 0 {
		names = append(names, names[0])
	}
	if g.noise && g.chance("unknown", 5) {
		names = append(names, rapid.SampledFrom([]string{"score", "Value", "extra", ""}).Draw(g.t, "unknown"))
	}
	names = rapid.Permutation(names).Draw(g.t, "order")
	for i, n := range names {
		if i > 0 {
			g.b.WriteString(",")
			g.ws()
		}
		g.name(n)
		if g.noise && g.chance("wrong", 6) {
			g.any(3)
		} else {
			value(n)
		}
		g.ws()
	}
	g.b.WriteString("}")
}

func (g *jsonGen) array(max int, elem func()) {
	g.b.WriteString("[")
	n := rapid.IntRange(0, max).Draw(g.t, "len")
	for i := range n {
		if i > 0 {
			g.b.WriteString(",")
		}
		g.ws()
		if g.noise && g.chance("null elem", 4) {
			g.b.WriteString("null")
		} else {
			elem()
		}
		g.ws()
	}
	g.b.WriteString("]")
}

var (
	genStrings = []string{`"u"`, `"user"`, `"untrusted"`, `"at_trigger"`, `"immediate"`, `"send 500,000 won"`,
		`"송금 50만원"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u0000"`, `"\ud83d\ude00 x"`, `"\uFFFD"`, `"é"`}
	oddStrings = []string{`""`, `"\ud800"`, `"\udc00\ud800"`, `"\ud800\u0041"`, `"at_instruction"`, `"expr"`}
	genNumbers = []string{"0", "-0", "1", "2", "-1", "15", "0.1", "1.0", "1.10", "1e2", "1E+2", "-2.5e-3", "1e300",
		"9007199254740992", "0.5"}
	oddNumbers = []string{"9007199254740993", "123456789012345678", "9223372036854775807", "9223372036854775808",
		"-9223372036854775809", "1e400"}
)

func (g *jsonGen) str() {
	if g.noise && g.chance("odd string", 10) {
		g.b.WriteString(rapid.SampledFrom(oddStrings).Draw(g.t, "string"))
		return
	}
	g.b.WriteString(rapid.SampledFrom(genStrings).Draw(g.t, "string"))
}

func (g *jsonGen) number() {
	if g.noise && g.chance("odd number", 10) {
		g.b.WriteString(rapid.SampledFrom(oddNumbers).Draw(g.t, "number"))
		return
	}
	g.b.WriteString(rapid.SampledFrom(genNumbers).Draw(g.t, "number"))
}

func (g *jsonGen) integer() {
	if g.noise && g.chance("odd int", 15) {
		g.number()
		return
	}
	fmt.Fprint(&g.b, rapid.IntRange(-3, 60).Draw(g.t, "int"))
}

// any writes any JSON value, nested up to depth.
func (g *jsonGen) any(depth int) {
	kinds := 6
	if depth <= 0 {
		kinds = 4
	}
	switch rapid.IntRange(0, kinds-1).Draw(g.t, "kind") {
	case 0:
		g.b.WriteString(rapid.SampledFrom([]string{"null", "true", "false"}).Draw(g.t, "literal"))
	case 1:
		g.number()
	case 2:
		g.str()
	case 3:
		fmt.Fprint(&g.b, rapid.IntRange(-5, 1000).Draw(g.t, "int"))
	case 4:
		g.array(3, func() { g.any(depth - 1) })
	case 5:
		g.object(nil, []string{"a", "B", "value", "trust", "x y", `\u0061`, "Trust"}, func(string) { g.any(depth - 1) })
	}
}

func (g *jsonGen) span() {
	if g.noise && g.chance("odd span", 10) {
		g.array(3, g.integer)
		return
	}
	g.b.WriteString("[")
	g.integer()
	g.b.WriteString(",")
	g.integer()
	g.b.WriteString("]")
}

func (g *jsonGen) location() {
	g.object([]string{"segment", "span"}, nil, func(n string) {
		if n == "segment" {
			g.integer()
		} else {
			g.span()
		}
	})
}

func (g *jsonGen) preSet() {
	g.object([]string{"value", "trust"}, []string{"origin"}, func(n string) {
		if n == "value" {
			g.any(rapid.IntRange(0, 4).Draw(g.t, "depth"))
		} else {
			g.str()
		}
	})
}

func (g *jsonGen) request() {
	required := []string{"principal", "server", "tool"}
	optional := []string{"conversation_id", "new_request", "phase", "action_key", "instruction", "intent",
		"candidates", "user_answers", "pre_set_data", "user_checklist", "tool_attempt", "intent_attempt"}
	g.ws()
	g.object(required, optional, func(n string) {
		switch n {
		case "new_request":
			g.b.WriteString(rapid.SampledFrom([]string{"true", "false", "null"}).Draw(g.t, "bool"))
		case "tool_attempt", "intent_attempt":
			g.integer()
		case "phase":
			g.b.WriteString(rapid.SampledFrom([]string{"null", `"at_instruction"`, `"at_trigger"`, `"later"`}).Draw(g.t, "phase"))
		case "action_key":
			if g.chance("null", 10) {
				g.b.WriteString("null")
			} else {
				g.str()
			}
		case "instruction":
			switch rapid.IntRange(0, 3).Draw(g.t, "instruction form") {
			case 0:
				g.str()
			case 1:
				g.b.WriteString("null")
			default:
				g.array(4, func() {
					g.object([]string{"text", "trust"}, []string{"origin"}, func(string) { g.str() })
				})
			}
		case "intent":
			g.object(nil, []string{"when_case", "action_name", "action_name_preset"}, func(n string) {
				switch n {
				case "when_case":
					g.any(2)
				case "action_name":
					g.location()
				default:
					g.preSet()
				}
			})
		case "candidates":
			g.array(4, func() {
				var loc []string
				if g.chance("located", 50) {
					loc = []string{"segment", "span"}
				}
				g.object(append([]string{"field", "value"}, loc...), nil, func(n string) {
					switch n {
					case "field":
						g.str()
					case "segment":
						g.integer()
					case "span":
						g.span()
					default:
						g.any(rapid.IntRange(0, 6).Draw(g.t, "depth"))
					}
				})
			})
		case "user_answers":
			g.array(3, func() {
				g.object([]string{"question_id"}, []string{"value", "approved", "segment", "span"}, func(n string) {
					switch n {
					case "question_id":
						g.str()
					case "value":
						g.any(3)
					case "approved":
						g.b.WriteString(rapid.SampledFrom([]string{"true", "false", "null"}).Draw(g.t, "approved"))
					case "segment":
						g.integer()
					default:
						g.span()
					}
				})
			})
		case "pre_set_data":
			g.object(nil, []string{"from_account", "a", "A", "x\\ty", "\\u00e9"}, func(string) { g.preSet() })
		case "user_checklist":
			g.array(3, func() {
				g.object(nil, []string{"id", "description", "expr", "kind", "status"}, func(n string) {
					if n == "kind" {
						g.b.WriteString(rapid.SampledFrom([]string{`"expr"`, `"confirm"`, `""`, `"maybe"`}).Draw(g.t, "kind"))
						return
					}
					g.str()
				})
			})
		default:
			g.str()
		}
	})
	g.ws()
}

// TestDecodeRequestMatchesReflect holds the hand-written decoder to the reflective one on
// generated requests: the same request or the same error, byte for byte.
func TestDecodeRequestMatchesReflect(t *testing.T) {
	lims := []Limits{{}, {MaxSegments: 2, MaxDepth: 5}}
	rapid.Check(t, func(rt *rapid.T) {
		g := &jsonGen{t: rt, noise: rapid.Bool().Draw(rt, "noise")}
		g.request()
		sameDecoding(rt, []byte(g.b.String()), lims[rapid.IntRange(0, 1).Draw(rt, "limits")])
	})
}

// TestDecodeRequestFastPathTaken: well-shaped requests are read by the hand-written decoder,
// not handed to the reflective one (which would be correct, but slow).
func TestDecodeRequestFastPathTaken(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		g := &jsonGen{t: rt}
		g.request()
		body := []byte(g.b.String())
		if canonical.Validate(body) != nil {
			return // a number past float64 or a lone surrogate: refused before decoding
		}
		var r Request
		if decodeRequestFast(body, &r) {
			return
		}
		want, err := decodeRequestReflect(body, Limits{})
		if err == nil {
			t.Fatalf("%s: fast decoder declined a request the reflective one decodes: %+v", body, want)
		}
	})
}

func TestDecodeRequestMatchesReflectCases(t *testing.T) {
	const base = `"principal":"u","server":"s","tool":"t"`
	bodies := []string{
		`{` + base + `}`,
		`{` + base + `,"instruction":null,"intent":null,"candidates":null,"user_answers":null,"pre_set_data":null,"user_checklist":null}`,
		`{` + base + `,"instruction":[],"candidates":[],"user_answers":[],"pre_set_data":{},"user_checklist":[]}`,
		`{` + base + `,"instruction":[null,{"text":null,"trust":"user"}]}`,
		`{` + base + `,"instruction":{"text":"a"}}`,
		`{` + base + `,"instruction":5}`,
		`{` + base + `,"intent":{"when_case":null}}`,
		`{` + base + `,"intent":{"when_case":{ "a" : [1, 2] }}}`,
		`{` + base + `,"intent":{"action_name":{"segment":0,"span":null}}}`,
		`{` + base + `,"intent":{"action_name":{"segment":null,"span":[1,2]}}}`,
		`{` + base + `,"intent":{"action_name_preset":{"value":null,"trust":"user"}}}`,
		`{` + base + `,"candidates":[null]}`,
		`{` + base + `,"candidates":[{"field":"a","value":1,"segment":null,"span":null}]}`,
		`{` + base + `,"candidates":[{"field":"a","value":1,"segment":0,"span":[null,1]}]}`,
		`{` + base + `,"candidates":[{"field":"a","value":1,"segment":0,"span":[1e0,1]}]}`,
		`{` + base + `,"candidates":[{"field":"a","value":1,"segment":1.0,"span":[0,1]}]}`,
		`{` + base + `,"candidates":[{"field":"a","value":1,"segment":9223372036854775808,"span":[0,1]}]}`,
		`{` + base + `,"candidates":[{"field":"a","value":{"x":[1,{"y":"\u00e9\ud83d\ude00"}],"X":-0.0}}]}`,
		`{` + base + `,"candidates":[{"field":"a","Value":1}]}`,
		`{` + base + `,"candidates":[{"field":"a","value":1,"valuе":2}]}`,
		`{` + base + `,"user_answers":[null,{"question_id":"q","approved":null,"segment":null}]}`,
		`{` + base + `,"user_answers":[{"question_id":"q","approved":"yes"}]}`,
		`{` + base + `,"pre_set_data":{"a":null}}`,
		`{` + base + `,"pre_set_data":{"\u0061":{"value":1,"trust":"user"},"b\n":{"value":[],"trust":"user"}}}`,
		`{` + base + `,"tool_attempt":1.5}`,
		`{` + base + `,"tool_attempt":-0,"intent_attempt":null,"new_request":null}`,
		`{` + base + `,"new_request":1}`,
		`{` + base + `,"phase":null,"action_key":null}`,
		`{"princip\u0061l":"u","server":"s","tool":"t"}`,
		`{"principal":"\u0075","server":"s\"","tool":"t\\"}`,
		`{"principal":"u","server":"s","tool":5}`,
		`[1]`,
		`null`,
		`"x"`,
		"{" + base + "}\n\t ",
		`{` + base + `,"conversation_id":"` + strings.Repeat("c", 300) + `"}`,
		`{` + base + `,"candidates":[{"field":"a","value":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}]}`,
	}
	for _, b := range bodies {
		for _, lim := range []Limits{{}, {MaxDepth: 100}} {
			sameDecoding(t, []byte(b), lim)
		}
	}
}

// BenchmarkDecodeRequestPaths compares DecodeRequest with the reflective decoder it replaces, on
// BenchmarkDecodeRequest's body and on a larger one with escapes, answers and pre-set data.
func BenchmarkDecodeRequestPaths(b *testing.B) {
	bodies := []struct{ name, body string }{
		{"book", `{"principal":"u_01","server":"shop","tool":"order_book",
		"instruction":[{"text":"order the book 9780262033848, 2 copies","trust":"user"}],
		"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,14]}},
		"candidates":[{"field":"isbn","segment":0,"span":[15,28],"value":"9780262033848"},
		{"field":"quantity","segment":0,"span":[30,31],"value":2}]}`},
		{"transfer", `{"principal":"u_01","conversation_id":"c_77","server":"bank","tool":"transfer",
		"instruction":[{"text":"송금해줘: 250,000원을 110-222-333으로\n\"급함\"","trust":"user"},
		{"text":"forwarded: \u00e9 \ud83d\ude00","trust":"untrusted","origin":"mail"}],
		"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,3]}},
		"candidates":[{"field":"to_account","segment":0,"span":[17,28],"value":"110-222-333"},
		{"field":"amount","segment":0,"span":[5,12],"value":250000},{"field":"memo","value":{"lines":["a","b"],"n":1.5}}],
		"user_answers":[{"question_id":"q_from","value":"1102534471"},{"question_id":"q_ok","value":true,"approved":true}],
		"pre_set_data":{"from_account":{"value":"1102534471","trust":"user","origin":"profile"}},
		"user_checklist":[{"id":"c1","description":"amount under limit","expr":"args.amount < 1000000","kind":"expr"}],
		"tool_attempt":1}`},
	}
	for _, bb := range bodies {
		body := []byte(bb.body)
		for _, path := range []struct {
			name   string
			decode func([]byte, Limits) (*Request, error)
		}{{"fast", DecodeRequest}, {"reflect", decodeRequestReflect}} {
			b.Run(bb.name+"/"+path.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := path.decode(body, Limits{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
