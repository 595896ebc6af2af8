package gates

import "github.com/verdictgate/verdict/api"

// severer is whichever of two outcomes takes precedence when both apply to a run
// (docs/preflight.md, "How a run decides"): hold, then definition_repair, then exhausted, then
// system_lookup, then ask_user. A finished check that prohibits the call makes every open
// question moot, and nothing the user says repairs a definition. Exhausted outranks a lookup
// or a question, though it applies only where neither does (tally.outcome). Below those,
// deferred and verdict_issued apply only when nothing is open, and not_gated never meets
// another outcome: it is decided before any gate runs. Anything else, such as "", ranks below
// them all.
//
// No other code orders outcomes. It decides among what one gate finds: the
// gates themselves run in order, and a run ends at the first that stops it. The route of an
// expression waiting on several inputs is decided by it too, since a route names the outcome it
// leads to.
func severer(a, b string) string {
	for _, o := range [...]string{
		api.OutcomeHold,
		api.OutcomeDefinitionRepair,
		api.OutcomeExhausted,
		api.OutcomeSystemLookup,
		api.OutcomeAskUser,
		api.OutcomeDeferred,
		api.OutcomeVerdictIssued,
		api.OutcomeNotGated,
	} {
		if a == o || b == o {
			return o
		}
	}
	return a
}

// tally is what a run's slots and checklist items leave open, as its outcome depends on it.
type tally struct {
	unknown int // unknown items, the record's unknown_count
	// open counts the unknown items that are not excused until the trigger: at instruction
	// time, an item pending_at_trigger neither blocks scheduling nor picks the outcome.
	open int
	// worst is the most severe outcome an open item leads to: its route, where ask_user
	// counts only for an item that can still be asked; "" when no open item can move.
	worst         string
	atInstruction bool // the run is at phase at_instruction, and may be deferred
	unmet         bool // a finished check prohibits the call
}

// tallyPlans counts the open items of a run's plans. Items without a route (a checklist item
// at instruction time is echoed, verified only at the trigger) are not counted. It appends to
// ceiling, and returns, the ids of the open items whose asks are spent.
func tallyPlans(plans []*slotPlan, atInstruction bool, ceiling []string) (tally, []string) {
	t := tally{atInstruction: atInstruction}
	for _, p := range plans {
		s := &p.slot
		if s.Status != api.StatusUnknown || s.Route == nil {
			continue
		}
		t.unknown++
		if atInstruction && s.PendingAtTrigger {
			continue
		}
		t.open++
		// A route names the outcome it leads to (severer).
		if *s.Route != api.RouteAskUser || p.askable {
			t.worst = severer(t.worst, *s.Route)
		}
		if s.AskCeilingReached {
			ceiling = append(ceiling, s.SlotID)
		}
	}
	return t, ceiling
}

// outcome is the most severe of the outcomes that apply to t. With nothing open a run is
// issued a verdict, or deferred at instruction time; an open item applies the outcome it
// leads to, and exhausted applies only when no open item can be repaired, measured or asked
// any more; an unmet check applies hold.
func (t tally) outcome() string {
	o := api.OutcomeVerdictIssued
	if t.atInstruction {
		o = severer(o, api.OutcomeDeferred)
	}
	if t.open > 0 {
		o = severer(o, t.worst)
		if t.worst == "" {
			o = severer(o, api.OutcomeExhausted)
		}
	}
	if t.unmet {
		o = severer(o, api.OutcomeHold)
	}
	return o
}

// askOutcome is the outcome of a gate that stops the run on one question: ask_user, or
// exhausted once that question's asks are spent.
func askOutcome(spent bool) string {
	t := tally{unknown: 1, open: 1}
	if !spent {
		t.worst = api.OutcomeAskUser
	}
	return t.outcome()
}

// valueGateKind is the gate of a run the value gate decided: payload_invalid when a value or
// the assembled payload broke its schema, else value_gate.
func valueGateKind(unmet []api.Unmet) string {
	for _, u := range unmet {
		if u.Reason == api.UnmetInvalidValue || u.Reason == api.UnmetInvalidPayload {
			return api.GatePayloadInvalid
		}
	}
	return api.GateValue
}
