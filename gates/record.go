package gates

import (
	"fmt"
	"github.com/verdictgate/verdict/api"
	"slices"
)

const approvalSlotPrefix = "confirm:"

// The decision record's types are the wire types of package api.
type (
	Record            = api.Record
	Fixed             = api.Fixed
	C3Result          = api.C3Result
	Slot              = api.Slot
	Offer             = api.Offer
	Rejected          = api.Rejected
	ExtraField        = api.ExtraField
	CheckResult       = api.CheckResult
	Unmet             = api.Unmet
	Question          = api.Question
	RejectedAns       = api.RejectedAns
	MeasureError      = api.MeasureError
	DeferredIntent    = api.DeferredIntent
	Gate              = api.Gate
	NextIntentAttempt = api.NextIntentAttempt
	NextToolAttempt   = api.NextToolAttempt
	VerdictSlot       = api.VerdictSlot
	MeasurementRef    = api.MeasurementRef
)

// VerdictSlots lists every slot, condition and checklist item for the verdict's `slots` claim.
func VerdictSlots(r *Record) []VerdictSlot {
	out := make([]VerdictSlot, 0, len(r.Slots)+len(r.UserChecklist))
	for _, s := range r.Slots {
		out = append(out, VerdictSlot{ID: s.SlotID, Status: s.Status, Source: s.Source})
	}
	for _, c := range r.UserChecklist {
		out = append(out, VerdictSlot{ID: c.ItemID, Status: c.Status, Source: c.Source})
	}
	return out
}

// TriggerRequest builds the at_trigger request of a deferred record: the stored intent with
// the trigger's fresh answers after the stored ones and the pre-set data as it is now. The
// run re-fetches everything else (schema, policy, measurements).
func TriggerRequest(r *Record, answers []Answer, preSet map[string]PreSet) (*Request, error) {
	if r.Outcome != api.OutcomeDeferred || r.Deferred == nil || r.ActionKey == nil {
		return nil, fmt.Errorf("gates: record %s is not a deferred record", r.RecordID)
	}
	phase, key := api.PhaseAtTrigger, *r.ActionKey
	d := r.Deferred
	return &Request{
		Principal:      r.Principal,
		ConversationID: r.ConversationID,
		Server:         r.Server,
		Tool:           r.Tool,
		Phase:          &phase,
		ActionKey:      &key,
		Instruction:    d.Instruction,
		Intent:         d.Intent,
		Candidates:     slices.Clone(d.Candidates),
		UserAnswers:    append(slices.Clone(d.UserAnswers), answers...),
		PreSetData:     preSet,
		UserChecklist:  slices.Clone(d.UserChecklist),
	}, nil
}
