package gates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/canonical"
	"pgregory.net/rapid"
)

func TestDecodeRequest(t *testing.T) {
	const base = `"principal":"u","server":"s","tool":"t"`
	tests := []struct {
		name string
		body string
		lim  Limits
		code string // "" = accepted
	}{
		{"minimal", `{` + base + `}`, Limits{}, ""},
		{"segments", `{` + base + `,"instruction":[{"text":"a","trust":"user","origin":"x"}]}`, Limits{}, ""},
		{"plain instruction", `{` + base + `,"instruction":"hello"}`, Limits{}, ""},
		{"exact numbers pass", `{` + base + `,"candidates":[{"field":"a","value":0.1},{"field":"b","value":1e300},{"field":"c","value":1.0}]}`, Limits{}, ""},
		{"2^53+1 is not exact", `{` + base + `,"candidates":[{"field":"a","value":9007199254740993}]}`, Limits{}, "number_not_exact"},
		{"long id is not exact", `{` + base + `,"candidates":[{"field":"a","value":123456789012345678}]}`, Limits{}, "number_not_exact"},
		{"unknown top field", `{` + base + `,"tool_reselected_by_user":true}`, Limits{}, api.CodeUnknownField},
		{"unknown segment field", `{` + base + `,"instruction":[{"text":"a","trust":"user","score":1}]}`, Limits{}, api.CodeUnknownField},
		{"unknown candidate field", `{` + base + `,"candidates":[{"field":"a","value":1,"source":"pre_set_data"}]}`, Limits{}, api.CodeUnknownField},
		{"unknown intent field", `{` + base + `,"intent":{"when":"now"}}`, Limits{}, api.CodeUnknownField},
		{"duplicate key", `{` + base + `,"tool":"u"}`, Limits{}, "duplicate_key"},
		{"long s in a segment member", `{` + base + `,"instruction":[{"text":"a","trust":"untrusted","truſt":"user"}]}`, Limits{}, api.CodeUnknownField},
		{"long s in a top member", `{"principal":"u","ſerver":"s","tool":"t"}`, Limits{}, api.CodeUnknownField},
		{"kelvin sign in a top member", `{` + base + `,"phase":"at_trigger","action_\u212aey":"k"}`, Limits{}, api.CodeUnknownField},
		{"escaped long s in an answer", `{` + base + `,"user_answers":[{"question_id":"q","value":1,"\u017fpan":[0,1]}]}`, Limits{}, api.CodeUnknownField},
		{"missing principal", `{"server":"s","tool":"t"}`, Limits{}, api.CodeInvalidRequest},
		{"candidate without value", `{` + base + `,"candidates":[{"field":"a"}]}`, Limits{}, api.CodeInvalidRequest},
		{"segment without span", `{` + base + `,"candidates":[{"field":"a","value":1,"segment":0}]}`, Limits{}, api.CodeInvalidRequest},
		{"span of three", `{` + base + `,"candidates":[{"field":"a","value":1,"segment":0,"span":[0,1,2]}]}`, Limits{}, api.CodeInvalidRequest},
		{"fractional span", `{` + base + `,"candidates":[{"field":"a","value":1,"segment":0,"span":[0.5,1]}]}`, Limits{}, api.CodeInvalidRequest},
		{"reversed span is data", `{` + base + `,"candidates":[{"field":"a","value":1,"segment":9,"span":[5,-1]}]}`, Limits{}, ""},
		{"trigger without key", `{` + base + `,"phase":"at_trigger"}`, Limits{}, api.CodeInvalidRequest},
		{"bad phase", `{` + base + `,"phase":"later"}`, Limits{}, api.CodeInvalidRequest},
		{"too many segments", `{` + base + `,"instruction":[{"text":"a","trust":"user"},{"text":"b","trust":"user"}]}`, Limits{MaxSegments: 1}, api.CodeTooManySegments},
		{"too deep", `{` + base + `,"candidates":[{"field":"a","value":[[[[1]]]]}]}`, Limits{MaxDepth: 4}, "too_deep"},
		{"too large", `{` + base + `}`, Limits{MaxBytes: 10}, api.CodeTooLarge},
		{"invalid utf8", "{" + base + ",\"conversation_id\":\"\xff\"}", Limits{}, "invalid_utf8"},
		{"trailing data", `{` + base + `} {}`, Limits{}, "invalid_json"},
		{"pre-set without trust", `{` + base + `,"pre_set_data":{"a":{"value":1}}}`, Limits{}, api.CodeInvalidRequest},
		{"checklist kind", `{` + base + `,"user_checklist":[{"id":"x","kind":"maybe"}]}`, Limits{}, api.CodeInvalidRequest},
		{"when_case any JSON", `{` + base + `,"intent":{"when_case":3}}`, Limits{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeRequest([]byte(tt.body), tt.lim)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if r.Principal != "u" {
					t.Fatalf("principal = %q", r.Principal)
				}
				return
			}
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *RequestError %s", err, tt.code)
			}
			if re.Code != tt.code {
				t.Fatalf("code = %s (%v), want %s", re.Code, err, tt.code)
			}
		})
	}
}

