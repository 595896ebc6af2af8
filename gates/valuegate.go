package gates

import (
	"fmt"
	"slices"
	"sort"

	"github.com/verdictgate/verdict/api"

	"github.com/verdictgate/verdict/policy"
)

// resolution is where the cascade got for one argument name.
type resolution struct {
	known        bool
	value        any
	source       api.Source
	origin       api.Source
	rejected     []api.Rejected
	proposed     bool // a candidate without a location
	lookupFailed bool
	offered      *api.Offer
	draft        *draft // a drafted field's proposal, reviewed or not
	measuredBy   *api.MeasurementRef
	note         string
}

type answer struct {
	value  any
	origin api.Source
}

type approvalAnswer struct {
	questionID string
	approved   bool
	value      any
}

// readAnswers checks every user answer against the question it names. Answers to unknown or
// foreign questions count for nothing and are recorded.
func (r *run) readAnswers() error {
	if len(r.req.UserAnswers) == 0 {
		// Nothing to read: the nil maps read as empty, and nothing is written to them.
		return nil
	}
	r.answers = map[string]answer{}
	r.approved = map[string]approvalAnswer{}
	reject := func(a api.Answer, slot, reason string) {
		r.rec.RejectedAnswers = append(r.rec.RejectedAnswers, api.RejectedAns{QuestionID: a.QuestionID, SlotID: slot, Reason: reason})
	}
	for _, a := range r.req.UserAnswers {
		b, ok, err := r.state.Question(r.ctx, a.QuestionID)
		if err != nil {
			return fmt.Errorf("gates: load question: %w", err)
		}
		if !ok {
			reject(a, "", api.AnswerUnknownQuestion)
			continue
		}
		if b.Principal != r.req.Principal || b.ActionKey != r.actionKey {
			reject(a, b.SlotID, api.AnswerStaleQuestion)
			continue
		}
		approvedTrue := a.Approved != nil && *a.Approved
		switch b.Kind {
		case api.QuestionValue:
			if !a.Value.Set {
				reject(a, b.SlotID, api.AnswerSchemaMismatch)
				continue
			}
			if b.Origin == api.SourcePriorState && approvedTrue {
				// Confirming the offered executed value: it now counts as the user's answer,
				// and its first source is kept.
				if !sameJSON(a.Value.V, b.Value) {
					reject(a, b.SlotID, api.AnswerApprovalValueMismatch)
					continue
				}
				r.answers[b.SlotID] = answer{value: a.Value.V, origin: api.SourcePriorState}
				continue
			}
			if p := r.def.props[b.SlotID]; p != nil && p.validator != nil {
				if err := p.validator.Validate(a.Value.V); err != nil {
					reject(a, b.SlotID, api.AnswerSchemaMismatch)
					continue
				}
			}
			r.answers[b.SlotID] = answer{value: a.Value.V, origin: api.SourceUserAnswer}
		case api.QuestionApproval:
			if approvedTrue && !sameJSON(a.Value.V, b.Value) {
				// An approval is of what its question showed: echoing another value, even the
				// call's current one, approves something the user was never asked about.
				reject(a, b.SlotID, api.AnswerApprovalValueMismatch)
				continue
			}
			r.approved[b.SlotID] = approvalAnswer{questionID: a.QuestionID, approved: approvedTrue, value: a.Value.V}
		case api.QuestionReviewDraft:
			rv, why := r.readReview(a, b)
			if why != "" {
				reject(a, b.SlotID, why)
				continue
			}
			if r.reviewed == nil {
				r.reviewed = map[string]reviewAnswer{}
			}
			r.reviewed[b.SlotID] = rv
		case api.QuestionBranch:
			chosen, ok := stringList(a.Value.V)
			if !ok || !slices.ContainsFunc(b.Options, func(o []string) bool { return slices.Equal(o, chosen) }) {
				reject(a, b.SlotID, api.AnswerSchemaMismatch)
				continue
			}
			r.chosen = chosen
		default:
			// A restatement is not a value: the caller sends a new request instead.
			reject(a, b.SlotID, api.AnswerStaleQuestion)
		}
	}
	return nil
}

