package gates

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"

	"github.com/verdictgate/verdict/policy"
)

// BenchmarkPreflightMostExpensive is the costliest preflight the default limits still answer
// with a record, in its two parts and whole. It reports the process's CPU time per preflight
// (cpu-ms/op), which is what one such request costs a server, whatever else the machine runs.
//
//   - compile: 64 checklist items, 8 KiB of them, each a fresh text (a caller can vary them,
//     so the request cache does not help) of nested list literals, which CEL compiles slowest
//     per byte.
//   - evaluate: one item whose cost stays just under the evaluation budget in the shape CEL
//     runs slowest per unit of cost: one comprehension over a long list argument. CEL's cost
//     tracking grows with the length of the comprehension it tracks.
//   - all: the evaluate item and 8 KiB of checklist text in 63 more items that compile slowly
//     and fail the type check, so that they cost no evaluation.
//
// Each request is decoded beforehand: decoding is bounded by the body's size, and what is
// measured here is the engine's work.
func BenchmarkPreflightMostExpensive(b *testing.B) {
	lim := DefaultLimits()
	const evalExpr = "args.items.all(x, true)"
	n := longestList(b, evalExpr)
	nested := func(v int, op string) string {
		d := policy.MaxExprDepth - 2
		return strings.Repeat("[", d) + fmt.Sprint(v) + strings.Repeat("]", d) + op
	}
	// fill makes items checklist items of nested literals from bytes of text; seq makes every
	// text new.
	fill := func(seq, items, bytes int, op string) []api.RequestCheckItem {
		out := make([]api.RequestCheckItem, items)
		for i := range out {
			var e strings.Builder
			for v := seq*items*1000 + i*1000; e.Len()+len(nested(v, op))+4 <= bytes/items; v++ {
				if e.Len() > 0 {
					e.WriteString(" || ")
				}
				e.WriteString(nested(v, op))
			}
			out[i] = api.RequestCheckItem{ID: fmt.Sprint("c", i), Expr: e.String()}
		}
		return out
	}
	cases := []struct {
		name  string
		list  int
		items func(seq int) []api.RequestCheckItem
	}{
		{"compile", 1, func(seq int) []api.RequestCheckItem {
			return fill(seq, lim.MaxChecklistItems, lim.MaxChecklistBytes, " == []")
		}},
		{"evaluate", n, func(int) []api.RequestCheckItem {
			return []api.RequestCheckItem{{ID: "e", Expr: evalExpr}}
		}},
		{"all", n, func(seq int) []api.RequestCheckItem {
			return append([]api.RequestCheckItem{{ID: "e", Expr: evalExpr}},
				fill(seq, lim.MaxChecklistItems-1, lim.MaxChecklistBytes-len(evalExpr), " != null")...)
		}},
	}
	tool := Tool{Name: "transfer", InputSchema: json.RawMessage(`{"type":"object","properties":{
		"amount":{"type":"integer"},"items":{"type":"array","items":{"type":"integer"}}},"required":["amount","items"]}`)}
	pol, err := policy.Parse([]byte(`
policy_version: bench
servers: {bank: {audience: [executor-bank], tools_from: {command: [bank-mcp]}}}
tools:
  bank/transfer: {actions: ["send money"]}
`))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ev, err := NewCELEvaluator()
			if err != nil {
				b.Fatal(err)
			}
			eng, err := New(Config{State: NewMemState(), Clock: func() time.Time { return fixedNow }, Evaluator: ev})
			if err != nil {
				b.Fatal(err)
			}
			list := "[" + strings.TrimSuffix(strings.Repeat("1,", c.list), ",") + "]"
			request := func(seq int) *api.Request {
				checklist, err := json.Marshal(c.items(seq))
				if err != nil {
					b.Fatal(err)
				}
				r, err := DecodeRequest([]byte(`{"principal":"u","server":"bank","tool":"transfer","new_request":true,
					"instruction":[{"text":"send money 500","trust":"user"}],
					"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,10]}},
					"candidates":[{"field":"amount","segment":0,"span":[11,14],"value":500}],
					"pre_set_data":{"items":{"value":`+list+`,"trust":"user"}},
					"user_checklist":`+string(checklist)+`}`), lim)
				if err != nil {
					b.Fatal(err)
				}
				return r
			}
			ctx := context.Background()
			var cpu time.Duration
			seq := 0
			for b.Loop() {
				b.StopTimer()
				seq++
				req := request(seq)
				b.StartTimer()
				cpu0 := processCPU(b)
				rec, err := eng.Run(ctx, Input{Tool: tool, Policy: pol, Request: req})
				cpu += processCPU(b) - cpu0
				if err != nil {
					b.Fatal(err)
				}
				if rec.Outcome == api.OutcomeVerdictIssued && c.name == "all" {
					b.Fatalf("outcome %s with ill-typed items", rec.Outcome)
				}
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// longestList is the length of the longest list of ones expr may read within the default
// evaluation budget, from its cost over two short lists (it is linear in the length).
func longestList(b *testing.B, expr string) int {
	c, err := policy.NewCompiler()
	if err != nil {
		b.Fatal(err)
	}
	ast, _, err := c.Compile(expr)
	if err != nil {
		b.Fatal(err)
	}
	ev, err := NewCELEvaluator()
	if err != nil {
		b.Fatal(err)
	}
	cost := func(n int) uint64 {
		items := make([]any, n)
		for i := range items {
			items[i] = json.Number("1")
		}
		got := ev.Evaluate(context.Background(), ast, EvalInput{Args: map[string]any{"items": items}, Now: fixedNow})
		if got.Err != nil || !got.Met {
			b.Fatalf("%s over %d: %+v", expr, n, got)
		}
		return got.Cost
	}
	per, base := cost(20)-cost(10), 2*cost(10)-cost(20) // per 10 elements, and for none
	n := int((DefaultEvaluationBudget - base) * 10 / per)
	if cost(n) > DefaultEvaluationBudget || cost(n+10) <= DefaultEvaluationBudget {
		b.Fatalf("%s: %d elements cost %d, not just under %d", expr, n, cost(n), DefaultEvaluationBudget)
	}
	return n
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
