package gates

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
)

// slotCounts are the tool widths the scaling benchmark measures: from a one-argument tool to a
// 200-argument form.
var slotCounts = []int{1, 10, 50, 200}

// wideInput builds a preflight over a tool with n required string arguments, every one of them
// grounded by a candidate whose span points at its value in the user's instruction, so the run
// settles every slot and ends in verdict_issued.
func wideInput(tb testing.TB, n int) Input {
	tb.Helper()
	props := make(map[string]any, n)
	required := make([]string, n)
	for i := range n {
		name := fmt.Sprintf("f%03d", i)
		props[name] = map[string]any{"type": "string", "minLength": 1, "maxLength": 64}
		required[i] = name
	}
	schema, err := json.Marshal(map[string]any{
		"type": "object", "properties": props, "required": required, "additionalProperties": false,
	})
	if err != nil {
		tb.Fatal(err)
	}
	pol, err := policy.Parse([]byte(`
policy_version: bench
servers: {forms: {audience: [executor-forms], tools_from: {command: [forms-mcp]}}}
tools:
  forms/submit:
    actions: ["submit the form"]
`))
	if err != nil {
		tb.Fatal(err)
	}
	// The instruction is ASCII, so byte offsets are code point offsets.
	var text strings.Builder
	text.WriteString("submit the form with")
	type candidate struct {
		Field   string `json:"field"`
		Segment int    `json:"segment"`
		Span    [2]int `json:"span"`
		Value   string `json:"value"`
	}
	cands := make([]candidate, n)
	for i := range n {
		value := fmt.Sprintf("value-%03d", i)
		fmt.Fprintf(&text, " f%03d=", i)
		start := text.Len()
		text.WriteString(value)
		cands[i] = candidate{Field: required[i], Span: [2]int{start, text.Len()}, Value: value}
	}
	body, err := json.Marshal(map[string]any{
		"principal": "u_01", "conversation_id": "c_1", "server": "forms", "tool": "submit",
		"instruction": []map[string]string{{"text": text.String(), "trust": "user"}},
		"intent":      map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 15}}},
		"candidates":  cands,
	})
	if err != nil {
		tb.Fatal(err)
	}
	req, err := DecodeRequest(body, Limits{})
	if err != nil {
		tb.Fatal(err)
	}
	return Input{
		Tool:    Tool{Name: "submit", Description: "Submits a form.", InputSchema: schema},
		Policy:  pol,
		Request: req,
	}
}

func newScaleEngine(tb testing.TB) *Engine {
	tb.Helper()
	eng, err := New(Config{State: NewMemState(), Clock: func() time.Time { return fixedNow }})
	if err != nil {
		tb.Fatal(err)
	}
	return eng
}

// TestWideInputIssues keeps the scaling benchmark honest: every generated width must settle
// every slot and issue a verdict, or the benchmark would time an early refusal.
func TestWideInputIssues(t *testing.T) {
	for _, n := range slotCounts {
		t.Run(fmt.Sprintf("slots=%d", n), func(t *testing.T) {
			in := wideInput(t, n)
			rec, err := newScaleEngine(t).Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Outcome != api.OutcomeVerdictIssued || len(rec.CallArguments) != n {
				out, _ := json.MarshalIndent(rec, "", " ")
				t.Fatalf("want verdict_issued with %d arguments, got:\n%s", n, out)
			}
		})
	}
}

// BenchmarkPreflightSlots is one in-process preflight (gates.Engine.Run, warm definition cache,
// in-memory state) for tools of 1 to 200 slots, every slot grounded, ending in verdict_issued.
// It reports the cost per slot beside the cost per run.
func BenchmarkPreflightSlots(b *testing.B) {
	for _, n := range slotCounts {
		b.Run(fmt.Sprintf("slots=%d", n), func(b *testing.B) {
			in := wideInput(b, n)
			eng := newScaleEngine(b)
			ctx := context.Background()
			if _, err := eng.Run(ctx, in); err != nil { // warm the definition cache
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				rec, err := eng.Run(ctx, in)
				if err != nil || rec.Outcome != api.OutcomeVerdictIssued {
					b.Fatalf("outcome %v, err %v", rec.Outcome, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/slot")
		})
	}
}

// BenchmarkPreflightSlotsCold is the first preflight of a tool after its definition changed (a
// new engine, or a catalog refresh that brought a new schema): the definition is compiled in the
// run, then the same preflight as BenchmarkPreflightSlots.
func BenchmarkPreflightSlotsCold(b *testing.B) {
	for _, n := range slotCounts {
		b.Run(fmt.Sprintf("slots=%d", n), func(b *testing.B) {
			in := wideInput(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				rec, err := newScaleEngine(b).Run(ctx, in)
				if err != nil || rec.Outcome != api.OutcomeVerdictIssued {
					b.Fatalf("outcome %v, err %v", rec.Outcome, err)
				}
			}
		})
	}
}

// BenchmarkCompileDefinitionAtBounds is the most a hostile tool server can make one definition
// compile cost: as many properties as allowed, and as many subschemas as allowed.
func BenchmarkCompileDefinitionAtBounds(b *testing.B) {
	schema := func(n int, prop string) json.RawMessage {
		var s strings.Builder
		s.WriteString(`{"type":"object","properties":{`)
		for i := range n {
			if i > 0 {
				s.WriteByte(',')
			}
			fmt.Fprintf(&s, `"f%04d":%s`, i, prop)
		}
		s.WriteString(`}}`)
		return json.RawMessage(s.String())
	}
	for _, bc := range []struct {
		name   string
		schema json.RawMessage
	}{
		{fmt.Sprintf("properties=%d", MaxSchemaProperties), schema(MaxSchemaProperties, `{"type":"string","maxLength":64}`)},
		// Four subschemas per property, the root and its properties object: just under the bound.
		{fmt.Sprintf("nodes=%d", MaxSchemaNodes), schema((MaxSchemaNodes-2)/4, `{"type":"array","items":{"type":"array","items":{"type":"array","items":{}}}}`)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, err := compileDefinition(Tool{Name: "t", InputSchema: bc.schema})
				if err != nil || d.unsupported != "" {
					b.Fatalf("err %v, unsupported %q", err, d.unsupported)
				}
			}
		})
	}
}