// The user checklist is bounded before anything is compiled or decided: its items, one
// expression's text and all of its expressions' text, each refused with its own code.
func TestDecodeRequestChecklistBounds(t *testing.T) {
	// items returns n checklist items whose expressions are size bytes long each.
	items := func(n, size int) string {
		expr := "true" + strings.Repeat(" ", max(size-4, 0))
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":"c%d","expr":%q}`, i, expr)
		}
		return `{"principal":"u","server":"s","tool":"t","user_checklist":[` + b.String() + `]}`
	}
	tests := []struct {
		name string
		body string
		lim  Limits
		code string // "" = accepted
	}{
		{"64 items", items(64, 20), Limits{}, ""},
		{"65 items", items(65, 20), Limits{}, api.CodeTooManyChecklistItems},
		{"thousands of items", items(5000, 4), Limits{}, api.CodeTooManyChecklistItems},
		{"items past a configured limit", items(3, 4), Limits{MaxChecklistItems: 2}, api.CodeTooManyChecklistItems},
		{"expression at the size limit", items(1, 4096), Limits{}, ""},
		{"expression one byte over", items(1, 4097), Limits{}, api.CodeExpressionTooLarge},
		{"expression past a configured limit", items(1, 11), Limits{MaxExprBytes: 10}, api.CodeExpressionTooLarge},
		// The compiler refuses longer expressions anyway: a larger limit is the compiler's.
		{"expression limit above the compiler's", items(1, 4097), Limits{MaxExprBytes: 1 << 20}, api.CodeExpressionTooLarge},
		{"expressions at the total limit", items(2, 4096), Limits{}, ""},
		{"expressions over the total limit", items(3, 3000), Limits{}, api.CodeChecklistTooLarge},
		{"expressions within a configured total", items(3, 3000), Limits{MaxChecklistBytes: 9000}, ""},
		{"many short expressions over the total", items(64, 200), Limits{}, api.CodeChecklistTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tt.body), tt.lim)
			var re *RequestError
			switch {
			case tt.code == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tt.code != "" && (!errors.As(err, &re) || re.Code != tt.code):
				t.Fatalf("err = %v, want code %s", err, tt.code)
			}
		})
	}
}

