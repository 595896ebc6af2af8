package gates

import (
	"fmt"
	"strings"

	"pgregory.net/rapid"
)

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
