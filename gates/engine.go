package gates

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/verdictgate/verdict/api"

	"github.com/google/cel-go/cel"
	"github.com/verdictgate/verdict/policy"
)

// Engine runs preflights. It holds what outlives one run: the clock, the id source, the default
// state store, the optional approver, measurer and evaluator, and compiled tool definitions.
// It is safe for concurrent use.
type Engine struct {
	clock     func() time.Time
	ids       IDSource
	state     State
	webhook   Approver
	measurer  Measurer
	evaluator Evaluator
	budget    uint64 // Config.EvaluationBudget with its default
	defs      defCache
	exprs     exprCache

	// whenCases is policy.WhenCases(), read once: the policy package returns a fresh copy on
	// every call. Never modified.
	whenCases []string
}

// Config configures an Engine.
type Config struct {
	// State is the state of every run whose Input has none. A caller that gives each run its
	// own state (one that commits with the run's record) leaves it nil.
	State State
	Clock func() time.Time // default time.Now
	IDs   IDSource         // default RandomIDs
	// Webhook decides C3 for tools whose policy names a webhook approver; without one such
	// tools pass C3 only on a policy phrase.
	Webhook Approver
	// Measurer performs policy measurements (measure.New); without one a measured value stays
	// unknown with route system_lookup.
	Measurer Measurer
	// Evaluator evaluates conditions and user-checklist expressions (NewCELEvaluator); without
	// one they stay unknown with route definition_repair.
	Evaluator Evaluator
	// EvaluationBudget is the evaluation cost (Evaluation.Cost) all the expressions of one run
	// may spend together; 0 means DefaultEvaluationBudget. See Engine.Run.
	EvaluationBudget uint64
}

// DefaultEvaluationBudget is what all the expressions of one run may cost together by default.
// A condition comparing two inputs costs about 5, one over a list of a hundred a few hundred:
// this leaves room for dozens of those. It is well under what one expression may cost on its
// own (CELCostLimit), because CEL's cost tracking grows with the square of the length of the
// comprehension it tracks: one comprehension that costs 100 000 takes over a second of CPU,
// one that costs 30 000 a tenth of that (BenchmarkPreflightMostExpensive).
const DefaultEvaluationBudget = 30_000

// Measurer performs one declared measurement. inputs holds the known values its templates read
// (m.Inputs: settled arguments, or measurements taken earlier in the run). An error is a failed
// lookup, never an empty value; a JSON null is a value (nothing is there). The engine calls it
// concurrently for the measurements of one dependency depth.
type Measurer interface {
	Measure(ctx context.Context, m *policy.Measurement, inputs map[string]any) (any, error)
}

// EvalInput is what a condition or checklist expression may read.
type EvalInput struct {
	Args      map[string]any // known argument values
	Measured  map[string]any // measurements taken in this run
	Principal string
	Now       time.Time
}

// Evaluation is the result of one expression. Known false means an input is missing (listed in
// Missing); Err means the expression failed and the item needs definition repair.
type Evaluation struct {
	Known        bool
	Met          bool
	Inputs       []string
	ReadMeasured bool
	Missing      []string
	Err          error
	// Cost is the work the evaluation did, in the evaluator's units (see CELEvaluator), also
	// when it failed; 0 when nothing was evaluated. A run's expressions share
	// Config.EvaluationBudget of it.
	Cost uint64
}

// Evaluator evaluates a compiled expression (a provider condition or a checklist item).
type Evaluator interface {
	Evaluate(ctx context.Context, ast *cel.Ast, in EvalInput) Evaluation
}

// New returns an Engine.
func New(cfg Config) (*Engine, error) {
	e := &Engine{
		clock:     cfg.Clock,
		ids:       cmp.Or[IDSource](cfg.IDs, RandomIDs{}),
		state:     cfg.State,
		webhook:   cfg.Webhook,
		measurer:  cfg.Measurer,
		evaluator: cfg.Evaluator,
		budget:    cmp.Or(cfg.EvaluationBudget, DefaultEvaluationBudget),
		whenCases: policy.WhenCases(),
	}
	if e.clock == nil {
		e.clock = time.Now
	}
	return e, nil
}

