package gates

import (
	"slices"
	"testing"
)

// allOutcomes is every outcome a record can carry.
func allOutcomes() []string {
	return []string{OutcomeVerdictIssued, OutcomeAskUser, OutcomeSystemLookup, OutcomeDefinitionRepair,
		OutcomeHold, OutcomeExhausted, OutcomeDeferred, OutcomeNotGated}
}

func TestSeverer(t *testing.T) {
	// Every pair of distinct outcomes, the more severe first (docs/preflight.md): hold >
	// definition_repair > exhausted > system_lookup > ask_user, then what applies only when
	// nothing is open.
	tests := []struct{ a, b, want string }{
		{OutcomeHold, OutcomeDefinitionRepair, OutcomeHold},
		{OutcomeHold, OutcomeExhausted, OutcomeHold},
		{OutcomeHold, OutcomeSystemLookup, OutcomeHold},
		{OutcomeHold, OutcomeAskUser, OutcomeHold},
		{OutcomeHold, OutcomeDeferred, OutcomeHold},
		{OutcomeHold, OutcomeVerdictIssued, OutcomeHold},
		{OutcomeHold, OutcomeNotGated, OutcomeHold},
		{OutcomeDefinitionRepair, OutcomeExhausted, OutcomeDefinitionRepair},
		{OutcomeDefinitionRepair, OutcomeSystemLookup, OutcomeDefinitionRepair},
		{OutcomeDefinitionRepair, OutcomeAskUser, OutcomeDefinitionRepair},
		{OutcomeDefinitionRepair, OutcomeDeferred, OutcomeDefinitionRepair},
		{OutcomeDefinitionRepair, OutcomeVerdictIssued, OutcomeDefinitionRepair},
		{OutcomeDefinitionRepair, OutcomeNotGated, OutcomeDefinitionRepair},
		{OutcomeExhausted, OutcomeSystemLookup, OutcomeExhausted},
		{OutcomeExhausted, OutcomeAskUser, OutcomeExhausted},
		{OutcomeExhausted, OutcomeDeferred, OutcomeExhausted},
		{OutcomeExhausted, OutcomeVerdictIssued, OutcomeExhausted},
		{OutcomeExhausted, OutcomeNotGated, OutcomeExhausted},
		{OutcomeSystemLookup, OutcomeAskUser, OutcomeSystemLookup},
		{OutcomeSystemLookup, OutcomeDeferred, OutcomeSystemLookup},
		{OutcomeSystemLookup, OutcomeVerdictIssued, OutcomeSystemLookup},
		{OutcomeSystemLookup, OutcomeNotGated, OutcomeSystemLookup},
		{OutcomeAskUser, OutcomeDeferred, OutcomeAskUser},
		{OutcomeAskUser, OutcomeVerdictIssued, OutcomeAskUser},
		{OutcomeAskUser, OutcomeNotGated, OutcomeAskUser},
		{OutcomeDeferred, OutcomeVerdictIssued, OutcomeDeferred},
		{OutcomeDeferred, OutcomeNotGated, OutcomeDeferred},
		{OutcomeVerdictIssued, OutcomeNotGated, OutcomeVerdictIssued},
	}
	outcomes := allOutcomes()
	if want := len(outcomes) * (len(outcomes) - 1) / 2; len(tests) != want {
		t.Fatalf("%d pairs listed, want all %d", len(tests), want)
	}
	for _, tt := range tests {
		if got := severer(tt.a, tt.b); got != tt.want {
			t.Errorf("severer(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
		if got := severer(tt.b, tt.a); got != tt.want {
			t.Errorf("severer(%q, %q) = %q, want %q", tt.b, tt.a, got, tt.want)
		}
	}
	for _, o := range outcomes {
		if got := severer(o, o); got != o {
			t.Errorf("severer(%q, %q) = %q", o, o, got)
		}
		// Nothing ranks below every outcome: it is where a fold starts.
		if got := severer("", o); got != o {
			t.Errorf("severer(\"\", %q) = %q", o, got)
		}
		if got := severer(o, ""); got != o {
			t.Errorf("severer(%q, \"\") = %q", o, got)
		}
	}
}

// A route ranks as the outcome it leads to, so it must be spelled like it.
func TestRoutesAreOutcomes(t *testing.T) {
	for _, r := range []string{RouteAskUser, RouteSystemLookup, RouteDefinitionRepair} {
		if !slices.Contains(allOutcomes(), r) {
			t.Errorf("route %q is not an outcome", r)
		}
	}
}

func TestTallyOutcome(t *testing.T) {
	tests := []struct {
		name string
		t    tally
		want string
	}{
		{"nothing open", tally{}, OutcomeVerdictIssued},
		{"nothing open at instruction", tally{atInstruction: true}, OutcomeDeferred},
		{"only excused items at instruction", tally{unknown: 2, atInstruction: true}, OutcomeDeferred},
		{"unmet", tally{unmet: true}, OutcomeHold},
		{"unmet over repair", tally{unknown: 1, open: 1, worst: OutcomeDefinitionRepair, unmet: true}, OutcomeHold},
		{"unmet at instruction", tally{atInstruction: true, unmet: true}, OutcomeHold},
		{"unmet with asks spent", tally{unknown: 1, open: 1, unmet: true}, OutcomeHold},
		{"repair", tally{unknown: 1, open: 1, worst: OutcomeDefinitionRepair}, OutcomeDefinitionRepair},
		{"repair at instruction", tally{unknown: 1, open: 1, worst: OutcomeDefinitionRepair, atInstruction: true}, OutcomeDefinitionRepair},
		{"lookup", tally{unknown: 1, open: 1, worst: OutcomeSystemLookup}, OutcomeSystemLookup},
		{"lookup at instruction", tally{unknown: 2, open: 1, worst: OutcomeSystemLookup, atInstruction: true}, OutcomeSystemLookup},
		{"ask", tally{unknown: 1, open: 1, worst: OutcomeAskUser}, OutcomeAskUser},
		{"asks spent", tally{unknown: 1, open: 1}, OutcomeExhausted},
		{"asks spent at instruction", tally{unknown: 1, open: 1, atInstruction: true}, OutcomeExhausted},
	}
	for _, tt := range tests {
		if got := tt.t.outcome(); got != tt.want {
			t.Errorf("%s: outcome() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestAskOutcome(t *testing.T) {
	if got := askOutcome(false); got != OutcomeAskUser {
		t.Errorf("askOutcome(false) = %q, want ask_user", got)
	}
	if got := askOutcome(true); got != OutcomeExhausted {
		t.Errorf("askOutcome(true) = %q, want exhausted", got)
	}
}

func TestTallyPlans(t *testing.T) {
	plan := func(id, status, route string, askable, pending, ceiling bool) *slotPlan {
		p := &slotPlan{askable: askable}
		p.slot = Slot{SlotID: id, Status: status, PendingAtTrigger: pending, AskCeilingReached: ceiling}
		if route != "" {
			p.slot.Route = &route
		}
		return p
	}
	known := plan("known", StatusKnown, "", false, false, false)
	null := plan("null", StatusNull, "", false, false, false)
	echoed := plan("echoed", StatusUnknown, "", false, false, false) // a checklist item at instruction time
	ask := plan("ask", StatusUnknown, RouteAskUser, true, false, false)
	spent := plan("spent", StatusUnknown, RouteAskUser, false, false, true)
	waits := plan("waits", StatusUnknown, RouteAskUser, false, false, false) // an approval waiting for its value
	lookup := plan("lookup", StatusUnknown, RouteSystemLookup, false, false, false)
	pendingLookup := plan("pending", StatusUnknown, RouteSystemLookup, false, true, false)
	pendingSpent := plan("pendingSpent", StatusUnknown, RouteAskUser, false, true, true)
	repair := plan("repair", StatusUnknown, RouteDefinitionRepair, false, false, false)

	tests := []struct {
		name          string
		plans         []*slotPlan
		atInstruction bool
		want          tally
		ceiling       []string
	}{
		{"none", nil, false, tally{}, nil},
		{"settled and echoed items are not counted", []*slotPlan{known, null, echoed}, false, tally{}, nil},
		{"ask", []*slotPlan{known, ask}, false, tally{unknown: 1, open: 1, worst: OutcomeAskUser}, nil},
		{"asks spent", []*slotPlan{spent, waits}, false, tally{unknown: 2, open: 2}, []string{"spent"}},
		{"one askable is enough", []*slotPlan{spent, ask}, false, tally{unknown: 2, open: 2, worst: OutcomeAskUser}, []string{"spent"}},
		{"lookup over ask", []*slotPlan{ask, lookup}, false, tally{unknown: 2, open: 2, worst: OutcomeSystemLookup}, nil},
		{"repair over lookup", []*slotPlan{lookup, repair, ask}, false, tally{unknown: 3, open: 3, worst: OutcomeDefinitionRepair}, nil},
		{"pending items are excused at instruction", []*slotPlan{pendingLookup, pendingSpent}, true,
			tally{unknown: 2, atInstruction: true}, nil},
		{"pending items count at the trigger", []*slotPlan{pendingLookup, pendingSpent}, false,
			tally{unknown: 2, open: 2, worst: OutcomeSystemLookup}, []string{"pendingSpent"}},
		{"an open item beside excused ones", []*slotPlan{pendingLookup, ask}, true,
			tally{unknown: 2, open: 1, worst: OutcomeAskUser, atInstruction: true}, nil},
	}
	for _, tt := range tests {
		got, ceiling := tallyPlans(tt.plans, tt.atInstruction, nil)
		if got != tt.want {
			t.Errorf("%s: tally = %+v, want %+v", tt.name, got, tt.want)
		}
		if !slices.Equal(ceiling, tt.ceiling) {
			t.Errorf("%s: ceiling = %q, want %q", tt.name, ceiling, tt.ceiling)
		}
	}
	// The ceiling list is appended to, not replaced.
	if _, ceiling := tallyPlans([]*slotPlan{spent}, false, []string{"$branch"}); !slices.Equal(ceiling, []string{"$branch", "spent"}) {
		t.Errorf("ceiling = %q, want it appended to", ceiling)
	}
}

func TestValueGateKind(t *testing.T) {
	tests := []struct {
		unmet []Unmet
		want  string
	}{
		{nil, GateValue},
		{[]Unmet{{Reason: UnmetProhibited}, {Reason: UnmetRequiredNull}}, GateValue},
		{[]Unmet{{Reason: UnmetProhibited}, {Reason: UnmetInvalidValue}}, GatePayloadInvalid},
		{[]Unmet{{Reason: UnmetInvalidPayload}}, GatePayloadInvalid},
	}
	for _, tt := range tests {
		if got := valueGateKind(tt.unmet); got != tt.want {
			t.Errorf("valueGateKind(%+v) = %q, want %q", tt.unmet, got, tt.want)
		}
	}
}