// field is the policy rule for an argument; a nil rule allows every value source.
func (r *run) field(name string) *policy.Field {
	f := r.ptool.Field(name)
	if r.def.requiredLabel[name] {
		// [Required] must be matched against a source: user approval alone does not satisfy it.
		out := &policy.Field{}
		for _, s := range r.allowedSources(f) {
			if s != api.SourceUserAnswer {
				out.AllowedSources = append(out.AllowedSources, s)
			}
		}
		if f != nil {
			out.Confirm = f.Confirm
		}
		return out
	}
	return f
}

func (r *run) allowedSources(f *policy.Field) []api.Source {
	if f == nil || f.AllowedSources == nil {
		if r.cascade == nil {
			r.cascade = policy.Cascade()
		}
		return r.cascade
	}
	return f.AllowedSources
}

// candidateIndex lists the candidates of each field in request order, without a slice per
// field: first holds a field's first candidate, next the one after each candidate (-1 after
// the last).
type candidateIndex struct {
	first map[string]int
	next  []int
}

func newCandidateIndex(cs []api.Candidate) candidateIndex {
	x := candidateIndex{first: make(map[string]int, len(cs)), next: make([]int, len(cs))}
	for i := len(cs) - 1; i >= 0; i-- {
		x.next[i] = -1
		if j, ok := x.first[cs[i].Field]; ok {
			x.next[i] = j
		}
		x.first[cs[i].Field] = i
	}
	return x
}

// probe walks the sources that need no I/O (user answer, instruction, pre-set data) for one
// name. Measurements and prior state are consulted only for slots, after materialization.
func (r *run) probe(name string, res *resolution) {
	if r.ptool.IsDrafted(name) {
		r.probeDraft(name, res)
		return
	}
	f := r.field(name)
	if f.Allows(api.SourceUserAnswer) {
		if a, ok := r.answers[name]; ok {
			res.known, res.value, res.source, res.origin = true, a.value, api.SourceUserAnswer, a.origin
		}
	}
	rule := groundRule{}
	if p := r.def.props[name]; p != nil {
		rule = p.rule
	}
	// Located candidates that ground: the first one's value, and whether all agree with it.
	var grounded any
	nGrounded, agree := 0, true
	i, ok := r.candidates.first[name]
	for ; ok && i >= 0; i = r.candidates.next[i] {
		c := &r.req.Candidates[i]
		if !c.Located() {
			res.proposed = true
			continue
		}
		if !f.Allows(api.SourceInstruction) {
			continue
		}
		if reason := ground(r.spans, *c.Segment, *c.Span, c.Value, rule); reason != "" {
			res.rejected = append(res.rejected, api.Rejected{Segment: *c.Segment, Span: *c.Span, Value: c.Value, Reason: reason})
			continue
		}
		if nGrounded == 0 {
			grounded = c.Value
		} else {
			agree = agree && sameJSON(c.Value, grounded)
		}
		nGrounded++
	}
	if res.known {
		return
	}
	if nGrounded > 0 {
		if agree {
			res.known, res.value, res.source, res.origin = true, grounded, api.SourceInstruction, api.SourceInstruction
			return
		}
		res.note = "located candidates disagree"
	}
	if f.Allows(api.SourcePreSetData) {
		if p, ok := r.req.PreSetData[name]; ok && p.Trust == TrustUser {
			res.known, res.value, res.source, res.origin = true, p.Value.V, api.SourcePreSetData, api.SourcePreSetData
		}
	}
}

