package gates

import (
	"cmp"
	"maps"
	"strings"
	"sync"

	"github.com/verdictgate/verdict/api"

	"github.com/google/cel-go/cel"

	"github.com/verdictgate/verdict/policy"
)

// checkItem is one user-checklist item as this run reads it: from the principal's policy
// entry or from the request. Whatever status an item arrives with is ignored: items are
// verified afresh, by code.
type checkItem struct {
	id, kind, description string
	ast                   *cel.Ast
	reads                 policy.Reads
	problem               string // why the item cannot be verified as written (definition repair)
	fromRequest           bool   // sent with the request, not the policy's
}

// readChecklist collects the user-checklist items, policy items first.
func (r *run) readChecklist() {
	r.checks = nil
	if pr := r.in.Policy.Principal(r.req.Principal); pr != nil {
		for _, it := range pr.UserChecklist {
			c := checkItem{id: it.ID, kind: cmp.Or(it.Kind, "expr"), description: it.Description, ast: it.AST, reads: it.Reads}
			if c.kind == "expr" && it.CompileErr != nil {
				c.ast, c.problem = nil, "expression does not compile"
			}
			r.checks = append(r.checks, c)
		}
	}
	for _, it := range r.req.UserChecklist {
		c := checkItem{id: it.ID, kind: cmp.Or(it.Kind, "expr"), description: it.Description, fromRequest: true}
		if c.kind == "expr" {
			if it.Expr == "" {
				c.problem = "item without expression"
			} else if x := r.e.exprs.compile(it.Expr); x.err != nil {
				c.problem = "expression does not compile"
			} else {
				c.ast, c.reads = x.ast, x.reads
			}
		}
		r.checks = append(r.checks, c)
	}
	seen := map[string]bool{}
	for i := range r.checks {
		c := &r.checks[i]
		switch {
		case c.id == "":
			// An item without an id cannot be reattached to an answer.
			c.problem = "item without id"
		case seen[c.id]:
			c.problem = "duplicate item id"
		}
		seen[c.id] = true
	}
}

// evalArgs is what expressions read as args: the settled call plus the slots a lookup
// confirmed null, which an expression may test.
func (r *run) evalArgs(plans []*slotPlan, args map[string]any) map[string]any {
	out := make(map[string]any, len(args)+1)
	maps.Copy(out, args)
	for _, p := range plans {
		if p.slot.Kind == api.KindValue && p.slot.Status == api.StatusNull {
			out[p.slot.SlotID] = nil
		}
	}
	return out
}

func valueSlots(plans []*slotPlan) map[string]*api.Slot {
	out := make(map[string]*api.Slot, len(plans))
	for _, p := range plans {
		if p.slot.Kind == api.KindValue {
			out[p.slot.SlotID] = &p.slot
		}
	}
	return out
}

// conditionSlots evaluates the provider conditions. A condition's source is never a user
// answer: only code decides it.
func (r *run) conditionSlots(values map[string]any, plans []*slotPlan) []*slotPlan {
	if r.ptool == nil || len(r.ptool.Conditions) == 0 {
		return nil
	}
	slots := valueSlots(plans)
	var out []*slotPlan
	for _, c := range r.ptool.Conditions {
		s := api.Slot{SlotID: c.ID, Kind: api.KindCondition, Status: api.StatusUnknown, ResolvedAt: r.stampStr,
			AllowedSources: []api.Source{api.SourceMeasuredData, api.SourceEvaluation}, Inputs: c.Reads.Inputs()}
		switch {
		case c.CompileErr != nil:
			s.Route, s.Note = ptr(api.RouteDefinitionRepair), "expression does not compile"
		case r.e.evaluator == nil:
			s.Route, s.Note = ptr(api.RouteDefinitionRepair), "no condition evaluator configured"
		default:
			r.applyExpr(&s, r.evalExpr(c.AST, c.Reads, values, slots, false))
		}
		if s.Route != nil && *s.Route != api.RouteDefinitionRepair && r.pending(c.ID) {
			s.PendingAtTrigger = true
		}
		out = append(out, &slotPlan{slot: s})
	}
	return out
}

