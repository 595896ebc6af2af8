package gates

import (
	"slices"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
)

// ConsoleDecision is an approver's decision, given in the console, on one pending call: the
// approval it decided, the arguments digest that approval binds, and what was decided. A run
// uses it only when its own call has exactly that digest.
type ConsoleDecision struct {
	ApprovalID      string
	ArgumentsDigest string
	// State is api.ApprovalApproved, api.ApprovalDenied, api.ApprovalExpired or
	// api.ApprovalLapsed.
	State     string
	DecidedBy string
}

// consoleFor returns the console decision bound to the call's arguments, or nil when the call
// is not complete (its digest is not settled) or no decision binds its digest. d is the
// call's digest, "" when it is not complete.
func (r *run) consoleFor(args map[string]any, complete bool) (*ConsoleDecision, string, error) {
	if !complete {
		return nil, "", nil
	}
	if !r.ptool.ApprovalRule().OutOfBand() {
		return nil, "", nil
	}
	d, err := digestArgs(args)
	if err != nil {
		return nil, "", err
	}
	i := slices.IndexFunc(r.in.Console, func(c ConsoleDecision) bool { return c.ArgumentsDigest == d })
	if i < 0 {
		return nil, d, nil
	}
	return &r.in.Console[i], d, nil
}

// settleFromConsole settles an approval slot from the console decision cd of this exact call,
// and reports whether it did. A denial, an expiry or a lapse settles nothing: it refuses the call
// (r.refusal), which conclude turns into the outcome refuse.
func (r *run) settleFromConsole(p *slotPlan, s api.Slot, value, shown any, cd *ConsoleDecision) bool {
	if cd == nil {
		return false
	}
	switch cd.State {
	case api.ApprovalApproved:
		s.Status, s.Value, s.Shown = api.StatusKnown, value, shown
		s.Source, s.OriginSource = ptr(api.SourceConsoleApproval), ptr(api.SourceConsoleApproval)
		s.ApprovedBy = cd.DecidedBy
		p.slot = s
		r.consoleUsed = cd
		return true
	case api.ApprovalDenied:
		r.refusal, r.consoleUsed = api.CodeApprovalDenied, cd
	case api.ApprovalExpired:
		r.refusal, r.consoleUsed = api.CodeApprovalExpired, cd
	case api.ApprovalLapsed:
		r.refusal, r.consoleUsed = api.CodeApprovalLapsed, cd
	}
	return false
}

// hostMaySettle reports whether an approval answered in the host counts: only when the tool
// takes its approvals in the host. A four-eyes rule never does.
func (r *run) hostMaySettle() bool {
	return r.ptool.ApprovalRule().Allows(policy.ChannelHost)
}

// concludeConsole writes the console approval on the record: a refusal ends the run refuse,
// a decision acted on is named, and an ask_user run whose approvals the console may give
// carries what a new pending approval needs.
func (r *run) concludeConsole(open bool, args map[string]any, digest string) {
	rule := r.ptool.ApprovalRule()
	if !rule.OutOfBand() {
		return
	}
	channels := make([]string, len(rule.Channels))
	for i, c := range rule.Channels {
		channels[i] = string(c)
	}
	if r.refusal != "" {
		cd := r.consoleUsed
		r.rec.Outcome = api.OutcomeRefuse
		r.rec.Gate = api.Gate{Kind: api.GateApprovalRefused, Detail: r.refusal}
		r.rec.Unmet = append(r.rec.Unmet, api.Unmet{SlotID: api.ApprovalSlotID, Reason: r.refusal, Detail: cd.DecidedBy})
		r.rec.Approval = &api.RecordApproval{ApprovalID: cd.ApprovalID, State: cd.State, Channels: channels,
			ArgumentsDigest: cd.ArgumentsDigest, DecidedBy: cd.DecidedBy}
		return
	}
	if cd := r.consoleUsed; cd != nil {
		r.rec.Approval = &api.RecordApproval{ApprovalID: cd.ApprovalID, State: cd.State, Channels: channels,
			ArgumentsDigest: cd.ArgumentsDigest, DecidedBy: cd.DecidedBy}
		return
	}
	if open && digest != "" && r.rec.Outcome == api.OutcomeAskUser {
		r.rec.Approval = &api.RecordApproval{Channels: channels, ArgumentsDigest: digest, Arguments: args}
	}
}

// openApproval reports whether an approval is still open among plans: an approval slot, or a
// checklist item of kind confirm (an approval of the whole call too).
func openApproval(plans []*slotPlan) bool {
	for _, p := range plans {
		approval := (p.check == "" && p.slot.Kind == api.KindApproval) || p.check == "confirm"
		if approval && p.slot.Status == api.StatusUnknown {
			return true
		}
	}
	return false
}