// finish settles a slot the cheap sources left unknown from this run's measurement, or offers
// an executed prior-state value for confirmation.
func (r *run) finish(name string, res *resolution) error {
	if res.known || r.ptool.IsDrafted(name) {
		// A drafted field is never measured nor offered from last time: only its review settles it.
		return nil
	}
	f := r.field(name)
	if r.measurement(name) != nil && f.Allows(api.SourceMeasuredData) {
		if mr := r.mres[name]; mr != nil {
			switch mr.status {
			case mDone:
				res.known, res.value, res.source, res.origin = true, mr.value, api.SourceMeasuredData, api.SourceMeasuredData
				res.measuredBy = &mr.ref
				return nil
			case mFailed:
				// A failed lookup ends the cascade: it is repaired, not worked around.
				res.lookupFailed, res.note = true, mr.note
				return nil
			default:
				res.note = mr.note
			}
		}
	}
	if f.Allows(api.SourcePriorState) && f.Allows(api.SourceUserAnswer) {
		v, ok, err := r.state.PriorValue(r.ctx, r.actionKey, name)
		if err != nil {
			return fmt.Errorf("gates: prior state: %w", err)
		}
		if ok {
			// Never settles alone: offered to the user, who confirms or replaces it.
			res.offered = &api.Offer{Value: v, Source: api.SourcePriorState}
		}
	}
	return nil
}

func (r *run) measurement(name string) *policy.Measurement {
	if r.ptool == nil {
		return nil
	}
	return r.ptool.Measurements[name]
}

func (r *run) knownValue(name string) (any, bool) {
	res := r.resolved[name]
	if res == nil || !res.known {
		return nil, false
	}
	return res.value, true
}

// route derives the single route of an unknown value slot from its allowed sources.
func (r *run) route(name string, res *resolution) string {
	f := r.field(name)
	switch {
	case res.lookupFailed:
		return api.RouteDefinitionRepair
	case r.ptool.IsDrafted(name) || f.Allows(api.SourceUserAnswer):
		return api.RouteAskUser
	case f.Allows(api.SourceMeasuredData) && r.measurement(name) != nil:
		return api.RouteSystemLookup
	}
	// No allowed source that can still answer: the definition must change.
	return api.RouteDefinitionRepair
}

// slotPlan is one slot being built, with what is needed to ask about it.
type slotPlan struct {
	slot    api.Slot
	askable bool
	// uncounted: asking it spends nothing of its ask ceiling (an approval only the console
	// gives, which waits on its pending approval's timeout instead).
	uncounted bool
	question  api.Question
	binding   QuestionBinding
	check     string // the item kind when this is a user-checklist item, not a slot

	// Storage the slot's pointer fields may point at, so that a settled slot costs one
	// allocation instead of four. Nothing writes through those pointers.
	source, origin api.Source
	met            bool
}