// checklist verifies the user-checklist items. They are verified only at trigger time; at
// instruction time they are echoed and not counted. An item of kind confirm is an explicit
// approval of the call as it stands, void when the call changes.
func (r *run) checklist(values map[string]any, plans []*slotPlan, args map[string]any, complete bool) ([]*slotPlan, error) {
	if len(r.checks) == 0 {
		return nil, nil
	}
	slots := valueSlots(plans)
	ids := map[string]bool{}
	for _, p := range plans {
		ids[p.slot.SlotID] = true
	}
	var out []*slotPlan
	for _, it := range r.checks {
		s := api.Slot{SlotID: it.id, Kind: api.KindApproval, Status: api.StatusUnknown, ResolvedAt: r.stampStr, Inputs: it.reads.Inputs()}
		p := &slotPlan{check: it.kind}
		switch {
		case it.problem != "":
			s.Route, s.Note = ptr(api.RouteDefinitionRepair), it.problem
		case ids[it.id]:
			// Answers are bound by id: an item must not share one with a slot.
			s.Route, s.Note = ptr(api.RouteDefinitionRepair), "item id is also a slot id"
		case r.phase == api.PhaseAtInstruction:
			s.Note = "verified at trigger time"
		case it.kind == "confirm":
			if !complete {
				s.Route, s.Note = ptr(api.RouteAskUser), "waits for the call it approves"
				break
			}
			d, err := digestArgs(args)
			if err != nil {
				return nil, err
			}
			msg := "Please confirm before this runs."
			if it.description != "" {
				msg = "Please confirm: " + it.description
			}
			if p, err = r.approval(p, s, d, args, r.safeMessage(msg)); err != nil {
				return nil, err
			}
			out = append(out, p)
			continue
		case r.e.evaluator == nil:
			s.Route, s.Note = ptr(api.RouteDefinitionRepair), "no checklist verifier configured"
		default:
			o := r.evalExpr(it.ast, it.reads, values, slots, it.fromRequest)
			if o.overBudget && it.fromRequest && !r.policyOverBudget {
				return nil, badRequest(api.CodeEvaluationBudgetExceeded,
					"the user checklist's expressions cost more than the evaluation budget of %d", r.e.budget)
			}
			r.applyExpr(&s, o)
		}
		p.slot = s
		out = append(out, p)
	}
	return out, nil
}

// exprOutcome is what evaluating one expression settled.
type exprOutcome struct {
	known, met   bool
	source       api.Source
	route        string
	lookupFailed bool
	pending      bool
	note         string
	refs         []api.MeasurementRef
	overBudget   bool
}

// noteOverBudget is the note of an expression over the run's evaluation budget.
const noteOverBudget = "evaluation budget exceeded"

// evalExpr evaluates a condition or checklist expression. Every input must be known first;
// an unknown one makes the expression unknown with the route of what is missing (the most
// severe when several are), and it is pending only when everything missing is. Its cost is
// charged to the run's budget (see Engine.Run); fromRequest says whose expression it is.
func (r *run) evalExpr(ast *cel.Ast, reads policy.Reads, values map[string]any, slots map[string]*api.Slot, fromRequest bool) exprOutcome {
	var o exprOutcome
	var missing []string
	pending := true
	// A route names the outcome it leads to, and the most severe one wins (severer).
	worse := func(route string) { o.route = severer(o.route, route) }
	for _, n := range reads.Args {
		if _, ok := values[n]; ok {
			continue
		}
		missing = append(missing, n)
		switch sl := slots[n]; {
		case sl == nil || sl.Route == nil:
			// The argument is not part of the call: nothing will ever settle it.
			worse(api.RouteDefinitionRepair)
			pending = false
		default:
			worse(*sl.Route)
			o.lookupFailed = o.lookupFailed || sl.LookupFailed
			pending = pending && sl.PendingAtTrigger
		}
	}
	for _, n := range reads.Measured {
		mr := r.mres[n]
		if mr != nil && mr.status == mDone {
			o.refs = append(o.refs, mr.ref)
			continue
		}
		missing = append(missing, n)
		switch {
		case mr == nil:
			// Not a declared measurement.
			worse(api.RouteDefinitionRepair)
			pending = false
		case mr.status == mFailed:
			worse(api.RouteDefinitionRepair)
			o.lookupFailed, pending = true, false
		case mr.status == mPending:
			worse(api.RouteSystemLookup)
		default:
			worse(api.RouteSystemLookup)
			pending = false
		}
	}
	if len(missing) > 0 {
		o.pending = pending && o.route != api.RouteDefinitionRepair
		o.note = "waits for " + strings.Join(missing, ", ")
		o.refs = nil
		return o
	}
	overBudget := exprOutcome{route: api.RouteDefinitionRepair, note: noteOverBudget, overBudget: true}
	if r.overBudget {
		return overBudget
	}
	ev := r.e.evaluator.Evaluate(r.ctx, ast, EvalInput{Args: values, Measured: r.measuredValues(),
		Principal: r.req.Principal, Now: r.now})
	if r.evalCost += ev.Cost; r.evalCost > r.e.budget || r.evalCost < ev.Cost {
		// Past the budget (or wrapped around): the expression that crossed does not count
		// either, whatever it yielded, so that where the budget ends decides nothing but a
		// refusal.
		r.overBudget, r.policyOverBudget = true, !fromRequest
		return overBudget
	}
	switch {
	case ev.Err != nil:
		return exprOutcome{route: api.RouteDefinitionRepair, note: "evaluation failed: " + ev.Err.Error()}
	case !ev.Known:
		// The evaluator saw a missing input the declared reads do not list.
		return exprOutcome{route: api.RouteDefinitionRepair, note: "evaluator could not decide: missing " + strings.Join(ev.Missing, ", ")}
	}
	o.known, o.met, o.source = true, ev.Met, api.SourceEvaluation
	if len(reads.Measured) > 0 || ev.ReadMeasured {
		o.source = api.SourceMeasuredData
	}
	return o
}

