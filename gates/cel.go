package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/verdictgate/verdict/policy"
)

// CELCostLimit bounds the evaluation cost of one expression: a condition is a comparison, not
// a program, and an expression that runs past the limit is an evaluation error. The cost is
// CEL's own count of the work done; the time a unit takes varies with the expression, since
// CEL's cost tracking itself grows with the length of the longest comprehension (a single one
// over 30 000 elements takes about two seconds to reach the limit).
const CELCostLimit = 100_000

// maxPrograms bounds the program cache. A policy holds a handful of expressions; the bound
// matters only when expressions arrive with requests or policies are reloaded many times.
const maxPrograms = 4096

// CELEvaluator evaluates condition and checklist expressions compiled by package policy, over
// args (settled values), measured (this run's measurements), principal and now. An expression
// that reads an argument or measurement that is absent is not evaluated: it is unknown and
// Missing says what it waits for. Anything else that goes wrong — a runtime error, the cost
// limit, a canceled context, a non-boolean result, a number that cannot be represented exactly —
// is an error, never a pass. Evaluation.Cost is CEL's actual cost plus one for every value of
// the inputs the expression reads: converting them for CEL is work too, redone for every
// expression, and without the count 64 expressions reading one long list would convert it 64
// times within any budget. It is safe for concurrent use.
type CELEvaluator struct {
	env *cel.Env

	mu    sync.Mutex
	progs map[*cel.Ast]*celProgram
}

type celProgram struct {
	prg   cel.Program
	reads policy.Reads
}

var _ Evaluator = (*CELEvaluator)(nil)

// NewCELEvaluator returns an evaluator over the environment of policy.NewEnv.
func NewCELEvaluator() (*CELEvaluator, error) {
	env, err := policy.NewEnv()
	if err != nil {
		return nil, fmt.Errorf("gates: cel environment: %w", err)
	}
	return &CELEvaluator{env: env, progs: map[*cel.Ast]*celProgram{}}, nil
}

// program returns the cached program of a checked expression. Programs are keyed by the AST,
// which a policy load compiles once.
func (e *CELEvaluator) program(a *cel.Ast) (*celProgram, error) {
	e.mu.Lock()
	p := e.progs[a]
	e.mu.Unlock()
	if p != nil {
		return p, nil
	}
	reads, err := policy.ExprReads(a)
	if err != nil {
		return nil, err
	}
	prg, err := e.env.Program(a, cel.CostLimit(CELCostLimit), cel.InterruptCheckFrequency(64))
	if err != nil {
		return nil, err
	}
	p = &celProgram{prg: prg, reads: reads}
	e.mu.Lock()
	if len(e.progs) >= maxPrograms {
		clear(e.progs)
	}
	e.progs[a] = p
	e.mu.Unlock()
	return p, nil
}

// Evaluate implements Evaluator.
func (e *CELEvaluator) Evaluate(ctx context.Context, a *cel.Ast, in EvalInput) (ev Evaluation) {
	if a == nil {
		return Evaluation{Err: errors.New("no compiled expression")}
	}
	p, err := e.program(a)
	if err != nil {
		return Evaluation{Err: fmt.Errorf("program: %w", err)}
	}
	ev = Evaluation{Inputs: p.reads.Inputs(), ReadMeasured: len(p.reads.Measured) > 0}
	for _, n := range p.reads.Args {
		if _, ok := in.Args[n]; !ok {
			ev.Missing = append(ev.Missing, n)
		}
	}
	for _, n := range p.reads.Measured {
		if _, ok := in.Measured[n]; !ok {
			ev.Missing = append(ev.Missing, n)
		}
	}
	if len(ev.Missing) > 0 {
		return ev
	}
	// Only what the expression reads is converted: a value it never looks at cannot fail it.
	// Converting is work proportional to what is read, done for every expression that reads
	// it, so it is part of the cost.
	var conv converter
	defer func() { ev.Cost += conv.values }()
	args, err := conv.subset(in.Args, p.reads.Args, p.reads.Tested, "args.")
	if err != nil {
		ev.Err = err
		return ev
	}
	measured, err := conv.subset(in.Measured, p.reads.Measured, p.reads.Tested, "measured.")
	if err != nil {
		ev.Err = err
		return ev
	}
	out, det, err := p.prg.ContextEval(ctx, map[string]any{
		"args": args, "measured": measured, "principal": in.Principal, "now": in.Now,
	})
	if c := det.ActualCost(); c != nil {
		ev.Cost = *c
	}
	if err != nil {
		ev.Err = err
		return ev
	}
	b, ok := out.(types.Bool)
	if !ok {
		ev.Err = fmt.Errorf("expression yields %s, not a bool", out.Type().TypeName())
		return ev
	}
	ev.Known, ev.Met = true, bool(b)
	return ev
}

// converter converts decoded JSON for CEL, counting the values it converts: one per number,
// string, boolean, null, list and map, at any depth.
type converter struct {
	values uint64
}

// subset converts the members of m that an expression reads.
func (c *converter) subset(m map[string]any, read, tested []string, prefix string) (map[string]any, error) {
	out := make(map[string]any, len(read))
	add := func(n string) error {
		v, ok := m[n]
		if !ok {
			return nil
		}
		cv, err := c.value(v)
		if err != nil {
			return fmt.Errorf("%s%s: %w", prefix, n, err)
		}
		out[n] = cv
		return nil
	}
	for _, n := range read {
		if err := add(n); err != nil {
			return nil, err
		}
	}
	for _, t := range tested {
		if n, ok := strings.CutPrefix(t, prefix); ok {
			if err := add(n); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// value converts v. A json.Number becomes an int64 when it is an integer in range, else a
// float64 whose shortest form denotes exactly the decimal written (0.1 does;
// 9007199254740993.5 does not); any other number is refused, since a comparison against a
// silently rounded value decides nothing.
func (c *converter) value(v any) (any, error) {
	c.values++
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s is out of range", x)
		}
		exact, ok := new(big.Rat).SetString(string(x))
		shortest, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		if !ok || shortest == nil || exact.Cmp(shortest) != 0 {
			return nil, fmt.Errorf("number %s has no exact double", x)
		}
		return f, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ce, err := c.value(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = ce
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			ce, err := c.value(e)
			if err != nil {
				return nil, err
			}
			out[i] = ce
		}
		return out, nil
	}
	return v, nil
}
