package gates

import (
	"context"
	"slices"
	"testing"

	"github.com/verdictgate/verdict/api"

	"github.com/verdictgate/verdict/policy"
)

// stepRun is a run as far as Gate 1 takes it, for testing the value gate's steps alone. It has
// no record: a step that should not write on it panics.
func stepRun(pt *policy.Tool, def *definition) *run {
	if def.props == nil {
		def.props = map[string]*property{}
	}
	return &run{ctx: context.Background(), req: &api.Request{Tool: "transfer_funds"}, ptool: pt, def: def,
		state: NewMemState(), stampStr: "2026-01-02T03:04:05.000Z", actionKey: "u:send:bank/transfer_funds"}
}

func TestValueSlot(t *testing.T) {
	pt := &policy.Tool{
		Fields: map[string]*policy.Field{
			"ask":      {AllowedSources: []api.Source{api.SourceUserAnswer, api.SourcePriorState}},
			"measured": {AllowedSources: []api.Source{api.SourceMeasuredData}},
			"nowhere":  {AllowedSources: []api.Source{api.SourceInstruction}},
		},
		Measurements:     map[string]*policy.Measurement{"measured": {}},
		PendingAtTrigger: []string{"measured", "nowhere"},
	}
	ref := &api.MeasurementRef{Name: "measured", At: "2026-01-02T03:04:06.000Z"}
	tests := []struct {
		name     string
		slot     string
		res      resolution
		status   string
		route    string // "" for none
		pending  bool
		question bool
	}{
		{name: "known", slot: "ask", res: resolution{known: true, value: "x", source: api.SourceUserAnswer, origin: api.SourcePriorState},
			status: api.StatusKnown},
		{name: "measured null", slot: "measured", res: resolution{known: true, source: api.SourceMeasuredData, origin: api.SourceMeasuredData, measuredBy: ref},
			status: api.StatusNull, pending: true},
		{name: "askable", slot: "ask", res: resolution{offered: &api.Offer{Value: "old", Source: api.SourcePriorState}},
			status: api.StatusUnknown, route: api.RouteAskUser, question: true},
		{name: "lookup, pending until the trigger", slot: "measured", res: resolution{note: "waits for balance"},
			status: api.StatusUnknown, route: api.RouteSystemLookup, pending: true},
		{name: "a definition gap is never pending", slot: "nowhere",
			status: api.StatusUnknown, route: api.RouteDefinitionRepair},
		{name: "a failed lookup is repaired, never pending", slot: "measured", res: resolution{lookupFailed: true},
			status: api.StatusUnknown, route: api.RouteDefinitionRepair},
	}
	for _, tt := range tests {
		r := stepRun(pt, &definition{})
		p := r.valueSlot(tt.slot, &tt.res, true)
		s := p.slot
		if s.SlotID != tt.slot || s.Kind != api.KindValue || !s.Required || s.Status != tt.status {
			t.Errorf("%s: slot %+v", tt.name, s)
		}
		if got := deref(s.Route); got != tt.route {
			t.Errorf("%s: route %q, want %q", tt.name, got, tt.route)
		}
		if s.PendingAtTrigger != tt.pending {
			t.Errorf("%s: pending_at_trigger %v, want %v", tt.name, s.PendingAtTrigger, tt.pending)
		}
		if got := p.question.SlotID != ""; got != tt.question {
			t.Errorf("%s: question %+v", tt.name, p.question)
		}
		if p.askable || s.Asks != 0 {
			t.Errorf("%s: valueSlot decided the ask ceiling", tt.name)
		}
		switch tt.status {
		case api.StatusKnown:
			if s.Value != tt.res.value || *s.Source != tt.res.source || *s.OriginSource != tt.res.origin || !*s.Met {
				t.Errorf("%s: settled slot %+v", tt.name, s)
			}
		case api.StatusNull:
			if s.Met == nil || *s.Met || len(s.Measurements) != 1 || s.ResolvedAt != ref.At {
				t.Errorf("%s: null slot %+v", tt.name, s)
			}
		}
		if tt.res.offered != nil && (p.question.Value != "old" || p.binding.Origin != api.SourcePriorState) {
			t.Errorf("%s: the offered value is not what is asked to confirm: %+v", tt.name, p.question)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestApprovals(t *testing.T) {
	pt := &policy.Tool{Fields: map[string]*policy.Field{"to": {Confirm: true}, "amount": {Confirm: true}}}
	known := func(id string, v any) *slotPlan {
		return &slotPlan{slot: api.Slot{SlotID: id, Kind: api.KindValue, Status: api.StatusKnown, Value: v}}
	}
	unknown := func(id string) *slotPlan {
		return &slotPlan{slot: api.Slot{SlotID: id, Kind: api.KindValue, Status: api.StatusUnknown}}
	}
	tests := []struct {
		name     string
		verify   []policy.VerifyLabel
		values   []*slotPlan
		complete bool
		ids      []string
		askable  []string
	}{
		{name: "nothing to approve", values: []*slotPlan{known("memo", "hi")}, complete: true, ids: []string{"memo"}},
		{name: "each confirmation after its value, the call's last",
			verify: []policy.VerifyLabel{{ID: "verify_call", Text: "Send it?"}},
			values: []*slotPlan{known("to", "A"), known("memo", "hi"), unknown("amount")},
			ids:    []string{"to", "confirm:to", "memo", "amount", "confirm:amount", "verify_call"},
			// Only the settled value can be approved yet.
			askable: []string{"confirm:to"}},
		{name: "a complete call can be verified",
			verify: []policy.VerifyLabel{{ID: "verify_call", Text: "Send it?"}},
			values: []*slotPlan{known("memo", "hi")}, complete: true,
			ids: []string{"memo", "verify_call"}, askable: []string{"verify_call"}},
	}
	for _, tt := range tests {
		r := stepRun(pt, &definition{labels: policy.Labels{Verify: tt.verify}})
		args := map[string]any{}
		for _, p := range tt.values {
			if p.slot.Status == api.StatusKnown {
				args[p.slot.SlotID] = p.slot.Value
			}
		}
		plans, err := r.approvals(tt.values, args, tt.complete)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var ids, askable []string
		for _, p := range plans {
			ids = append(ids, p.slot.SlotID)
			if p.askable {
				askable = append(askable, p.slot.SlotID)
			}
		}
		if !slices.Equal(ids, tt.ids) {
			t.Errorf("%s: slots %q, want %q", tt.name, ids, tt.ids)
		}
		if !slices.Equal(askable, tt.askable) {
			t.Errorf("%s: askable %q, want %q", tt.name, askable, tt.askable)
		}
		if len(tt.ids) == len(tt.values) && &plans[0] != &tt.values[0] {
			t.Errorf("%s: a call with nothing to approve got a new slice", tt.name)
		}
	}
}
