package gates

import (
	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
)

// approvals adds the approvals bound to the values of the call: after each value slot whose
// field asks for confirmation, the approval of its current value ("confirm:<field>"), then the
// [Verify] approvals of the whole call. An approval counts only for the value it was given for,
// so it is built only once the values are settled. A call with no approval to add keeps its
// slice.
func (r *run) approvals(values []*slotPlan, args map[string]any, complete bool) ([]*slotPlan, error) {
	confirms := 0
	for _, p := range values {
		if r.confirms(p.slot.SlotID) {
			confirms++
		}
	}
	// The console decision is looked up for the checklist's confirm items too, which approve
	// the call like a [Verify] label, so also for a tool without approval slots.
	var err error
	if r.console, r.callDigest, err = r.consoleFor(args, complete); err != nil {
		return nil, err
	}
	verify := r.def.labels.Verify
	if confirms == 0 && len(verify) == 0 {
		return values, nil
	}
	plans := make([]*slotPlan, 0, len(values)+confirms+len(verify))
	for _, p := range values {
		plans = append(plans, p)
		if r.confirms(p.slot.SlotID) {
			ap, err := r.confirmSlot(p)
			if err != nil {
				return nil, err
			}
			plans = append(plans, ap)
		}
	}
	for _, v := range verify {
		p, err := r.verifySlot(v, args, complete)
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// confirms reports whether the policy asks the user to confirm field's value. It reads the
// policy's rule directly: r.field would build a rule for a [Required] field only to read this.
func (r *run) confirms(field string) bool {
	f := r.ptool.Field(field)
	return f != nil && f.Confirm
}

// approvalSlot is the slot, not yet settled, of the approval id of approves.
func (r *run) approvalSlot(id, approves string) api.Slot {
	return api.Slot{SlotID: id, Kind: api.KindApproval, Status: api.StatusUnknown, Approves: approves,
		AllowedSources: []api.Source{api.SourceUserAnswer}, ResolvedAt: r.stampStr}
}

// confirmSlot is the approval of a value slot's current value ("confirm:<field>").
func (r *run) confirmSlot(vp *slotPlan) (*slotPlan, error) {
	field := vp.slot.SlotID
	s := r.approvalSlot(approvalSlotPrefix+field, field)
	if vp.slot.Status != api.StatusKnown {
		s.Route, s.Note = ptr(api.RouteAskUser), "waits for the value it approves"
		return &slotPlan{slot: s}, nil
	}
	shown := map[string]any{field: vp.slot.Value}
	return r.approval(&slotPlan{}, s, vp.slot.Value, shown, askConfirm(r.def.props[field], field))
}

// verifySlot is a [Verify] approval over the whole call, bound to its arguments digest.
func (r *run) verifySlot(v policy.VerifyLabel, args map[string]any, complete bool) (*slotPlan, error) {
	s := r.approvalSlot(v.ID, "$call")
	if !complete {
		s.Route, s.Note = ptr(api.RouteAskUser), "waits for the call it approves"
		return &slotPlan{slot: s}, nil
	}
	d, err := digestArgs(args)
	if err != nil {
		return nil, err
	}
	return r.approval(&slotPlan{}, s, d, args, r.safeMessage(v.Text))
}

// approval settles an approval slot from the console decision of exactly this call, or from an
// approval answer bound to exactly the current value where the host may give it, or plans to
// ask for one.
func (r *run) approval(p *slotPlan, s api.Slot, value, shown any, msg string) (*slotPlan, error) {
	if r.settleFromConsole(p, s, value, shown, r.console) {
		return p, nil
	}
	if r.refusal != "" {
		// The console refused exactly this call: no other answer settles it, and nothing is
		// asked.
		s.Route = ptr(api.RouteAskUser)
		p.slot = s
		return p, nil
	}
	if a, ok := r.approved[s.SlotID]; ok {
		switch {
		case !r.hostMaySettle():
			// The tool takes its approvals in the console only (four eyes, or by policy): the
			// host's answer, whoever gave it, settles nothing.
			r.rec.RejectedAnswers = append(r.rec.RejectedAnswers,
				api.RejectedAns{QuestionID: a.questionID, SlotID: s.SlotID, Reason: api.AnswerChannelNotAllowed})
		case a.approved && sameJSON(a.value, value):
			s.Status, s.Value, s.Shown = api.StatusKnown, value, shown
			s.Source, s.OriginSource = ptr(api.SourceUserAnswer), ptr(api.SourceUserAnswer)
			p.slot = s
			return p, nil
		case a.approved:
			// The value changed since it was approved: the approval no longer counts.
			r.rec.RejectedAnswers = append(r.rec.RejectedAnswers,
				api.RejectedAns{QuestionID: a.questionID, SlotID: s.SlotID, Reason: api.AnswerApprovalValueMismatch})
		}
	}
	s.Route = ptr(api.RouteAskUser)
	p.slot = s
	if r.callDigest == "" && !r.hostMaySettle() {
		// Only the console can settle it, and only for a call whose every value is settled:
		// nothing is asked of the host, which could not answer, until there is a call to
		// approve.
		p.slot.Note = "waits for the call's values, then for its approval in the console"
		return p, nil
	}
	if !r.hostMaySettle() {
		// Only the console can settle it: the question waits on a pending approval, not on
		// the user, so it spends no ask. The approval's timeout bounds the wait.
		p.askable, p.uncounted = true, true
	} else if err := r.planAsk(p); err != nil {
		return nil, err
	}
	p.question = api.Question{SlotID: s.SlotID, Kind: api.QuestionApproval, Message: msg,
		Schema: []byte(`{"const":true}`), Shown: shown, Value: value}
	p.binding = QuestionBinding{ActionKey: r.actionKey, Value: value, Shown: shown}
	return p, nil
}
