package verdictd

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/policy"
)

func TestEvaluator(t *testing.T) {
	env, err := policy.NewEnv()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := NewEvaluator()
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"amount": json.Number("500000"), "to": "110-222-333", "rate": json.Number("0.5")}
	measured := map[string]any{"balance": json.Number("2000000")}
	tests := []struct {
		name    string
		expr    string
		known   bool
		met     bool
		err     bool
		missing []string
		inputs  []string
		readsM  bool
	}{
		{"met", "args.amount <= 1000000", true, true, false, nil, []string{"amount"}, false},
		{"unmet", "args.amount <= 1000", true, false, false, nil, []string{"amount"}, false},
		{"int against double", "args.rate < 1 && args.amount > 0.5", true, true, false, nil, []string{"amount", "rate"}, false},
		{"measurement", "measured.balance >= args.amount", true, true, false, nil, []string{"amount", "balance"}, true},
		{"index form", `args["to"] == "110-222-333"`, true, true, false, nil, []string{"to"}, false},
		{"missing argument waits", "args.memo == 'rent'", false, false, false, []string{"memo"}, []string{"memo"}, false},
		{"missing measurement waits", "measured.limit > 0", false, false, false, []string{"limit"}, []string{"limit"}, true},
		{"has() of an absent field is an answer", "!has(args.memo)", true, true, false, nil, []string{"memo"}, false},
		{"not a boolean", "args.amount + 1", false, false, true, nil, []string{"amount"}, false},
		{"runtime error", "args.amount / 0 > 1", false, false, true, nil, []string{"amount"}, false},
		{"principal and now", `principal == "u_01" && now > timestamp("2020-01-01T00:00:00Z")`, true, true, false, nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ast, iss := env.Compile(tt.expr)
			if iss.Err() != nil {
				t.Fatal(iss.Err())
			}
			got := ev.Evaluate(context.Background(), ast, gates.EvalInput{Args: args, Measured: measured, Principal: "u_01", Now: time.Now()})
			if got.Known != tt.known || got.Met != tt.met || (got.Err != nil) != tt.err {
				t.Fatalf("known %v met %v err %v", got.Known, got.Met, got.Err)
			}
			if !slices.Equal(got.Missing, tt.missing) || !slices.Equal(got.Inputs, tt.inputs) || got.ReadMeasured != tt.readsM {
				t.Fatalf("missing %v inputs %v readsMeasured %v", got.Missing, got.Inputs, got.ReadMeasured)
			}
		})
	}
	if got := ev.Evaluate(context.Background(), nil, gates.EvalInput{}); got.Err == nil || got.Known {
		t.Fatal("a nil expression passed")
	}
}
