package policy

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"
	celast "github.com/google/cel-go/common/ast"
)

// Reads is what a compiled expression reads from args and measured. A name the expression
// only tests with has() is listed in Tested, not in Args or Measured: its absence is an
// answer, not a missing input.
type Reads struct {
	Args     []string
	Measured []string
	Tested   []string // "args.x" or "measured.x"
}

// Inputs lists every argument and measurement name the expression reads, sorted: the
// `inputs` of a condition slot.
func (r Reads) Inputs() []string {
	out := make([]string, 0, len(r.Args)+len(r.Measured))
	out = append(append(out, r.Args...), r.Measured...)
	slices.Sort(out)
	return slices.Compact(out) // a name read both as an argument and as a measurement
}

// errDynamicRead is returned for an expression whose inputs cannot be listed statically.
var errDynamicRead = errors.New("args and measured may only be read by a constant name (args.x, args[\"x\"], has(args.x))")

// ExprReads lists what a checked expression reads. Inputs must be known before an expression
// is evaluated, so an expression that reads args or measured by a computed key, uses either
// map as a whole, or shadows either name in a comprehension is refused.
func ExprReads(a *cel.Ast) (Reads, error) {
	if a == nil {
		return Reads{}, errors.New("no compiled expression")
	}
	var w readWalk
	w.walk(a.NativeRep().Expr())
	if w.err != nil {
		return Reads{}, w.err
	}
	slices.Sort(w.r.Args)
	slices.Sort(w.r.Measured)
	slices.Sort(w.r.Tested)
	return w.r, nil
}

// readWalk lists what an expression reads as it walks it; err is the first read it cannot
// list, which ends the walk.
type readWalk struct {
	r   Reads
	err error
}

// read notes that the expression reads name of root (args or measured), or only tests it.
func (w *readWalk) read(root, name string, testOnly bool) {
	list := &w.r.Measured
	switch {
	case testOnly:
		list, name = &w.r.Tested, root+"."+name
	case root == "args":
		list = &w.r.Args
	}
	if !slices.Contains(*list, name) {
		*list = append(*list, name)
	}
}

// inputRoot says whether e names args or measured, and which.
func inputRoot(e celast.Expr) (string, bool) {
	if e.Kind() != celast.IdentKind {
		return "", false
	}
	n := e.AsIdent()
	return n, n == "args" || n == "measured"
}

func (w *readWalk) walk(e celast.Expr) {
	if w.err != nil || e == nil {
		return
	}
	switch e.Kind() {
	case celast.IdentKind:
		if _, ok := inputRoot(e); ok {
			w.err = errDynamicRead
		}
	case celast.SelectKind:
		s := e.AsSelect()
		if root, ok := inputRoot(s.Operand()); ok {
			w.read(root, s.FieldName(), s.IsTestOnly())
			return
		}
		w.walk(s.Operand())
	case celast.CallKind:
		w.call(e.AsCall())
	case celast.ComprehensionKind:
		w.comprehension(e.AsComprehension())
	case celast.ListKind:
		for _, el := range e.AsList().Elements() {
			w.walk(el)
		}
	case celast.MapKind:
		for _, en := range e.AsMap().Entries() {
			w.walk(en.AsMapEntry().Key())
			w.walk(en.AsMapEntry().Value())
		}
	case celast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			w.walk(f.AsStructField().Value())
		}
	}
}

// call walks a call; an index into args or measured reads the name when it is a constant
// string.
func (w *readWalk) call(c celast.CallExpr) {
	if c.FunctionName() == "_[_]" && len(c.Args()) == 2 {
		if root, ok := inputRoot(c.Args()[0]); ok {
			k := c.Args()[1]
			if k.Kind() == celast.LiteralKind {
				if s, isStr := k.AsLiteral().Value().(string); isStr {
					w.read(root, s, false)
					return
				}
			}
			w.err = errDynamicRead
			return
		}
	}
	if c.IsMemberFunction() {
		w.walk(c.Target())
	}
	for _, a := range c.Args() {
		w.walk(a)
	}
}

// comprehension walks a comprehension, whose variables must not shadow args or measured.
func (w *readWalk) comprehension(c celast.ComprehensionExpr) {
	for _, v := range []string{c.IterVar(), c.IterVar2(), c.AccuVar()} {
		if v == "args" || v == "measured" {
			w.err = errDynamicRead
			return
		}
	}
	w.walk(c.IterRange())
	w.walk(c.AccuInit())
	w.walk(c.LoopCondition())
	w.walk(c.LoopStep())
	w.walk(c.Result())
}

// Compiler compiles condition and checklist expressions in the environment of [NewEnv]. It is
// safe for concurrent use; the gate keeps one for expressions that arrive with a request.
type Compiler struct {
	env *cel.Env
}

// NewCompiler returns a Compiler.
func NewCompiler() (*Compiler, error) {
	env, err := NewEnv()
	if err != nil {
		return nil, fmt.Errorf("policy: cel environment: %w", err)
	}
	return &Compiler{env: env}, nil
}

// Compile type-checks expr, which must yield a bool, and lists what it reads. An expression
// longer than [MaxExprBytes] is refused unread.
func (c *Compiler) Compile(expr string) (*cel.Ast, Reads, error) {
	if len(expr) > MaxExprBytes {
		return nil, Reads{}, fmt.Errorf("%w: %d bytes, at most %d", ErrExprTooLarge, len(expr), MaxExprBytes)
	}
	// Parse and Check rather than Compile, which renders every error to test for one (as
	// Issues.Err does): that quotes the source once per error, quadratic in the text, half a
	// second for 4 KiB of ill-typed literals. Only the first error is rendered here.
	ast, iss := c.env.Parse(expr)
	if len(iss.Errors()) == 0 {
		ast, iss = c.env.Check(ast)
	}
	if errs := iss.Errors(); len(errs) > 0 {
		msg := errs[0].ToDisplayString(common.NewTextSource(expr))
		if len(errs) > 1 {
			msg += fmt.Sprintf("\n(%d more not shown)", len(errs)-1)
		}
		return nil, Reads{}, fmt.Errorf("expression does not compile: %s", msg)
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, Reads{}, fmt.Errorf("expression yields %s, want bool", ast.OutputType())
	}
	r, err := ExprReads(ast)
	if err != nil {
		return nil, Reads{}, fmt.Errorf("expression does not compile: %w", err)
	}
	return ast, r, nil
}

// Bounds of one expression. Compiling is work done before any cost limit applies, and CEL's
// compiler is not cheap: a few microseconds per byte for plain text, and a type check that grows
// far faster than the text with nesting (list and map literals nested 200 deep, 400 bytes, take
// seconds). Conditions need a depth of 5 or so; the bounds leave room for any readable one.
const (
	// MaxExprBytes bounds the text of one expression, in a policy or in a request.
	MaxExprBytes = 4 << 10
	// MaxExprDepth bounds how deeply an expression's parts may nest.
	MaxExprDepth = 16
)

// ErrExprTooLarge is returned by [Compiler.Compile] for an expression over [MaxExprBytes].
var ErrExprTooLarge = errors.New("expression too large")

// NewEnv returns the CEL environment conditions and checklist expressions are compiled in:
// args (settled values), measured (measurements), principal and now. Numbers compare across
// int, uint and double, since a JSON amount and a measured balance need not share a type. An
// expression nested deeper than [MaxExprDepth] does not compile.
func NewEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("measured", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("principal", cel.DynType),
		cel.Variable("now", cel.TimestampType),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserRecursionLimit(MaxExprDepth),
	)
}