// applyExpr writes an expression's outcome on its slot; a false one is unmet.
func (r *run) applyExpr(s *api.Slot, o exprOutcome) {
	s.Measurements = o.refs
	if o.known {
		s.Status, s.Met = api.StatusKnown, ptr(o.met)
		s.Source, s.OriginSource = ptr(o.source), ptr(o.source)
		if !o.met {
			r.rec.Unmet = append(r.rec.Unmet, api.Unmet{SlotID: s.SlotID, Reason: api.UnmetProhibited})
		}
		return
	}
	s.Route, s.LookupFailed, s.Note, s.PendingAtTrigger = ptr(o.route), o.lookupFailed, o.note, o.pending
}

// checkResult is a checklist item's entry in the record.
func (p *slotPlan) checkResult() api.CheckResult {
	s := p.slot
	return api.CheckResult{ItemID: s.SlotID, Kind: p.check, Status: s.Status, Source: s.Source, Route: s.Route,
		Met: s.Met, Inputs: s.Inputs, LookupFailed: s.LookupFailed, Value: s.Value, Shown: s.Shown, ApprovedBy: s.ApprovedBy,
		AskCeilingReached: s.AskCeilingReached, Asks: s.Asks, Measurements: s.Measurements, Note: s.Note}
}

// exprCache compiles the expressions that arrive with requests, once per distinct text.
type exprCache struct {
	once sync.Once
	c    *policy.Compiler
	err  error

	mu sync.Mutex
	m  map[string]compiledExpr
}

type compiledExpr struct {
	ast   *cel.Ast
	reads policy.Reads
	err   error
}

// maxCachedExprs bounds the cache. Its entries are at most policy.MaxExprBytes of text each,
// since the compiler refuses longer ones: the cache holds a few megabytes at most.
const maxCachedExprs = 1024

func (x *exprCache) compile(expr string) compiledExpr {
	x.once.Do(func() { x.c, x.err = policy.NewCompiler() })
	if x.err != nil {
		return compiledExpr{err: x.err}
	}
	if len(expr) > policy.MaxExprBytes {
		// Refused unread, and not kept: the text may be as large as a request body.
		var c compiledExpr
		c.ast, c.reads, c.err = x.c.Compile(expr)
		return c
	}
	x.mu.Lock()
	c, ok := x.m[expr]
	x.mu.Unlock()
	if ok {
		return c
	}
	c.ast, c.reads, c.err = x.c.Compile(expr)
	x.mu.Lock()
	if x.m == nil || len(x.m) >= maxCachedExprs {
		x.m = map[string]compiledExpr{}
	}
	x.m[expr] = c
	x.mu.Unlock()
	return c
}
