package gates

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
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
	if rec.Outcome != api.OutcomeVerdictIssued || len(rec.CallArguments) != 4 {
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

// BenchmarkPreflightMeasured is one preflight of a transfer with two conditions (one over two
// measurements), one user-checklist item and two HTTP measurements against a local endpoint,
// run concurrently at one depth, ending in verdict_issued. The cost is dominated by the two
// loopback round trips; BenchmarkPreflightMeasuredNoIO separates the engine's own share.
func BenchmarkPreflightMeasured(b *testing.B) {
	env := newMeasureEnv(b)
	env.set(map[string]json.RawMessage{"1102534471": json.RawMessage("2000000")},
		map[string]json.RawMessage{"1102534471": json.RawMessage("1000000")})
	benchMeasured(b, env.measurer(b), env.http.URL)
}

// BenchmarkPreflightMeasuredNoIO is the same preflight with measurements answered in memory.
func BenchmarkPreflightMeasuredNoIO(b *testing.B) {
	benchMeasured(b, measurerFunc(func(_ context.Context, m *policy.Measurement, _ map[string]any) (any, error) {
		if m.Name == "balance" {
			return json.Number("2000000"), nil
		}
		return json.Number("1000000"), nil
	}), "http://127.0.0.1:9")
}

func benchMeasured(b *testing.B, m Measurer, base string) {
	tool := Tool{Name: "transfer", Description: "Transfers money.\n[Notice] Transfers are final.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"from_account":{"type":"string","pattern":"^[0-9]{10}$"},"to_account":{"type":"string"},
			"amount":{"type":"integer","minimum":1},"memo":{"type":"string"}},
			"required":["from_account","to_account","amount"]}`)}
	pol, err := policy.Parse([]byte(`
policy_version: bench
servers: {bank: {audience: [executor-bank], tools_from: {command: [bank-mcp]}}}
tools:
  bank/transfer:
    actions: ["send money"]
    fields:
      from_account: {allowed_sources: [pre_set_data, user_answer]}
    measurements:
      balance: {http: {url: "` + base + `/balance?account={{from_account}}", pointer: /balance}, timeout: 2s}
      limit: {http: {url: "` + base + `/limit?account={{from_account}}", pointer: /limit}, timeout: 2s}
    conditions:
      - {id: balance_covers_amount, expr: "measured.balance >= args.amount"}
      - {id: within_daily_limit, expr: "args.amount <= measured.limit"}
principals:
  u_01:
    user_checklist:
      - {id: chk_limit, expr: "args.amount <= 1000000"}
`))
	if err != nil {
		b.Fatal(err)
	}
	req, err := DecodeRequest([]byte(`{"principal":"u_01","server":"bank","tool":"transfer",
		"instruction":[{"text":"send money to 110-222-333, 500,000 won","trust":"user"}],
		"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,10]}},
		"candidates":[{"field":"to_account","segment":0,"span":[14,25],"value":"110-222-333"},
			{"field":"amount","segment":0,"span":[27,34],"value":500000}],
		"pre_set_data":{"from_account":{"value":"1102534471","trust":"user"}}}`), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	ev, err := NewCELEvaluator()
	if err != nil {
		b.Fatal(err)
	}
	eng, err := New(Config{State: NewMemState(), Clock: func() time.Time { return fixedNow }, Measurer: m, Evaluator: ev})
	if err != nil {
		b.Fatal(err)
	}
	in := Input{Tool: tool, Policy: pol, Request: req}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec, err := eng.Run(ctx, in)
		if err != nil || rec.Outcome != api.OutcomeVerdictIssued {
			b.Fatalf("outcome %v, err %v", rec, err)
		}
	}
}
