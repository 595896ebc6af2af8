package gates

import (
	"maps"
	"slices"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
)

func TestCollectNames(t *testing.T) {
	conds := []*policy.Condition{{ID: "balance_ok"}}
	tests := []struct {
		name          string
		declared      []string
		labelRequired []string
		cands         []api.Candidate
		answers       []string
		all, inCall   []string
	}{
		{name: "nothing"},
		{name: "declared only", declared: []string{"to", "amount"}, all: []string{"to", "amount"}},
		{name: "a label requiring a condition is not a name", declared: []string{"to"},
			labelRequired: []string{"balance_ok", "memo", "to"}, all: []string{"to", "memo"}},
		{name: "proposed names, once each, in request order", declared: []string{"to", "amount"},
			cands: []api.Candidate{{Field: "amount"}, {Field: "extra"}, {Field: "amount"}},
			all:   []string{"to", "amount", "extra"}, inCall: []string{"amount", "extra"}},
		{name: "answered names sorted, after proposed ones", declared: []string{"to", "amount"},
			cands: []api.Candidate{{Field: "to"}}, answers: []string{"zeta", "amount", "to"},
			all: []string{"to", "amount", "zeta"}, inCall: []string{"to", "amount", "zeta"}},
	}
	for _, tt := range tests {
		answers := map[string]answer{}
		for _, n := range tt.answers {
			answers[n] = answer{}
		}
		cn, seen := collectNames(callNames{isInCall: map[string]bool{}}, tt.declared, tt.labelRequired, conds, tt.cands, answers)
		if !slices.Equal(cn.all, tt.all) {
			t.Errorf("%s: all = %q, want %q", tt.name, cn.all, tt.all)
		}
		if !slices.Equal(cn.inCall, tt.inCall) {
			t.Errorf("%s: inCall = %q, want %q", tt.name, cn.inCall, tt.inCall)
		}
		for _, n := range tt.inCall {
			if !cn.isInCall[n] {
				t.Errorf("%s: isInCall[%q] = false", tt.name, n)
			}
		}
		if len(cn.isInCall) != len(tt.inCall) {
			t.Errorf("%s: isInCall has %d names, want %d", tt.name, len(cn.isInCall), len(tt.inCall))
		}
		if keys := slices.Sorted(maps.Keys(seen)); !slices.Equal(keys, slices.Sorted(slices.Values(tt.all))) {
			t.Errorf("%s: seen = %q, want every name of all", tt.name, keys)
		}
		for n, res := range seen {
			if res != nil {
				t.Errorf("%s: seen[%q] is filled in", tt.name, n)
			}
		}
	}
}

func TestPlanSlots(t *testing.T) {
	conds := []*policy.Condition{{ID: "balance_ok"}}
	tests := []struct {
		name          string
		required      []string // the selection's
		labelRequired []string
		all, inCall   []string
		slots         []string
		isRequired    []string
	}{
		{name: "nothing required, nothing proposed", all: []string{"to", "memo"}},
		{name: "required in required order, then proposed as first seen",
			required: []string{"amount", "to"}, all: []string{"to", "amount", "memo", "note", "extra"},
			inCall: []string{"extra", "memo"},
			slots:  []string{"amount", "to", "memo", "extra"}, isRequired: []string{"amount", "to"}},
		{name: "a label-required name ranks after the selection's, with the proposed ones",
			required: []string{"to"}, labelRequired: []string{"memo", "balance_ok"},
			all: []string{"to", "amount", "memo"}, inCall: []string{"amount"},
			slots: []string{"to", "amount", "memo"}, isRequired: []string{"to", "memo"}},
		{name: "a duplicate keeps its first rank",
			required: []string{"b", "a", "b"}, labelRequired: []string{"a"}, all: []string{"a", "b"},
			slots: []string{"b", "a"}, isRequired: []string{"a", "b"}},
	}
	for _, tt := range tests {
		cn := callNames{all: tt.all, inCall: tt.inCall, isInCall: map[string]bool{}}
		for _, n := range tt.inCall {
			cn.isInCall[n] = true
		}
		ss := slotSet{isSlot: make([]bool, len(cn.all)), rank: map[string]int{}}
		ss = planSlots(ss, selection{required: tt.required}, tt.labelRequired, conds, cn)
		if !slices.Equal(ss.names, tt.slots) {
			t.Errorf("%s: slots = %q, want %q", tt.name, ss.names, tt.slots)
		}
		for i, n := range tt.all {
			if want := slices.Contains(tt.slots, n); ss.isSlot[i] != want {
				t.Errorf("%s: isSlot[%q] = %v, want %v", tt.name, n, ss.isSlot[i], want)
			}
		}
		for _, n := range append(tt.all, "balance_ok") {
			if got, want := ss.required(n), slices.Contains(tt.isRequired, n); got != want {
				t.Errorf("%s: required(%q) = %v, want %v", tt.name, n, got, want)
			}
		}
	}
}

func TestAppendExtraFields(t *testing.T) {
	cn := callNames{all: []string{"to", "amount", "memo", "undeclared", "unknown"}}
	ss := slotSet{isSlot: []bool{true, false, false, false, false}}
	resolved := map[string]*resolution{
		"to":         {known: true, value: "A", source: api.SourceInstruction},
		"amount":     {known: true, value: 5, source: api.SourcePreSetData},
		"memo":       {known: true, value: "hi", source: api.SourcePreSetData},
		"undeclared": {known: true, value: 1, source: api.SourcePreSetData},
		"unknown":    {},
	}
	props := map[string]*property{"to": {}, "amount": {}, "memo": {}, "unknown": {}}
	got := appendExtraFields([]api.ExtraField{}, cn, ss, resolved, props)
	want := []api.ExtraField{{Field: "amount", Value: 5, Source: api.SourcePreSetData}, {Field: "memo", Value: "hi", Source: api.SourcePreSetData}}
	if !slices.EqualFunc(got, want, func(a, b api.ExtraField) bool {
		return a.Field == b.Field && a.Value == b.Value && a.Source == b.Source
	}) {
		t.Errorf("extra fields = %+v, want %+v", got, want)
	}
	if got := appendExtraFields([]api.ExtraField{}, callNames{}, slotSet{}, nil, nil); got == nil || len(got) != 0 {
		t.Errorf("no extra fields = %#v, want an empty list", got)
	}
}
