package gates

import (
	"slices"
	"testing"

	"github.com/verdictgate/verdict/api"
)

// allOutcomes is every outcome a record can carry.
func allOutcomes() []string {
	return []string{api.OutcomeVerdictIssued, api.OutcomeAskUser, api.OutcomeSystemLookup, api.OutcomeDefinitionRepair,
		api.OutcomeHold, api.OutcomeExhausted, api.OutcomeDeferred, api.OutcomeNotGated}
}

func TestSeverer(t *testing.T) {
	// Every pair of distinct outcomes, the more severe first (docs/preflight.md): hold >
	// definition_repair > exhausted > system_lookup > ask_user, then what applies only when
	// nothing is open.
	tests := []struct{ a, b, want string }{
		{api.OutcomeHold, api.OutcomeDefinitionRepair, api.OutcomeHold},
		{api.OutcomeHold, api.OutcomeExhausted, api.OutcomeHold},
		{api.OutcomeHold, api.OutcomeSystemLookup, api.OutcomeHold},
		{api.OutcomeHold, api.OutcomeAskUser, api.OutcomeHold},
		{api.OutcomeHold, api.OutcomeDeferred, api.OutcomeHold},
		{api.OutcomeHold, api.OutcomeVerdictIssued, api.OutcomeHold},
		{api.OutcomeHold, api.OutcomeNotGated, api.OutcomeHold},
		{api.OutcomeDefinitionRepair, api.OutcomeExhausted, api.OutcomeDefinitionRepair},
		{api.OutcomeDefinitionRepair, api.OutcomeSystemLookup, api.OutcomeDefinitionRepair},
		{api.OutcomeDefinitionRepair, api.OutcomeAskUser, api.OutcomeDefinitionRepair},
		{api.OutcomeDefinitionRepair, api.OutcomeDeferred, api.OutcomeDefinitionRepair},
		{api.OutcomeDefinitionRepair, api.OutcomeVerdictIssued, api.OutcomeDefinitionRepair},
		{api.OutcomeDefinitionRepair, api.OutcomeNotGated, api.OutcomeDefinitionRepair},
		{api.OutcomeExhausted, api.OutcomeSystemLookup, api.OutcomeExhausted},
		{api.OutcomeExhausted, api.OutcomeAskUser, api.OutcomeExhausted},
		{api.OutcomeExhausted, api.OutcomeDeferred, api.OutcomeExhausted},
		{api.OutcomeExhausted, api.OutcomeVerdictIssued, api.OutcomeExhausted},
		{api.OutcomeExhausted, api.OutcomeNotGated, api.OutcomeExhausted},
		{api.OutcomeSystemLookup, api.OutcomeAskUser, api.OutcomeSystemLookup},
		{api.OutcomeSystemLookup, api.OutcomeDeferred, api.OutcomeSystemLookup},
		{api.OutcomeSystemLookup, api.OutcomeVerdictIssued, api.OutcomeSystemLookup},
		{api.OutcomeSystemLookup, api.OutcomeNotGated, api.OutcomeSystemLookup},
		{api.OutcomeAskUser, api.OutcomeDeferred, api.OutcomeAskUser},
		{api.OutcomeAskUser, api.OutcomeVerdictIssued, api.OutcomeAskUser},
		{api.OutcomeAskUser, api.OutcomeNotGated, api.OutcomeAskUser},
		{api.OutcomeDeferred, api.OutcomeVerdictIssued, api.OutcomeDeferred},
		{api.OutcomeDeferred, api.OutcomeNotGated, api.OutcomeDeferred},
		{api.OutcomeVerdictIssued, api.OutcomeNotGated, api.OutcomeVerdictIssued},
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
	for _, r := range []string{api.RouteAskUser, api.RouteSystemLookup, api.RouteDefinitionRepair} {
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
		{"nothing open", tally{}, api.OutcomeVerdictIssued},
		{"nothing open at instruction", tally{atInstruction: true}, api.OutcomeDeferred},
		{"only excused items at instruction", tally{unknown: 2, atInstruction: true}, api.OutcomeDeferred},
		{"unmet", tally{unmet: true}, api.OutcomeHold},
		{"unmet over repair", tally{unknown: 1, open: 1, worst: api.OutcomeDefinitionRepair, unmet: true}, api.OutcomeHold},
		{"unmet at instruction", tally{atInstruction: true, unmet: true}, api.OutcomeHold},
		{"unmet with asks spent", tally{unknown: 1, open: 1, unmet: true}, api.OutcomeHold},
		{"repair", tally{unknown: 1, open: 1, worst: api.OutcomeDefinitionRepair}, api.OutcomeDefinitionRepair},
		{"repair at instruction", tally{unknown: 1, open: 1, worst: api.OutcomeDefinitionRepair, atInstruction: true}, api.OutcomeDefinitionRepair},
		{"lookup", tally{unknown: 1, open: 1, worst: api.OutcomeSystemLookup}, api.OutcomeSystemLookup},
		{"lookup at instruction", tally{unknown: 2, open: 1, worst: api.OutcomeSystemLookup, atInstruction: true}, api.OutcomeSystemLookup},
		{"ask", tally{unknown: 1, open: 1, worst: api.OutcomeAskUser}, api.OutcomeAskUser},
		{"asks spent", tally{unknown: 1, open: 1}, api.OutcomeExhausted},
		{"asks spent at instruction", tally{unknown: 1, open: 1, atInstruction: true}, api.OutcomeExhausted},
	}
	for _, tt := range tests {
		if got := tt.t.outcome(); got != tt.want {
			t.Errorf("%s: outcome() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestAskOutcome(t *testing.T) {
	if got := askOutcome(false); got != api.OutcomeAskUser {
		t.Errorf("askOutcome(false) = %q, want ask_user", got)
	}
	if got := askOutcome(true); got != api.OutcomeExhausted {
		t.Errorf("askOutcome(true) = %q, want exhausted", got)
	}
}

func TestTallyPlans(t *testing.T) {
	plan := func(id, status, route string, askable, pending, ceiling bool) *slotPlan {
		p := &slotPlan{askable: askable}
		p.slot = api.Slot{SlotID: id, Status: status, PendingAtTrigger: pending, AskCeilingReached: ceiling}
		if route != "" {
			p.slot.Route = &route
		}
		return p
	}
	known := plan("known", api.StatusKnown, "", false, false, false)
	null := plan("null", api.StatusNull, "", false, false, false)
	echoed := plan("echoed", api.StatusUnknown, "", false, false, false) // a checklist item at instruction time
	ask := plan("ask", api.StatusUnknown, api.RouteAskUser, true, false, false)
	spent := plan("spent", api.StatusUnknown, api.RouteAskUser, false, false, true)
	waits := plan("waits", api.StatusUnknown, api.RouteAskUser, false, false, false) // an approval waiting for its value
	lookup := plan("lookup", api.StatusUnknown, api.RouteSystemLookup, false, false, false)
	pendingLookup := plan("pending", api.StatusUnknown, api.RouteSystemLookup, false, true, false)
	pendingSpent := plan("pendingSpent", api.StatusUnknown, api.RouteAskUser, false, true, true)
	repair := plan("repair", api.StatusUnknown, api.RouteDefinitionRepair, false, false, false)

	tests := []struct {
		name          string
		plans         []*slotPlan
		atInstruction bool
		want          tally
		ceiling       []string
	}{
		{"none", nil, false, tally{}, nil},
		{"settled and echoed items are not counted", []*slotPlan{known, null, echoed}, false, tally{}, nil},
		{"ask", []*slotPlan{known, ask}, false, tally{unknown: 1, open: 1, worst: api.OutcomeAskUser}, nil},
		{"asks spent", []*slotPlan{spent, waits}, false, tally{unknown: 2, open: 2}, []string{"spent"}},
		{"one askable is enough", []*slotPlan{spent, ask}, false, tally{unknown: 2, open: 2, worst: api.OutcomeAskUser}, []string{"spent"}},
		{"lookup over ask", []*slotPlan{ask, lookup}, false, tally{unknown: 2, open: 2, worst: api.OutcomeSystemLookup}, nil},
		{"repair over lookup", []*slotPlan{lookup, repair, ask}, false, tally{unknown: 3, open: 3, worst: api.OutcomeDefinitionRepair}, nil},
		{"pending items are excused at instruction", []*slotPlan{pendingLookup, pendingSpent}, true,
			tally{unknown: 2, atInstruction: true}, nil},
		{"pending items count at the trigger", []*slotPlan{pendingLookup, pendingSpent}, false,
			tally{unknown: 2, open: 2, worst: api.OutcomeSystemLookup}, []string{"pendingSpent"}},
		{"an open item beside excused ones", []*slotPlan{pendingLookup, ask}, true,
			tally{unknown: 2, open: 1, worst: api.OutcomeAskUser, atInstruction: true}, nil},
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
		unmet []api.Unmet
		want  string
	}{
		{nil, api.GateValue},
		{[]api.Unmet{{Reason: api.UnmetProhibited}, {Reason: api.UnmetRequiredNull}}, api.GateValue},
		{[]api.Unmet{{Reason: api.UnmetProhibited}, {Reason: api.UnmetInvalidValue}}, api.GatePayloadInvalid},
		{[]api.Unmet{{Reason: api.UnmetInvalidPayload}}, api.GatePayloadInvalid},
	}
	for _, tt := range tests {
		if got := valueGateKind(tt.unmet); got != tt.want {
			t.Errorf("valueGateKind(%+v) = %q, want %q", tt.unmet, got, tt.want)
		}
	}
}