// valueGate settles the slots of a run that passed Gate 1 on a usable definition and decides
// its outcome. Each step reads what the steps before it settled:
//
//   - probeNames lists the names the run may have to settle (collectNames) and walks, for each,
//     the sources that need no I/O;
//   - the shape, materialized against those values, says which names are required, or that
//     the user must first choose a branch (branchRecord);
//   - planSlots makes the slot set, and what its slots and expressions need is measured;
//   - valuePlans finishes each slot's cascade and builds its record, and checkValues holds
//     every settled value that cannot be called with;
//   - approvals adds the approvals bound to those values, expressions the provider conditions
//     and the user checklist over them;
//   - conclude counts what is open (tallyPlans), decides the outcome (tally.outcome) and asks
//     what the user can settle.
func (r *run) valueGate() error {
	if err := r.readAnswers(); err != nil {
		return err
	}
	// The steps fill storage made here rather than their own: made in a step and returned from
	// it, every piece would be an allocation, where made here a small one stays on the stack.
	nInCall := len(r.req.Candidates) + len(r.answers)
	names := r.probeNames(callNames{
		all:      make([]string, 0, len(r.def.names)+nInCall),
		inCall:   make([]string, 0, nInCall),
		isInCall: make(map[string]bool, nInCall),
	})
	sel := r.def.shape.materialize(r.knownValue, names.isInCall, r.chosen)
	if sel.gateKind != "" {
		return r.branchRecord(sel)
	}
	slots := planSlots(slotSet{
		names:  make([]string, 0, len(names.all)),
		isSlot: make([]bool, len(names.all)),
		rank:   make(map[string]int, len(sel.required)+len(r.def.labels.Required)),
	}, sel, r.def.labels.Required, r.conditions(), names)
	// The user checklist is read before anything is measured: at trigger time its expressions
	// may read measurements, and only what some slot or expression needs is fetched.
	r.readChecklist()
	r.measure(r.wantedMeasurements(slots.names, r.exprReads()))

	plans, err := r.valuePlans(make([]*slotPlan, 0, len(slots.names)), slots)
	if err != nil {
		return err
	}
	r.rec.ExtraFields = appendExtraFields([]api.ExtraField{}, names, slots, r.resolved, r.def.props)
	args, complete := r.arguments(plans)
	wholeValid := r.checkValues(plans, args, complete)
	if plans, err = r.approvals(plans, args, complete); err != nil {
		return err
	}
	if plans, err = r.expressions(plans, args, complete); err != nil {
		return err
	}
	return r.conclude(plans, args, wholeValid)
}

// probeNames lists the names the run may have to settle into names (collectNames) and walks,
// for each, the sources that need no I/O (probe). Measurements and prior state wait until the
// slot set says which names need them. It leaves each name's resolution in r.resolved.
func (r *run) probeNames(names callNames) callNames {
	names, resolved := collectNames(names, r.def.names, r.def.labels.Required, r.conditions(), r.req.Candidates, r.answers)
	// The candidates indexed by field, so that each name's cascade reads only its own.
	r.candidates = newCandidateIndex(r.req.Candidates)
	resolutions := make([]resolution, len(names.all))
	for i, n := range names.all {
		r.probe(n, &resolutions[i])
		resolved[n] = &resolutions[i]
	}
	r.resolved = resolved
	return names
}

// conditions are the tool's provider conditions.
func (r *run) conditions() []*policy.Condition {
	if r.ptool == nil {
		return nil
	}
	return r.ptool.Conditions
}

// exprReads is what the run's expressions read, so that it can be measured first: every
// provider condition that compiled, and at trigger time every checklist item that did (at
// instruction time the checklist is not evaluated).
func (r *run) exprReads() []policy.Reads {
	var exprs []policy.Reads
	for _, c := range r.conditions() {
		if c.CompileErr == nil {
			exprs = append(exprs, c.Reads)
		}
	}
	if r.phase == api.PhaseAtTrigger {
		for _, it := range r.checks {
			if it.ast != nil {
				exprs = append(exprs, it.reads)
			}
		}
	}
	return exprs
}

