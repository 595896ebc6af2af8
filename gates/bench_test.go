package gates

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/verdictgate/verdict/policy"
)

// BenchmarkPreflight is one preflight of a 6-field tool with one oneOf, every value grounded in
// the instruction, ending in verdict_issued. The definition cache is warm, as it is in verdictd.
func BenchmarkPreflight(b *testing.B) {
	tool := Tool{
		Name:        "order_book",
		Description: "Orders a book.\n[Notice] Orders ship within a day.",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"isbn": {"type": "string", "pattern": "^(97[89])?[0-9]{9}[0-9X]$"},
				"title": {"type": "string", "maxLength": 200},
				"author": {"type": "string", "maxLength": 200},
				"quantity": {"type": "integer", "minimum": 1, "maximum": 10},
				"shipping": {"type": "string", "enum": ["standard", "express"]},
				"gift_note": {"type": "string", "maxLength": 100}
			},
			"required": ["quantity", "shipping"],
			"oneOf": [{"required": ["isbn"]}, {"required": ["title", "author"]}],
			"additionalProperties": false
		}`),
	}
	pol, err := policy.Parse([]byte(`
policy_version: bench
servers: {shop: {audience: [executor-shop], tools_from: {command: [shop-mcp]}}}
tools:
  shop/order_book:
    actions: ["order the book"]
    fields:
      shipping: {allowed_sources: [user_answer, instruction, pre_set_data]}
`))
	if err != nil {
		b.Fatal(err)
	}
	text := "order the book 9780262033848, 2 copies, Express shipping, note: happy birthday"
	body := []byte(`{
		"principal": "u_01", "conversation_id": "c_1", "server": "shop", "tool": "order_book",
		"instruction": [{"text": "` + text + `", "trust": "user"}],
		"intent": {"when_case": "immediate", "action_name": {"segment": 0, "span": [0, 14]}},
		"candidates": [
			{"field": "isbn", "segment": 0, "span": [15, 28], "value": "9780262033848"},
			{"field": "quantity", "segment": 0, "span": [30, 31], "value": 2},
			{"field": "shipping", "segment": 0, "span": [40, 47], "value": "express"},
			{"field": "gift_note", "segment": 0, "span": [64, 78], "value": "happy birthday"}
		]
	}`)
	req, err := DecodeRequest(body, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	eng, err := New(Config{State: NewMemState(), Clock: func() time.Time { return fixedNow }})
	if err != nil {
		b.Fatal(err)
	}
	in := Input{Tool: tool, Policy: pol, Request: req}
	rec, err := eng.Run(context.Background(), in)
	if err != nil {
		b.Fatal(err)
	}
	if rec.Outcome != OutcomeVerdictIssued || len(rec.CallArguments) != 4 {
		out, _ := json.MarshalIndent(rec, "", " ")
		b.Fatalf("unexpected record:\n%s", out)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := eng.Run(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeRequest is the request decoder on the same request body.
func BenchmarkDecodeRequest(b *testing.B) {
	body := []byte(`{"principal":"u_01","server":"shop","tool":"order_book",
		"instruction":[{"text":"order the book 9780262033848, 2 copies","trust":"user"}],
		"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,14]}},
		"candidates":[{"field":"isbn","segment":0,"span":[15,28],"value":"9780262033848"},
		{"field":"quantity","segment":0,"span":[30,31],"value":2}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequest(body, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