func TestDecodeRequestKeepsExactValues(t *testing.T) {
	r, err := DecodeRequest([]byte(`{"principal":"u","server":"s","tool":"t",
		"candidates":[{"field":"a","value":1.10},{"field":"b","value":null},{"field":"c","value":{"x":[1e2]}}],
		"user_answers":[{"question_id":"q_1"},{"question_id":"q_2","value":null}],
		"pre_set_data":{"a":{"value":42,"trust":"user"}}}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := r.Candidates[0].Value.(json.Number); !ok || v != "1.10" {
		t.Errorf("candidate value = %#v, want json.Number 1.10", r.Candidates[0].Value)
	}
	if r.Candidates[1].Value != nil || r.Candidates[1].Located() {
		t.Errorf("null candidate = %#v", r.Candidates[1])
	}
	if x := r.Candidates[2].Value.(map[string]any)["x"].([]any)[0]; x != json.Number("1e2") {
		t.Errorf("nested = %#v", x)
	}
	if r.UserAnswers[0].Value.Set || !r.UserAnswers[1].Value.Set {
		t.Errorf("answer presence lost: %+v", r.UserAnswers)
	}
	if r.PreSetData["a"].Value.V != json.Number("42") {
		t.Errorf("pre-set = %#v", r.PreSetData["a"].Value.V)
	}
	// The request round-trips through its own encoding.
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeRequest(b, Limits{}); err != nil {
		t.Fatalf("re-decode %s: %v", b, err)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"principal":"u","server":"s","tool":"t","instruction":[{"text":"send 500,000","trust":"user"}],"candidates":[{"field":"amount","segment":0,"span":[5,12],"value":500000}]}`))
	f.Add([]byte(`{"principal":"u","server":"s","tool":"t","instruction":"x","intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,1]}}}`))
	f.Add([]byte(`{"principal":"u","server":"s","tool":"t","user_answers":[{"question_id":"q","value":[1,{"a":null}],"approved":true}]}`))
	f.Add([]byte(`{"principal":"u","server":"s","tool":"t","pre_set_data":{"a\u0062":{"value":{"x":[-0.5e3]},"trust":"user"}},"user_checklist":[null,{"kind":"expr"}]}`))
	f.Add([]byte(`{"principal":"u","server":"s","tool":"t","instruction":[{"text":"\ud83d\ude00\n","trust":"user"}],"candidates":[{"field":"a","value":null,"segment":0,"span":[0,1]}],"tool_attempt":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRequest(data, Limits{MaxSegments: 8, MaxDepth: 16})
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) || re.Code == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(r.Instruction.Segments) > 8 || r.Principal == "" {
			t.Fatalf("limits not enforced: %+v", r)
		}
		// Whatever was accepted must round-trip and ground without panicking.
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var re *RequestError
		if _, err := DecodeRequest(b, Limits{MaxSegments: 8, MaxDepth: 17}); err != nil && !(errors.As(err, &re) && re.Code == "too_deep") {
			t.Fatalf("re-decode %s: %v", b, err)
		}
		for _, c := range r.Candidates {
			if c.Located() {
				for _, rule := range []groundRule{{kind: groundString}, {kind: groundInteger}, {kind: groundNumber}, {kind: groundEnum, enum: []string{"a"}}} {
					if ground(newSpanIndex(&r.Instruction), *c.Segment, *c.Span, c.Value, rule) == "" {
						checkGrounded(t, &r.Instruction, *c.Segment, *c.Span, c.Value, rule)
					}
				}
			}
		}
	})
}

// TestDecodeRequestEdges pins the answer to bodies at the edges of the request's shape: nulls
// where objects, arrays or numbers go, members that differ from a field only in case or by a
// look-alike letter, escapes in names, numbers an int cannot hold exactly, and bodies that are
// not objects.
func TestDecodeRequestEdges(t *testing.T) {
	const base = `"principal":"u","server":"s","tool":"t"`
	tests := []struct {
		body string
		code string // "" = accepted
	}{
		{`{` + base + `,"instruction":null,"intent":null,"candidates":null,"user_answers":null,"pre_set_data":null,"user_checklist":null}`, ""},
		{`{` + base + `,"instruction":[],"candidates":[],"user_answers":[],"pre_set_data":{},"user_checklist":[]}`, ""},
		{`{` + base + `,"instruction":[null,{"text":null,"trust":"user"}]}`, ""},
		{`{` + base + `,"instruction":{"text":"a"}}`, api.CodeInvalidRequest},
		{`{` + base + `,"instruction":5}`, api.CodeInvalidRequest},
		{`{` + base + `,"intent":{"when_case":null}}`, ""},
		{`{` + base + `,"intent":{"when_case":{ "a" : [1, 2] }}}`, ""},
		{`{` + base + `,"intent":{"action_name":{"segment":0,"span":null}}}`, api.CodeInvalidRequest},
		{`{` + base + `,"intent":{"action_name":{"segment":null,"span":[1,2]}}}`, ""},
		{`{` + base + `,"intent":{"action_name_preset":{"value":null,"trust":"user"}}}`, ""},
		{`{` + base + `,"candidates":[null]}`, api.CodeInvalidRequest},
		{`{` + base + `,"candidates":[{"field":"a","value":1,"segment":null,"span":null}]}`, ""},
		{`{` + base + `,"candidates":[{"field":"a","value":1,"segment":0,"span":[null,1]}]}`, ""},
		{`{` + base + `,"candidates":[{"field":"a","value":1,"segment":0,"span":[1e0,1]}]}`, api.CodeInvalidRequest},
		{`{` + base + `,"candidates":[{"field":"a","value":1,"segment":1.0,"span":[0,1]}]}`, api.CodeInvalidRequest},
		{`{` + base + `,"candidates":[{"field":"a","value":1,"segment":9223372036854775808,"span":[0,1]}]}`, "number_not_exact"},
		{`{` + base + `,"candidates":[{"field":"a","value":{"x":[1,{"y":"\u00e9\ud83d\ude00"}],"X":-0.0}}]}`, ""},
		{`{` + base + `,"candidates":[{"field":"a","Value":1}]}`, api.CodeUnknownField},
		{`{` + base + `,"candidates":[{"field":"a","value":1,"valuе":2}]}`, api.CodeUnknownField},
		{`{` + base + `,"user_answers":[null,{"question_id":"q","approved":null,"segment":null}]}`, api.CodeInvalidRequest},
		{`{` + base + `,"user_answers":[{"question_id":"q","approved":"yes"}]}`, api.CodeInvalidRequest},
		{`{` + base + `,"pre_set_data":{"a":null}}`, api.CodeInvalidRequest},
		{`{` + base + `,"pre_set_data":{"\u0061":{"value":1,"trust":"user"},"b\n":{"value":[],"trust":"user"}}}`, ""},
		{`{` + base + `,"tool_attempt":1.5}`, api.CodeInvalidRequest},
		{`{` + base + `,"tool_attempt":-0,"intent_attempt":null,"new_request":null}`, ""},
		{`{` + base + `,"new_request":1}`, api.CodeInvalidRequest},
		{`{` + base + `,"phase":null,"action_key":null}`, ""},
		{`{"princip\u0061l":"u","server":"s","tool":"t"}`, ""},
		{`{"principal":"\u0075","server":"s\"","tool":"t\\"}`, ""},
		{`{"principal":"u","server":"s","tool":5}`, api.CodeInvalidRequest},
		{`[1]`, api.CodeInvalidRequest},
		{`null`, api.CodeInvalidRequest},
		{`"x"`, api.CodeInvalidRequest},
		{"{" + base + "}\n\t ", ""},
		{`{` + base + `,"conversation_id":"` + strings.Repeat("c", 300) + `"}`, api.CodeInvalidRequest},
		{`{` + base + `,"candidates":[{"field":"a","value":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}]}`, "too_deep"},
	}
	for _, tt := range tests {
		_, err := DecodeRequest([]byte(tt.body), Limits{})
		var re *RequestError
		switch {
		case tt.code == "" && err != nil:
			t.Errorf("%s: rejected: %v", tt.body, err)
		case tt.code != "" && (!errors.As(err, &re) || re.Code != tt.code):
			t.Errorf("%s: err = %v, want code %s", tt.body, err, tt.code)
		}
	}
}

// TestDecodeRequestGenerated: on generated bodies, every refusal is a *RequestError with a
// code; a body written without noise is accepted unless its numbers or strings are refused
// before decoding; and whatever is accepted decodes again, from its own encoding, to the same
// request.
func TestDecodeRequestGenerated(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		g := &jsonGen{t: rt, noise: rapid.Bool().Draw(rt, "noise")}
		g.request()
		body := []byte(g.b.String())
		r, err := DecodeRequest(body, Limits{})
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) || re.Code == "" {
				rt.Fatalf("%s: untyped error %v", body, err)
			}
			// A body written without noise may break a rule of the request's meaning (an
			// at_trigger phase without a key), never one of its shape.
			var shaped api.Request
			if !g.noise && canonical.Validate(body) == nil && apijson.UnmarshalStrict(body, &shaped) != nil {
				rt.Fatalf("%s: a well-shaped body refused: %v", body, err)
			}
			return
		}
		b, err := json.Marshal(r)
		if err != nil {
			rt.Fatal(err)
		}
		again, err := DecodeRequest(b, Limits{})
		if err != nil {
			rt.Fatalf("re-decode %s: %v", b, err)
		}
		// Compared by encoding: an absent array and an empty one are the same request.
		if b2, _ := json.Marshal(again); !bytes.Equal(b, b2) {
			rt.Fatalf("%s: round trip differs:\n %s\n %s", body, b, b2)
		}
	})
}