// valuePlans finishes the cascade of each slot of ss (finish) and appends its record to plans,
// in the slot set's order. A slot the user can settle is checked against its ask ceiling.
func (r *run) valuePlans(plans []*slotPlan, ss slotSet) ([]*slotPlan, error) {
	for _, n := range ss.names {
		res := r.resolved[n]
		if err := r.finish(n, res); err != nil {
			return nil, err
		}
		p := r.valueSlot(n, res, ss.required(n))
		if p.slot.Route != nil && *p.slot.Route == api.RouteAskUser {
			if err := r.planAsk(p); err != nil {
				return nil, err
			}
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// expressions adds the provider conditions and the user checklist, evaluated over the call as
// it stands.
func (r *run) expressions(plans []*slotPlan, args map[string]any, complete bool) ([]*slotPlan, error) {
	// Only conditions and checklist items read the expression inputs; without either, the copy
	// is not made.
	var values map[string]any
	if len(r.conditions()) > 0 || len(r.checks) > 0 {
		values = r.evalArgs(plans, args)
	}
	plans = append(plans, r.conditionSlots(values, plans)...)
	checks, err := r.checklist(values, plans, args, complete)
	if err != nil {
		return nil, err
	}
	return append(plans, checks...), nil
}

// conclude counts what the plans leave open, decides the outcome (tally.outcome), and asks
// what the user can settle; it writes the slots and checklist results on the record.
func (r *run) conclude(plans []*slotPlan, args map[string]any, wholeValid bool) error {
	t, ceiling := tallyPlans(plans, r.phase == api.PhaseAtInstruction, r.rec.AskCeiling)
	r.rec.AskCeiling = ceiling
	r.backing.unknown = t.unknown
	r.rec.UnknownCount = &r.backing.unknown
	// The whole payload is validated only when every value is settled.
	if t.unknown == 0 && len(r.rec.Unmet) == 0 && !wholeValid {
		r.checkPayload(args)
	}
	t.unmet = len(r.rec.Unmet) > 0
	r.rec.Gate = api.Gate{Kind: valueGateKind(r.rec.Unmet)}
	r.rec.Outcome = t.outcome()
	if r.refusal != "" {
		// The console approval of exactly this call was denied or has expired: nothing runs,
		// nothing more is asked.
		r.rec.Outcome = api.OutcomeRefuse
	}
	switch r.rec.Outcome {
	case api.OutcomeDeferred:
		r.rec.Deferred = &api.DeferredIntent{Instruction: r.req.Instruction, Intent: r.req.Intent,
			Candidates: r.req.Candidates, UserAnswers: nonNil(r.req.UserAnswers), UserChecklist: nonNil(r.req.UserChecklist)}
	case api.OutcomeVerdictIssued:
		d, err := digestArgs(args)
		if err != nil {
			return err
		}
		r.rec.CallArguments = args
		r.backing.argsDigest = d
		r.rec.ArgumentsDigest = &r.backing.argsDigest
	case api.OutcomeAskUser, api.OutcomeSystemLookup:
		// Questions go out whenever the user can move the run forward: with ask_user, and
		// with system_lookup too, since a lookup waiting on an argument only the user can give
		// would otherwise wait forever. Nothing is asked on hold, definition repair or
		// exhaustion.
		if err := r.askAll(plans); err != nil {
			return err
		}
	}
	r.concludeConsole(openApproval(plans), args, r.callDigest)
	r.rec.UserChecklist = []api.CheckResult{}
	r.rec.Slots = make([]api.Slot, 0, len(plans))
	for _, p := range plans {
		if p.check != "" {
			r.rec.UserChecklist = append(r.rec.UserChecklist, p.checkResult())
		} else {
			r.rec.Slots = append(r.rec.Slots, p.slot)
		}
	}
	return nil
}

// askAll asks every question that may still be asked, counting each against its slot's
// ceiling.
func (r *run) askAll(plans []*slotPlan) error {
	for _, p := range plans {
		if !p.askable {
			continue
		}
		if err := r.ask(p.question, p.binding); err != nil {
			return err
		}
		if p.uncounted {
			continue
		}
		n := p.slot.Asks + 1
		if err := r.state.SetSlotAsks(r.ctx, r.conv, r.actionKey, p.slot.SlotID, n); err != nil {
			return fmt.Errorf("gates: ask counters: %w", err)
		}
		p.slot.Asks = n
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// valueSlot builds the record of one value slot from where its cascade got. A slot the user
// can settle carries the question that would settle it; whether it may still be asked is
// planAsk's to say. A slot a lookup confirmed null is settled: checkValues holds it.
func (r *run) valueSlot(name string, res *resolution, required bool) *slotPlan {
	f := r.field(name)
	s := api.Slot{
		SlotID:             name,
		Kind:               api.KindValue,
		Status:             api.StatusUnknown,
		AllowedSources:     r.allowedSources(f),
		ResolvedAt:         r.stampStr,
		Proposed:           res.proposed,
		Required:           required,
		RejectedCandidates: res.rejected,
		LookupFailed:       res.lookupFailed,
		PendingAtTrigger:   r.pending(name) && !res.lookupFailed,
		Note:               res.note,
	}
	p := &slotPlan{}
	if res.measuredBy != nil {
		s.Measurements = []api.MeasurementRef{*res.measuredBy}
		s.ResolvedAt = res.measuredBy.At
	}
	if r.ptool.IsDrafted(name) {
		s.AllowedSources = draftedSources[:]
		if res.draft != nil {
			s.Draft = &res.draft.ref
			if res.draft.concealed > 0 {
				r.rec.Unmet = append(r.rec.Unmet, concealedUnmet(name, res.draft))
			}
		}
	}
	switch {
	case res.known && res.value == nil && res.source == api.SourceMeasuredData:
		// The lookup ran and confirmed nothing is there: settled, and it prohibits.
		s.Status, s.Met, s.Note = api.StatusNull, ptr(false), ""
		s.Source, s.OriginSource = ptr(res.source), ptr(res.origin)
	case res.known:
		s.Status, s.Value, s.Note = api.StatusKnown, res.value, ""
		p.source, p.origin, p.met = res.source, res.origin, true
		s.Source, s.OriginSource, s.Met = &p.source, &p.origin, &p.met
	default:
		s.Route = ptr(r.route(name, res))
		if *s.Route == api.RouteDefinitionRepair {
			// A definition gap is never excused until the trigger.
			s.PendingAtTrigger = false
		}
		s.Offered = res.offered
		if *s.Route == api.RouteAskUser {
			schema := []byte(`{}`)
			if pr := r.def.props[name]; pr != nil {
				schema = pr.schema
			}
			p.question = api.Question{SlotID: name, Kind: api.QuestionValue, Schema: schema,
				Message: r.safeMessage(askValue(f, r.def.props[name], name))}
			p.binding = QuestionBinding{ActionKey: r.actionKey}
			if res.draft != nil && res.draft.concealed == 0 {
				r.reviewQuestion(p, name, res.draft)
			}
			if res.offered != nil {
				p.question.Value = res.offered.Value
				p.question.Message = r.safeMessage(askPrior(f, r.def.props[name], name))
				p.binding.Value, p.binding.Origin = res.offered.Value, api.SourcePriorState
			}
		}
	}
	p.slot = s
	return p
}

// planAsk applies the per-slot ask ceiling to a slot the user can settle: it may be asked
// until it was asked api.ValueAskLimit times in the conversation.
func (r *run) planAsk(p *slotPlan) error {
	n, err := r.state.SlotAsks(r.ctx, r.conv, r.actionKey, p.slot.SlotID)
	if err != nil {
		return fmt.Errorf("gates: ask counters: %w", err)
	}
	p.slot.Asks = n
	if n >= api.ValueAskLimit {
		p.slot.AskCeilingReached = true
		return nil
	}
	p.askable = true
	return nil
}

// checkValues holds every settled value that cannot be called with: a slot a lookup confirmed
// null, and a known value that violates its own property schema (settled, but unmet).
// When the call is complete and valid as a whole, every property schema held, so the
// per-field checks are skipped. It reports whether the complete call validated.
func (r *run) checkValues(plans []*slotPlan, args map[string]any, complete bool) bool {
	for _, p := range plans {
		if p.slot.Kind == api.KindValue && p.slot.Status == api.StatusNull {
			r.rec.Unmet = append(r.rec.Unmet, api.Unmet{SlotID: p.slot.SlotID, Reason: api.UnmetRequiredNull, Detail: "the measurement found no value"})
		}
	}
	if complete && r.def.whole.Validate(args) == nil {
		return true
	}
	check := func(name string, v any) bool {
		p := r.def.props[name]
		if p == nil || p.validator == nil {
			return true
		}
		if err := p.validator.Validate(v); err != nil {
			detail, _ := validationDetail(err)
			r.rec.Unmet = append(r.rec.Unmet, api.Unmet{SlotID: name, Reason: api.UnmetInvalidValue, Detail: detail})
			return false
		}
		return true
	}
	for _, p := range plans {
		if p.slot.Kind == api.KindValue && p.slot.Status == api.StatusKnown && !check(p.slot.SlotID, p.slot.Value) {
			p.slot.Met = ptr(false)
		}
	}
	for _, x := range r.rec.ExtraFields {
		check(x.Field, x.Value)
	}
	return false
}

// checkPayload validates the assembled call as a whole and holds a violation: on the argument
// it points at, else on the payload.
func (r *run) checkPayload(args map[string]any) {
	err := r.def.whole.Validate(args)
	if err == nil {
		return
	}
	detail, loc := validationDetail(err)
	u := api.Unmet{SlotID: api.PayloadSlotID, Reason: api.UnmetInvalidPayload, Detail: detail}
	if len(loc) > 0 {
		u = api.Unmet{SlotID: loc[0], Reason: api.UnmetInvalidValue, Detail: detail}
	}
	r.rec.Unmet = append(r.rec.Unmet, u)
}

// arguments assembles the call from known values only: value slots and extra fields.
func (r *run) arguments(plans []*slotPlan) (map[string]any, bool) {
	args := make(map[string]any, len(plans)+len(r.rec.ExtraFields))
	complete := true
	for _, p := range plans {
		if p.slot.Kind != api.KindValue {
			continue
		}
		if p.slot.Status != api.StatusKnown {
			complete = false
			continue
		}
		args[p.slot.SlotID] = p.slot.Value
	}
	for _, x := range r.rec.ExtraFields {
		args[x.Field] = x.Value
	}
	return args, complete
}

// branchRecord ends the run on a branch that known values do not decide: the user is asked to
// choose one, until that question's asks are spent.
func (r *run) branchRecord(sel selection) error {
	r.rec.ExtraFields = []api.ExtraField{}
	for n, res := range r.resolved {
		if res.known {
			r.rec.ExtraFields = append(r.rec.ExtraFields, api.ExtraField{Field: n, Value: res.value, Source: res.source})
		}
	}
	sort.Slice(r.rec.ExtraFields, func(i, j int) bool { return r.rec.ExtraFields[i].Field < r.rec.ExtraFields[j].Field })
	msg := msgBranchUnresolve
	if sel.gateKind == api.GateBranchConflict {
		msg = msgBranchConflict
	}
	r.rec.Gate = api.Gate{Kind: sel.gateKind, UserMessage: msg, BranchOptions: sel.options}
	if sel.matched != nil {
		r.rec.Gate.Diag = map[string]any{"matched": sel.matched}
	}
	n, err := r.state.SlotAsks(r.ctx, r.conv, r.actionKey, api.BranchSlotID)
	if err != nil {
		return fmt.Errorf("gates: ask counters: %w", err)
	}
	if r.rec.Outcome = askOutcome(n >= api.ValueAskLimit); r.rec.Outcome == api.OutcomeExhausted {
		r.rec.AskCeiling = append(r.rec.AskCeiling, api.BranchSlotID)
		return nil
	}
	if err := r.ask(api.Question{SlotID: api.BranchSlotID, Kind: api.QuestionBranch, Message: msg, Options: sel.options},
		QuestionBinding{ActionKey: r.actionKey, Options: sel.options}); err != nil {
		return err
	}
	if err := r.state.SetSlotAsks(r.ctx, r.conv, r.actionKey, api.BranchSlotID, n+1); err != nil {
		return fmt.Errorf("gates: ask counters: %w", err)
	}
	return nil
}