// whenCase reports which of the four when cases the JSON value raw names. A plain JSON string
// is compared as it is; anything else (escapes, another type, malformed JSON) is decoded first,
// so the answer is the one json.Unmarshal into a string would give.
func (e *Engine) whenCase(raw []byte) (string, bool) {
	for _, wc := range e.whenCases {
		if len(raw) == len(wc)+2 && raw[0] == '"' && raw[len(raw)-1] == '"' && string(raw[1:len(raw)-1]) == wc {
			return wc, true
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || !slices.Contains(e.whenCases, s) {
		return "", false
	}
	return s, true
}

// Input is one preflight: the tool definition as listed by its server, the loaded policy and
// the decoded request.
type Input struct {
	Tool    Tool
	Policy  *policy.Policy
	Request *api.Request
	// State is what this run reads and writes between runs; nil means Config.State.
	State State
	// Console are the decided console approvals of this call (same principal, conversation,
	// server and tool) not yet acted on; the run uses the one bound to its arguments digest,
	// if any (console.go).
	Console []ConsoleDecision
	// Measurer and Webhook are this run's, in place of Config.Measurer and Config.Webhook;
	// nil means the engine's. Capture and Replay give a run its own.
	Measurer Measurer
	Webhook  Approver
}

// Inspect reports why a tool definition, under the policy's entry for the tool (nil when it has
// none), would end every preflight in definition repair — a missing or irreducible schema, a
// malformed label, a policy field the tool does not declare — as the gate such a record would
// carry, or nil when it is usable. check-policy lists these, and a policy reload that would
// cause a policy_mismatch is refused.
func (e *Engine) Inspect(t Tool, pt *policy.Tool) (*api.Gate, error) {
	d, err := e.defs.get(t)
	if err != nil {
		return nil, err
	}
	return repairGate(d, pt), nil
}

// repairGate is the gate of a run on d, under pt, that ends in definition repair before any
// value is read, or nil when d is usable: Inspect's answer, and the run's record.
func repairGate(d *definition, pt *policy.Tool) *api.Gate {
	switch {
	case d.unsupported != "":
		return &api.Gate{Kind: api.GateSchemaUnsupported, Detail: d.unsupported}
	case d.labelErr != nil:
		return &api.Gate{Kind: api.GateLabelInvalid, Detail: d.labelErr.Error()}
	}
	if why := policyMismatch(pt, d); why != "" {
		return &api.Gate{Kind: api.GatePolicyMismatch, Detail: why}
	}
	return nil
}

// Argument is one argument a tool's input schema declares, as every preflight on the tool reads
// it: a name a policy entry's fields and drafted may give rules to.
type Argument struct {
	Name string
	// Schema is the argument's own schema, its $refs followed.
	Schema json.RawMessage
	// RequiredLabel says the tool's description labels the argument [Required]: its value
	// never comes from the user's bare answer, and it cannot be drafted.
	RequiredLabel bool
}

// Arguments returns the arguments t declares, in name order. A definition whose schema the gate
// cannot read declares none (Inspect says why): a policy entry cannot name any of them.
func (e *Engine) Arguments(t Tool) ([]Argument, error) {
	d, err := e.defs.get(t)
	if err != nil {
		return nil, err
	}
	if d.unsupported != "" {
		return nil, nil
	}
	out := make([]Argument, 0, len(d.propOrder))
	for _, n := range d.propOrder {
		// The cached definition is shared with every run: the caller gets its own bytes.
		out = append(out, Argument{Name: n, Schema: slices.Clone(d.props[n].schema), RequiredLabel: d.requiredLabel[n]})
	}
	return out, nil
}
