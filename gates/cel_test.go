package gates

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/policy"
)

func TestCELEvaluator(t *testing.T) {
	ev, err := NewCELEvaluator()
	if err != nil {
		t.Fatal(err)
	}
	c, err := policy.NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	big := make([]any, 200)
	for i := range big {
		big[i] = json.Number("1")
	}
	args := map[string]any{"amount": json.Number("500000"), "rate": json.Number("0.1"), "to": "110-222-333",
		"flag": true, "list": big, "huge": json.Number("1e400"), "inexact": json.Number("9007199254740993.5"), "none": nil}
	measured := map[string]any{"balance": json.Number("2000000.0")}
	in := EvalInput{Args: args, Measured: measured, Principal: "u_01", Now: fixedNow}
	tests := []struct {
		expr    string
		known   bool
		met     bool
		missing string
		err     string
	}{
		{expr: "measured.balance >= args.amount", known: true, met: true},
		{expr: "args.amount * 4 < measured.balance", known: true, met: false},
		{expr: "args.to + 1 > 0", err: "no such overload"},
		{expr: "args.rate == 0.1 && args.amount == 500000", known: true, met: true},
		{expr: `args["to"].startsWith("110") && args.flag`, known: true, met: true},
		{expr: "principal == 'u_01' && now == timestamp('2026-11-30T09:12:03.114Z')", known: true, met: true},
		{expr: "has(args.memo) || args.amount > 0", known: true, met: true},
		{expr: "args.none == null", known: true, met: true},
		{expr: "args.memo == 'x' && args.amount > 0", missing: "memo"},
		{expr: "measured.limit >= args.amount", missing: "limit"},
		{expr: "args.list.all(a, args.list.all(b, args.list.all(c, a + b + c > 0)))", err: "cost limit"},
		{expr: "args.huge > 0", err: "out of range"},
		{expr: "args.inexact > 0", err: "no exact double"},
		{expr: "dyn(args.amount)", err: "not a bool"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			ast, _, err := c.Compile(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			got := ev.Evaluate(context.Background(), ast, in)
			switch {
			case tt.err != "":
				if got.Err == nil || !strings.Contains(got.Err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", got.Err, tt.err)
				}
			case tt.missing != "":
				if got.Known || strings.Join(got.Missing, ",") != tt.missing || got.Err != nil {
					t.Fatalf("%+v, want missing %s", got, tt.missing)
				}
			default:
				if got.Err != nil || got.Known != tt.known || got.Met != tt.met {
					t.Fatalf("%+v", got)
				}
			}
		})
	}
	if got := ev.Evaluate(context.Background(), nil, in); got.Err == nil {
		t.Error("a nil expression evaluated")
	}
	// The cost is CEL's count of the work done, also when the work ran into the limit.
	ast, _, _ := c.Compile("args.list.all(a, args.list.all(b, a + b > 0))")
	if got := ev.Evaluate(context.Background(), ast, in); got.Err == nil || got.Cost <= CELCostLimit {
		t.Errorf("evaluation past the cost limit: %+v", got)
	}
	cheap, _, _ := c.Compile("args.amount > 0")
	if got := ev.Evaluate(context.Background(), cheap, in); !got.Met || got.Cost == 0 || got.Cost > 10 {
		t.Errorf("cheap evaluation: %+v", got)
	}
	// Reading an input costs one per value in it: the list and its 200 numbers, converted.
	size, _, _ := c.Compile("size(args.list) == 200")
	if got := ev.Evaluate(context.Background(), size, in); !got.Met || got.Cost < 201 || got.Cost > 210 {
		t.Errorf("evaluation reading a list: %+v", got)
	}
	// A canceled context stops a long evaluation where it is, instead of passing it or running
	// it to its cost limit: the interruption is checked every few comprehension steps.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := ev.Evaluate(ctx, ast, in)
	if got.Err == nil || !errors.Is(got.Err, context.Canceled) || got.Cost >= CELCostLimit/100 {
		t.Errorf("canceled evaluation: %+v", got)
	}
}

// Concurrent evaluations share one program cache.
func TestCELEvaluatorConcurrent(t *testing.T) {
	ev, _ := NewCELEvaluator()
	c, _ := policy.NewCompiler()
	ast, _, _ := c.Compile("args.amount <= 1000000")
	done := make(chan bool)
	for i := range 8 {
		go func() {
			got := ev.Evaluate(context.Background(), ast, EvalInput{Args: map[string]any{"amount": json.Number("999")}, Now: time.Now()})
			done <- got.Known && got.Met && i >= 0
		}()
	}
	for range 8 {
		if !<-done {
			t.Fatal("concurrent evaluation failed")
		}
	}
}

// Expressions that arrive with requests are cached by their text. Only those within
// policy.MaxExprBytes are kept: a request body's worth of expression text per entry would let
// callers pin maxCachedExprs bodies in memory. A longer one is refused unread.
func TestExprCacheKeepsOnlyShortExpressions(t *testing.T) {
	atBound := `args.note == "` + strings.Repeat("x", policy.MaxExprBytes-15) + `"`
	long := `args.note == "` + strings.Repeat("x", 8<<10) + `"`
	huge := `args.note == "` + strings.Repeat("x", 512<<10) + `"` // past CEL's own size limit
	tests := []struct {
		expr string
		kept bool
	}{
		{"args.amount <= 100", true},
		{atBound, true},
		{long, false},
		{"args.amount <= (", true}, // a compile error is cached like a success
		{huge, false},
	}
	var x exprCache
	for _, tt := range tests {
		for range 2 {
			c := x.compile(tt.expr)
			if (c.err == nil) != (c.ast != nil) {
				t.Fatalf("compile(%.30q): ast %v, err %v", tt.expr, c.ast != nil, c.err)
			}
		}
		x.mu.Lock()
		_, kept := x.m[tt.expr]
		x.mu.Unlock()
		if kept != tt.kept {
			t.Errorf("expression of %d bytes kept = %v, want %v", len(tt.expr), kept, tt.kept)
		}
	}
	if c := x.compile(atBound); c.err != nil || strings.Join(c.reads.Args, ",") != "note" {
		t.Errorf("expression at the bound: reads %v, err %v", c.reads, c.err)
	}
	if c := x.compile(long); !errors.Is(c.err, policy.ErrExprTooLarge) {
		t.Errorf("long expression: err %v", c.err)
	}
}
