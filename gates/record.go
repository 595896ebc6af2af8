package gates

import (
	"fmt"
	"slices"

	"github.com/verdictgate/verdict/api"
)

const approvalSlotPrefix = "confirm:"

// VerdictSlots lists every slot, condition and checklist item for the verdict's `slots` claim.
func VerdictSlots(r *api.Record) []api.VerdictSlot {
	out := make([]api.VerdictSlot, 0, len(r.Slots)+len(r.UserChecklist))
	for _, s := range r.Slots {
		out = append(out, api.VerdictSlot{ID: s.SlotID, Status: s.Status, Source: s.Source})
	}
	for _, c := range r.UserChecklist {
		out = append(out, api.VerdictSlot{ID: c.ItemID, Status: c.Status, Source: c.Source})
	}
	return out
}

// TriggerRequest builds the at_trigger request of a deferred record: the stored intent with
// the trigger's fresh answers after the stored ones and the pre-set data as it is now. The
// run re-fetches everything else (schema, policy, measurements).
func TriggerRequest(r *api.Record, answers []api.Answer, preSet map[string]api.PreSet) (*api.Request, error) {
	if r.Outcome != api.OutcomeDeferred || r.Deferred == nil || r.ActionKey == nil {
		return nil, fmt.Errorf("gates: record %s is not a deferred record", r.RecordID)
	}
	phase, key := api.PhaseAtTrigger, *r.ActionKey
	d := r.Deferred
	return &api.Request{
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
