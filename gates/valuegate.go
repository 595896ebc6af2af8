package gates

import (
	"fmt"
	"slices"
	"sort"

	"github.com/verdictgate/verdict/policy"
)

// resolution is where the cascade got for one argument name.
type resolution struct {
	known        bool
	value        any
	source       policy.Source
	origin       policy.Source
	rejected     []Rejected
	proposed     bool // a candidate without a location
	lookupFailed bool
	offered      *Offer
	measuredBy   *MeasurementRef
	note         string
}

type answer struct {
	value  any
	origin policy.Source
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
	reject := func(a Answer, slot, reason string) {
		r.rec.RejectedAnswers = append(r.rec.RejectedAnswers, RejectedAns{QuestionID: a.QuestionID, SlotID: slot, Reason: reason})
	}
	for _, a := range r.req.UserAnswers {
		b, ok, err := r.state.Question(r.ctx, a.QuestionID)
		if err != nil {
			return fmt.Errorf("gates: load question: %w", err)
		}
		if !ok {
			reject(a, "", AnswerUnknownQuestion)
			continue
		}
		if b.Principal != r.req.Principal || b.ActionKey != r.actionKey {
			reject(a, b.SlotID, AnswerStaleQuestion)
			continue
		}
		approvedTrue := a.Approved != nil && *a.Approved
		switch b.Kind {
		case QuestionValue:
			if !a.Value.Set {
				reject(a, b.SlotID, AnswerSchemaMismatch)
				continue
			}
			if b.Origin == policy.PriorState && approvedTrue {
				// Confirming the offered executed value: it now counts as the user's answer,
				// and its first source is kept.
				if !sameJSON(a.Value.V, b.Value) {
					reject(a, b.SlotID, AnswerApprovalValueMismatch)
					continue
				}
				r.answers[b.SlotID] = answer{value: a.Value.V, origin: policy.PriorState}
				continue
			}
			if p := r.def.props[b.SlotID]; p != nil && p.validator != nil {
				if err := p.validator.Validate(a.Value.V); err != nil {
					reject(a, b.SlotID, AnswerSchemaMismatch)
					continue
				}
			}
			r.answers[b.SlotID] = answer{value: a.Value.V, origin: policy.UserAnswer}
		case QuestionApproval:
			r.approved[b.SlotID] = approvalAnswer{questionID: a.QuestionID, approved: approvedTrue, value: a.Value.V}
		case QuestionBranch:
			names, ok := a.Value.V.([]any)
			var chosen []string
			for _, n := range names {
				if s, isStr := n.(string); isStr {
					chosen = append(chosen, s)
				}
			}
			valid := ok && len(chosen) == len(names)
			if valid {
				valid = false
				for _, o := range b.Options {
					if slices.Equal(o, chosen) {
						valid = true
					}
				}
			}
			if !valid {
				reject(a, b.SlotID, AnswerSchemaMismatch)
				continue
			}
			r.chosen = chosen
		default:
			// A restatement is not a value: the caller sends a new request instead.
			reject(a, b.SlotID, AnswerStaleQuestion)
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
			if s != policy.UserAnswer {
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

func (r *run) allowedSources(f *policy.Field) []policy.Source {
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

func newCandidateIndex(cs []Candidate) candidateIndex {
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
	f := r.field(name)
	if f.Allows(policy.UserAnswer) {
		if a, ok := r.answers[name]; ok {
			res.known, res.value, res.source, res.origin = true, a.value, policy.UserAnswer, a.origin
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
		if !f.Allows(policy.Instruction) {
			continue
		}
		if reason := ground(r.spans, *c.Segment, *c.Span, c.Value, rule); reason != "" {
			res.rejected = append(res.rejected, Rejected{Segment: *c.Segment, Span: *c.Span, Value: c.Value, Reason: reason})
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
			res.known, res.value, res.source, res.origin = true, grounded, policy.Instruction, policy.Instruction
			return
		}
		res.note = "located candidates disagree"
	}
	if f.Allows(policy.PreSetData) {
		if p, ok := r.req.PreSetData[name]; ok && p.Trust == TrustUser {
			res.known, res.value, res.source, res.origin = true, p.Value.V, policy.PreSetData, policy.PreSetData
		}
	}
}

// finish settles a slot the cheap sources left unknown from this run's measurement, or offers
// an executed prior-state value for confirmation.
func (r *run) finish(name string, res *resolution) error {
	if res.known {
		return nil
	}
	f := r.field(name)
	if r.measurement(name) != nil && f.Allows(policy.MeasuredData) {
		if mr := r.mres[name]; mr != nil {
			switch mr.status {
			case mDone:
				res.known, res.value, res.source, res.origin = true, mr.value, policy.MeasuredData, policy.MeasuredData
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
	if f.Allows(policy.PriorState) && f.Allows(policy.UserAnswer) {
		v, ok, err := r.state.PriorValue(r.ctx, r.actionKey, name)
		if err != nil {
			return fmt.Errorf("gates: prior state: %w", err)
		}
		if ok {
			// Never settles alone: offered to the user, who confirms or replaces it.
			res.offered = &Offer{Value: v, Source: policy.PriorState}
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

// isCondition reports whether name is one of the tool's provider conditions.
func (r *run) isCondition(name string) bool {
	if r.ptool == nil {
		return false
	}
	for _, c := range r.ptool.Conditions {
		if c.ID == name {
			return true
		}
	}
	return false
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
		return RouteDefinitionRepair
	case f.Allows(policy.UserAnswer):
		return RouteAskUser
	case f.Allows(policy.MeasuredData) && r.measurement(name) != nil:
		return RouteSystemLookup
	}
	// No allowed source that can still answer: the definition must change.
	return RouteDefinitionRepair
}

// slotPlan is one slot being built, with what is needed to ask about it.
type slotPlan struct {
	slot     Slot
	askable  bool
	question Question
	binding  QuestionBinding
	check    string // the item kind when this is a user-checklist item, not a slot

	// Storage the slot's pointer fields may point at, so that a settled slot costs one
	// allocation instead of four. Nothing writes through those pointers.
	source, origin policy.Source
	met            bool
}

func (r *run) valueGate() error {
	if err := r.readAnswers(); err != nil {
		return err
	}
	// Every name that could matter: declared properties, every name the shape can require,
	// [Required] labels, proposed and answered names.
	width := len(r.def.names) + len(r.req.Candidates) + len(r.answers)
	names := make([]string, 0, width)
	// r.resolved doubles as the set of names seen: each name's entry is filled in once every
	// name is known and its resolution has a place. It is sized for the declared names, which
	// are usually all there is (candidates name declared properties): a map of up to eight
	// is one small allocation, a larger hint several.
	r.resolved = make(map[string]*resolution, len(r.def.names))
	add := func(n string) {
		if _, seen := r.resolved[n]; !seen {
			r.resolved[n] = nil
			names = append(names, n)
		}
	}
	for _, n := range r.def.names {
		add(n)
	}
	for _, n := range r.def.labels.Required {
		if !r.isCondition(n) {
			add(n)
		}
	}
	// inCall lists the names of the intended call in first-seen order; r.candidates indexes
	// the candidates by field, so each name's cascade reads only its own.
	var inCall []string
	isInCall := make(map[string]bool, len(r.req.Candidates)+len(r.answers))
	r.candidates = newCandidateIndex(r.req.Candidates)
	for _, c := range r.req.Candidates {
		add(c.Field)
		if !isInCall[c.Field] {
			isInCall[c.Field] = true
			inCall = append(inCall, c.Field)
		}
	}
	answered := make([]string, 0, len(r.answers))
	for n := range r.answers {
		answered = append(answered, n)
	}
	sort.Strings(answered)
	for _, n := range answered {
		add(n)
		if !isInCall[n] {
			isInCall[n] = true
			inCall = append(inCall, n)
		}
	}
	resolutions := make([]resolution, len(names))
	for i, n := range names {
		r.probe(n, &resolutions[i])
		r.resolved[n] = &resolutions[i]
	}

	sel := r.def.shape.materialize(r.knownValue, inCall, r.chosen)
	if sel.gateKind != "" {
		return r.branchRecord(sel)
	}

	// The slot set: required names, [Required] labels, then everything proposed or answered.
	var slotNames []string
	// order holds every required name with its rank: its first place among the names the
	// selection requires, or len(sel.required) for a name only a [Required] label requires.
	order := make(map[string]int, len(sel.required)+len(r.def.labels.Required))
	for i, n := range sel.required {
		if _, dup := order[n]; !dup {
			order[n] = i
		}
	}
	for _, n := range r.def.labels.Required {
		if _, dup := order[n]; !dup && !r.isCondition(n) {
			order[n] = len(sel.required)
		}
	}
	isRequired := func(n string) bool {
		_, ok := order[n]
		return ok
	}
	isSlot := make([]bool, len(names))
	for i, n := range names {
		if isRequired(n) || isInCall[n] {
			slotNames = append(slotNames, n)
			isSlot[i] = true
		}
	}
	// Required names in their required order, then everything else as first seen.
	rank := func(n string) int {
		if i, ok := order[n]; ok {
			return i
		}
		return len(sel.required)
	}
	slices.SortStableFunc(slotNames, func(a, b string) int { return rank(a) - rank(b) })

	// The user checklist is read before anything is measured: at trigger time its expressions
	// may read measurements, and only what some slot or expression needs is fetched.
	r.readChecklist()
	var exprs []policy.Reads
	if r.ptool != nil {
		for _, c := range r.ptool.Conditions {
			if c.CompileErr == nil {
				exprs = append(exprs, c.Reads)
			}
		}
	}
	if r.phase == PhaseAtTrigger {
		for _, it := range r.checks {
			if it.ast != nil {
				exprs = append(exprs, it.reads)
			}
		}
	}
	r.measure(r.wantedMeasurements(slotNames, exprs))

	r.rec.UserChecklist = []CheckResult{}
	r.rec.ExtraFields = []ExtraField{}
	plans := make([]*slotPlan, 0, len(slotNames))
	for _, n := range slotNames {
		p, err := r.valueSlot(n, isRequired(n))
		if err != nil {
			return err
		}
		plans = append(plans, p)
		if f := r.field(n); f != nil && f.Confirm {
			ap, err := r.confirmSlot(n, p)
			if err != nil {
				return err
			}
			plans = append(plans, ap)
		}
	}
	for i, n := range names {
		if isSlot[i] || r.def.props[n] == nil {
			continue
		}
		if res := r.resolved[n]; res.known {
			r.rec.ExtraFields = append(r.rec.ExtraFields, ExtraField{Field: n, Value: res.value, Source: res.source})
		}
	}
	args, complete := r.arguments(plans)
	wholeValid := r.checkValues(plans, args, complete)
	for _, v := range r.def.labels.Verify {
		p, err := r.verifySlot(v, args, complete)
		if err != nil {
			return err
		}
		plans = append(plans, p)
	}
	// Only conditions and checklist items read the expression inputs; without either, the copy
	// is not made.
	var values map[string]any
	if (r.ptool != nil && len(r.ptool.Conditions) > 0) || len(r.checks) > 0 {
		values = r.evalArgs(plans, args)
	}
	plans = append(plans, r.conditionSlots(values, plans)...)
	checks, err := r.checklist(values, plans, args, complete)
	if err != nil {
		return err
	}
	plans = append(plans, checks...)

	unknown, pendingOnly := 0, true
	var repair, lookup, askable bool
	for _, p := range plans {
		if p.slot.Status != StatusUnknown || p.slot.Route == nil {
			// A checklist item at instruction time is echoed, verified only at the trigger.
			continue
		}
		unknown++
		if !p.slot.PendingAtTrigger {
			pendingOnly = false
		} else if r.phase == PhaseAtInstruction {
			// Excused until the trigger run: it neither blocks scheduling nor picks the outcome.
			continue
		}
		switch *p.slot.Route {
		case RouteDefinitionRepair:
			repair = true
		case RouteSystemLookup:
			lookup = true
		case RouteAskUser:
			askable = askable || p.askable
		}
		if p.slot.AskCeilingReached {
			r.rec.AskCeiling = append(r.rec.AskCeiling, p.slot.SlotID)
		}
	}
	r.backing.unknown = unknown
	r.rec.UnknownCount = &r.backing.unknown

	// The whole payload is validated only when every value is settled.
	if unknown == 0 && len(r.rec.Unmet) == 0 && !wholeValid {
		if err := r.def.whole.Validate(args); err != nil {
			detail, loc := validationDetail(err)
			u := Unmet{SlotID: PayloadSlotID, Reason: UnmetInvalidPayload, Detail: detail}
			if len(loc) > 0 {
				u = Unmet{SlotID: loc[0], Reason: UnmetInvalidValue, Detail: detail}
			}
			r.rec.Unmet = append(r.rec.Unmet, u)
		}
	}

	r.rec.Gate = Gate{Kind: GateValue}
	for _, u := range r.rec.Unmet {
		if u.Reason == UnmetInvalidValue || u.Reason == UnmetInvalidPayload {
			r.rec.Gate.Kind = GatePayloadInvalid
		}
	}
	switch {
	case len(r.rec.Unmet) > 0:
		r.rec.Outcome = OutcomeHold
	case repair:
		r.rec.Outcome = OutcomeDefinitionRepair
	case r.phase == PhaseAtInstruction && (unknown == 0 || pendingOnly):
		r.rec.Outcome = OutcomeDeferred
		r.rec.Deferred = &DeferredIntent{Instruction: r.req.Instruction, Intent: r.req.Intent,
			Candidates: r.req.Candidates, UserAnswers: nonNil(r.req.UserAnswers), UserChecklist: nonNil(r.req.UserChecklist)}
	case unknown == 0:
		r.rec.Outcome = OutcomeVerdictIssued
		d, err := digestArgs(args)
		if err != nil {
			return err
		}
		r.rec.CallArguments = args
		r.backing.argsDigest = d
		r.rec.ArgumentsDigest = &r.backing.argsDigest
	case lookup:
		r.rec.Outcome = OutcomeSystemLookup
	case askable:
		r.rec.Outcome = OutcomeAskUser
	default:
		r.rec.Outcome = OutcomeExhausted
	}
	// Questions go out whenever the user can move the run forward: with ask_user, and with
	// system_lookup too, since a lookup waiting on an argument only the user can give would
	// otherwise wait forever. Nothing is asked on hold, definition repair or exhaustion.
	if r.rec.Outcome == OutcomeAskUser || r.rec.Outcome == OutcomeSystemLookup {
		for _, p := range plans {
			if !p.askable {
				continue
			}
			if err := r.ask(p.question, p.binding); err != nil {
				return err
			}
			n := p.slot.Asks + 1
			if err := r.state.SetSlotAsks(r.ctx, r.conv, r.actionKey, p.slot.SlotID, n); err != nil {
				return fmt.Errorf("gates: ask counters: %w", err)
			}
			p.slot.Asks = n
		}
	}
	r.rec.Slots = make([]Slot, 0, len(plans))
	for _, p := range plans {
		if p.check != "" {
			r.rec.UserChecklist = append(r.rec.UserChecklist, p.checkResult())
		} else {
			r.rec.Slots = append(r.rec.Slots, p.slot)
		}
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// valueSlot builds the record of one value slot.
func (r *run) valueSlot(name string, required bool) (*slotPlan, error) {
	res := r.resolved[name]
	if err := r.finish(name, res); err != nil {
		return nil, err
	}
	f := r.field(name)
	s := Slot{
		SlotID:             name,
		Kind:               KindValue,
		Status:             StatusUnknown,
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
		s.Measurements = []MeasurementRef{*res.measuredBy}
		s.ResolvedAt = res.measuredBy.At
	}
	switch {
	case res.known && res.value == nil && res.source == policy.MeasuredData:
		// The lookup ran and confirmed nothing is there: settled, and it prohibits.
		s.Status, s.Met, s.Note = StatusNull, ptr(false), ""
		s.Source, s.OriginSource = ptr(res.source), ptr(res.origin)
		r.rec.Unmet = append(r.rec.Unmet, Unmet{SlotID: name, Reason: UnmetRequiredNull, Detail: "the measurement found no value"})
		p.slot = s
		return p, nil
	case res.known:
		s.Status, s.Value, s.Note = StatusKnown, res.value, ""
		p.source, p.origin, p.met = res.source, res.origin, true
		s.Source, s.OriginSource, s.Met = &p.source, &p.origin, &p.met
		p.slot = s
		return p, nil
	}
	s.Route = ptr(r.route(name, res))
	if *s.Route == RouteDefinitionRepair {
		// A definition gap is never excused until the trigger.
		s.PendingAtTrigger = false
	}
	s.Offered = res.offered
	if *s.Route == RouteAskUser {
		if err := r.planAsk(p, &s); err != nil {
			return nil, err
		}
		schema := []byte(`{}`)
		if pr := r.def.props[name]; pr != nil {
			schema = pr.schema
		}
		p.question = Question{SlotID: name, Kind: QuestionValue, Schema: schema,
			Message: r.safeMessage(askValue(r.field(name), r.def.props[name], name))}
		p.binding = QuestionBinding{ActionKey: r.actionKey}
		if res.offered != nil {
			p.question.Value = res.offered.Value
			p.question.Message = r.safeMessage(askPrior(r.field(name), r.def.props[name], name))
			p.binding.Value, p.binding.Origin = res.offered.Value, policy.PriorState
		}
	}
	p.slot = s
	return p, nil
}

// planAsk applies the per-slot ask ceiling.
func (r *run) planAsk(p *slotPlan, s *Slot) error {
	n, err := r.state.SlotAsks(r.ctx, r.conv, r.actionKey, s.SlotID)
	if err != nil {
		return fmt.Errorf("gates: ask counters: %w", err)
	}
	s.Asks = n
	if n >= ValueAskLimit {
		s.AskCeilingReached = true
		return nil
	}
	p.askable = true
	return nil
}

// checkValues records every known value that violates its own property schema: settled, but
// unmet. When the call is complete and valid as a whole, every property schema held, so the
// per-field checks are skipped. It reports whether the complete call validated.
func (r *run) checkValues(plans []*slotPlan, args map[string]any, complete bool) bool {
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
			r.rec.Unmet = append(r.rec.Unmet, Unmet{SlotID: name, Reason: UnmetInvalidValue, Detail: detail})
			return false
		}
		return true
	}
	for _, p := range plans {
		if p.slot.Kind == KindValue && p.slot.Status == StatusKnown && !check(p.slot.SlotID, p.slot.Value) {
			p.slot.Met = ptr(false)
		}
	}
	for _, x := range r.rec.ExtraFields {
		check(x.Field, x.Value)
	}
	return false
}

// confirmSlot is the approval of a field's current value ("confirm:<field>").
func (r *run) confirmSlot(field string, vp *slotPlan) (*slotPlan, error) {
	id := approvalSlotPrefix + field
	s := Slot{SlotID: id, Kind: KindApproval, Status: StatusUnknown, Approves: field,
		AllowedSources: []policy.Source{policy.UserAnswer}, ResolvedAt: r.stampStr}
	p := &slotPlan{}
	if vp.slot.Status != StatusKnown {
		s.Route = ptr(RouteAskUser)
		s.Note = "waits for the value it approves"
		p.slot = s
		return p, nil
	}
	shown := map[string]any{field: vp.slot.Value}
	return r.approval(p, s, vp.slot.Value, shown, askConfirm(r.def.props[field], field))
}

// verifySlot is a [Verify] approval over the whole call, bound to its arguments digest.
func (r *run) verifySlot(v policy.VerifyLabel, args map[string]any, complete bool) (*slotPlan, error) {
	s := Slot{SlotID: v.ID, Kind: KindApproval, Status: StatusUnknown, Approves: "$call",
		AllowedSources: []policy.Source{policy.UserAnswer}, ResolvedAt: r.stampStr}
	p := &slotPlan{}
	if !complete {
		s.Route = ptr(RouteAskUser)
		s.Note = "waits for the call it approves"
		p.slot = s
		return p, nil
	}
	d, err := digestArgs(args)
	if err != nil {
		return nil, err
	}
	return r.approval(p, s, d, args, r.safeMessage(v.Text))
}

// approval settles an approval slot from an approval answer bound to exactly the current value,
// or plans to ask for one.
func (r *run) approval(p *slotPlan, s Slot, value, shown any, msg string) (*slotPlan, error) {
	if a, ok := r.approved[s.SlotID]; ok {
		switch {
		case a.approved && sameJSON(a.value, value):
			s.Status, s.Value, s.Shown = StatusKnown, value, shown
			s.Source, s.OriginSource = ptr(policy.UserAnswer), ptr(policy.UserAnswer)
			p.slot = s
			return p, nil
		case a.approved:
			// The value changed since it was approved: the approval no longer counts.
			r.rec.RejectedAnswers = append(r.rec.RejectedAnswers,
				RejectedAns{QuestionID: a.questionID, SlotID: s.SlotID, Reason: AnswerApprovalValueMismatch})
		}
	}
	s.Route = ptr(RouteAskUser)
	if err := r.planAsk(p, &s); err != nil {
		return nil, err
	}
	p.question = Question{SlotID: s.SlotID, Kind: QuestionApproval, Message: msg,
		Schema: []byte(`{"const":true}`), Shown: shown, Value: value}
	p.binding = QuestionBinding{ActionKey: r.actionKey, Value: value, Shown: shown}
	p.slot = s
	return p, nil
}

// arguments assembles the call from known values only: value slots and extra fields.
func (r *run) arguments(plans []*slotPlan) (map[string]any, bool) {
	args := make(map[string]any, len(plans)+len(r.rec.ExtraFields))
	complete := true
	for _, p := range plans {
		if p.slot.Kind != KindValue {
			continue
		}
		if p.slot.Status != StatusKnown {
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

// branchRecord ends the run on a branch that known values do not decide.
func (r *run) branchRecord(sel selection) error {
	r.rec.ExtraFields = []ExtraField{}
	for n, res := range r.resolved {
		if res.known {
			r.rec.ExtraFields = append(r.rec.ExtraFields, ExtraField{Field: n, Value: res.value, Source: res.source})
		}
	}
	sort.Slice(r.rec.ExtraFields, func(i, j int) bool { return r.rec.ExtraFields[i].Field < r.rec.ExtraFields[j].Field })
	msg := msgBranchUnresolve
	if sel.gateKind == GateBranchConflict {
		msg = msgBranchConflict
	}
	r.rec.Gate = Gate{Kind: sel.gateKind, UserMessage: msg, BranchOptions: sel.options}
	if sel.matched != nil {
		r.rec.Gate.Diag = map[string]any{"matched": sel.matched}
	}
	n, err := r.state.SlotAsks(r.ctx, r.conv, r.actionKey, BranchSlotID)
	if err != nil {
		return fmt.Errorf("gates: ask counters: %w", err)
	}
	if n >= ValueAskLimit {
		r.rec.AskCeiling = append(r.rec.AskCeiling, BranchSlotID)
		r.rec.Outcome = OutcomeExhausted
		return nil
	}
	r.rec.Outcome = OutcomeAskUser
	if err := r.ask(Question{SlotID: BranchSlotID, Kind: QuestionBranch, Message: msg, Options: sel.options},
		QuestionBinding{ActionKey: r.actionKey, Options: sel.options}); err != nil {
		return err
	}
	if err := r.state.SetSlotAsks(r.ctx, r.conv, r.actionKey, BranchSlotID, n+1); err != nil {
		return fmt.Errorf("gates: ask counters: %w", err)
	}
	return nil
}
