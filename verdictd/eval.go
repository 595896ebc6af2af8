package verdictd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"

	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/policy"
)

// evalCostLimit bounds one expression's evaluation: a condition is a comparison, not a program.
const evalCostLimit = 100_000

// maxPrograms bounds the program cache. Policies hold a handful of expressions; the bound only
// matters if expressions arrive per request.
const maxPrograms = 4096

// Evaluator evaluates policy conditions and checklist expressions with CEL over args
// (the settled values), measured, principal and now. An expression that reads an argument or
// a measurement that is not known is not evaluated: it is unknown, and Missing says what it
// waits for. Anything else that goes wrong, a non-boolean result included, is an error and
// never a pass.
type Evaluator struct {
	env *cel.Env

	mu    sync.Mutex
	progs map[*cel.Ast]*program
}

type program struct {
	prg      cel.Program
	args     []string // argument names the expression reads
	measured []string // measurement names the expression reads
	optional map[string]bool
}

var _ gates.Evaluator = (*Evaluator)(nil)

// NewEvaluator returns an Evaluator over the policy's CEL environment.
func NewEvaluator() (*Evaluator, error) {
	env, err := policy.NewEnv()
	if err != nil {
		return nil, fmt.Errorf("cel environment: %w", err)
	}
	if env, err = env.Extend(cel.CrossTypeNumericComparisons(true)); err != nil {
		return nil, fmt.Errorf("cel environment: %w", err)
	}
	return &Evaluator{env: env, progs: map[*cel.Ast]*program{}}, nil
}

func (e *Evaluator) program(a *cel.Ast) (*program, error) {
	e.mu.Lock()
	p := e.progs[a]
	e.mu.Unlock()
	if p != nil {
		return p, nil
	}
	prg, err := e.env.Program(a, cel.CostLimit(evalCostLimit), cel.InterruptCheckFrequency(64))
	if err != nil {
		return nil, err
	}
	p = &program{prg: prg, optional: map[string]bool{}}
	celast.PreOrderVisit(a.NativeRep().Expr(), celast.NewExprVisitor(func(x celast.Expr) {
		var root, name string
		testOnly := false
		switch x.Kind() {
		case celast.SelectKind:
			s := x.AsSelect()
			if s.Operand().Kind() != celast.IdentKind {
				return
			}
			root, name, testOnly = s.Operand().AsIdent(), s.FieldName(), s.IsTestOnly()
		case celast.CallKind:
			c := x.AsCall()
			if c.FunctionName() != "_[_]" || len(c.Args()) != 2 || c.Args()[0].Kind() != celast.IdentKind ||
				c.Args()[1].Kind() != celast.LiteralKind {
				return
			}
			s, ok := c.Args()[1].AsLiteral().Value().(string)
			if !ok {
				return
			}
			root, name = c.Args()[0].AsIdent(), s
		default:
			return
		}
		key := root + "." + name
		switch root {
		case "args":
			if !slices.Contains(p.args, name) {
				p.args = append(p.args, name)
			}
		case "measured":
			if !slices.Contains(p.measured, name) {
				p.measured = append(p.measured, name)
			}
		default:
			return
		}
		// has(args.x) asks whether x is there: its absence is an answer, not a missing input.
		if testOnly {
			if _, seen := p.optional[key]; !seen {
				p.optional[key] = true
			}
		} else {
			p.optional[key] = false
		}
	}))
	slices.Sort(p.args)
	slices.Sort(p.measured)
	e.mu.Lock()
	if len(e.progs) >= maxPrograms {
		clear(e.progs)
	}
	e.progs[a] = p
	e.mu.Unlock()
	return p, nil
}

// Evaluate implements gates.Evaluator.
func (e *Evaluator) Evaluate(ctx context.Context, a *cel.Ast, in gates.EvalInput) gates.Evaluation {
	if a == nil {
		return gates.Evaluation{Err: errors.New("no compiled expression")}
	}
	p, err := e.program(a)
	if err != nil {
		return gates.Evaluation{Err: fmt.Errorf("program: %w", err)}
	}
	ev := gates.Evaluation{ReadMeasured: len(p.measured) > 0}
	ev.Inputs = append(append(ev.Inputs, p.args...), p.measured...)
	for _, n := range p.args {
		if _, ok := in.Args[n]; !ok && !p.optional["args."+n] {
			ev.Missing = append(ev.Missing, n)
		}
	}
	for _, n := range p.measured {
		if _, ok := in.Measured[n]; !ok && !p.optional["measured."+n] {
			ev.Missing = append(ev.Missing, n)
		}
	}
	if len(ev.Missing) > 0 {
		return ev
	}
	args, err := celValue(in.Args)
	if err != nil {
		ev.Err = fmt.Errorf("args: %w", err)
		return ev
	}
	measured, err := celValue(in.Measured)
	if err != nil {
		ev.Err = fmt.Errorf("measured: %w", err)
		return ev
	}
	out, _, err := p.prg.ContextEval(ctx, map[string]any{
		"args": args, "measured": measured, "principal": in.Principal, "now": in.Now,
	})
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

// celValue converts decoded JSON for CEL: json.Number becomes int64 when it is an integer in
// range, else float64.
func celValue(v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := convertJSON(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = c
		}
		return out, nil
	}
	return convertJSON(v)
}

func convertJSON(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		// The request decoder already refused numbers whose double is not their exact value.
		f, err := x.Float64()
		if err != nil {
			return nil, err
		}
		return f, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := convertJSON(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := convertJSON(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return v, nil
}
