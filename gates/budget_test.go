package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/verdictgate/verdict/api"

	"github.com/google/cel-go/cel"
	"github.com/verdictgate/verdict/policy"
)

// countingEvaluator counts the expressions it is asked to evaluate.
type countingEvaluator struct {
	Evaluator
	n atomic.Int64
}

func (c *countingEvaluator) Evaluate(ctx context.Context, a *cel.Ast, in EvalInput) Evaluation {
	c.n.Add(1)
	return c.Evaluator.Evaluate(ctx, a, in)
}

// costlyExpr costs tens of thousands of units and runs in milliseconds: nested comprehensions
// over short literal lists. It is short enough for a checklist at every bound.
const costlyExpr = "[1,2,3,4,5,6,7,8].all(a, [1,2,3,4,5,6,7,8].all(b, [1,2,3,4,5,6,7,8].all(c, " +
	"[1,2,3,4,5,6,7,8].all(d, a+b+c+d > 0))))"

// cheapExpr costs a few units.
const cheapExpr = "args.amount <= 1000000"

// budgetRun runs a transfer of 500 whose policy has the given conditions and checklist items
// and whose request carries items, on an engine with the given budget. It returns the record,
// the error and how many expressions were evaluated.
func budgetRun(t *testing.T, budget uint64, conditions, policyItems, requestItems []string) (*api.Record, error, int64) {
	t.Helper()
	list := func(prefix string, exprs []string) string {
		var b strings.Builder
		for i, x := range exprs {
			fmt.Fprintf(&b, "{id: %s%d, expr: %q}, ", prefix, i, x)
		}
		return "[" + strings.TrimSuffix(b.String(), ", ") + "]"
	}
	pol := mustPolicy(t, `
policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [b]}}}
tools:
  bank/transfer:
    actions: ["send money"]
    conditions: `+list("cond", conditions)+`
principals:
  u: {user_checklist: `+list("pol", policyItems)+`}
`)
	items := make([]api.RequestCheckItem, len(requestItems))
	for i, x := range requestItems {
		items[i] = api.RequestCheckItem{ID: fmt.Sprint("req", i), Expr: x}
	}
	checklist, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	req := mustRequest(t, `{"principal":"u","server":"bank","tool":"transfer","new_request":true,
		"instruction":[{"text":"send money 500","trust":"user"}],
		"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,10]}},
		"candidates":[{"field":"amount","segment":0,"span":[11,14],"value":500}],
		"user_checklist":`+string(checklist)+`}`)
	cel, err := NewCELEvaluator()
	if err != nil {
		t.Fatal(err)
	}
	ev := &countingEvaluator{Evaluator: cel}
	eng, err := New(Config{State: NewMemState(), Evaluator: ev, EvaluationBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	tool := Tool{Name: "transfer", InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"}},"required":["amount"]}`)}
	rec, err := eng.Run(context.Background(), Input{Tool: tool, Policy: pol, Request: req})
	return rec, err, ev.n.Load()
}

// costOf is what expr costs to evaluate over a transfer of 500.
func costOf(t *testing.T, expr string) uint64 {
	t.Helper()
	c, err := policy.NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	ast, _, err := c.Compile(expr)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := NewCELEvaluator()
	if err != nil {
		t.Fatal(err)
	}
	got := ev.Evaluate(context.Background(), ast, EvalInput{Args: map[string]any{"amount": json.Number("500")}, Now: fixedNow})
	if got.Err != nil || !got.Known || got.Cost == 0 {
		t.Fatalf("%s: %+v", expr, got)
	}
	return got.Cost
}

func repeat(expr string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = expr
	}
	return out
}

// TestEvaluationBudget: a run's expressions share one budget. Request items that take it past
// the budget refuse the request after the crossing evaluation, without evaluating the rest;
// the policy's expressions past it are definition repair, never a pass, and then the request
// is not refused for the policy's work.
func TestEvaluationBudget(t *testing.T) {
	costly := costOf(t, costlyExpr)
	lim := DefaultLimits()
	if costly < CELCostLimit/4 || costly > CELCostLimit || len(costlyExpr)*lim.MaxChecklistItems > lim.MaxChecklistBytes {
		t.Fatalf("the costly expression costs %d: adjust it", costly)
	}
	// Room for one costly expression and a few cheap ones, not for two costly ones.
	budget := costly * 3 / 2
	maxItems := lim.MaxChecklistItems
	tests := []struct {
		name                        string
		budget                      uint64
		conditions, policy, request []string
		refused                     bool
		evaluated                   int64
		outcome                     string
		overBudget                  []string // slots and items noted over budget
	}{
		{name: "cheap expressions pass", budget: budget,
			conditions: []string{cheapExpr}, policy: []string{cheapExpr}, request: repeat(cheapExpr, maxItems),
			evaluated: int64(2 + maxItems), outcome: api.OutcomeVerdictIssued},
		{name: "one costly expression passes", budget: budget,
			request: []string{costlyExpr, cheapExpr}, evaluated: 2, outcome: api.OutcomeVerdictIssued},
		// As many costly items as a request may carry: refused at the second, the other 62
		// never evaluated.
		{name: "request items over budget", budget: budget,
			request: repeat(costlyExpr, maxItems), refused: true, evaluated: 2},
		{name: "request items over what the policy left", budget: budget,
			conditions: []string{cheapExpr}, policy: []string{costlyExpr}, request: []string{cheapExpr, costlyExpr, cheapExpr},
			refused: true, evaluated: 4},
		// An item past the per-expression limit is past the default budget on its own.
		{name: "request item at its own cost limit",
			request: []string{"[0,1,2,3,4,5,6,7,8,9].all(a, [0,1,2,3,4,5,6,7,8,9].all(b, [0,1,2,3,4,5,6,7,8,9].all(c, " +
				"[0,1,2,3,4,5,6,7,8,9].all(d, [0,1,2,3,4,5,6,7,8,9].all(e, a+b+c+d+e >= 0)))))", cheapExpr},
			refused: true, evaluated: 1},
		{name: "policy conditions over budget", budget: budget,
			conditions: []string{costlyExpr, costlyExpr, cheapExpr}, policy: []string{cheapExpr}, request: []string{costlyExpr},
			evaluated: 2, outcome: api.OutcomeDefinitionRepair, overBudget: []string{"cond1", "cond2", "pol0", "req0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err, n := budgetRun(t, tt.budget, tt.conditions, tt.policy, tt.request)
			if n != tt.evaluated {
				t.Errorf("%d expressions evaluated, want %d", n, tt.evaluated)
			}
			if tt.refused {
				var re *RequestError
				if !errors.As(err, &re) || re.Code != api.CodeEvaluationBudgetExceeded {
					t.Fatalf("err = %v, want %s", err, api.CodeEvaluationBudgetExceeded)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rec.Outcome != tt.outcome {
				t.Fatalf("outcome %s, want %s", rec.Outcome, tt.outcome)
			}
			var over []string
			for _, s := range rec.Slots {
				if s.Note == noteOverBudget {
					over = append(over, s.SlotID)
				}
			}
			for _, c := range rec.UserChecklist {
				if c.Note == noteOverBudget {
					if c.Route == nil || *c.Route != api.RouteDefinitionRepair || c.Met != nil {
						t.Errorf("item %s over budget: %+v", c.ItemID, c)
					}
					over = append(over, c.ItemID)
				}
			}
			if strings.Join(over, ",") != strings.Join(tt.overBudget, ",") {
				t.Errorf("over budget: %v, want %v", over, tt.overBudget)
			}
		})
	}
}
