package gates

import (
	"maps"
	"slices"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
)

// callNames is every name a run may have to settle, before the schema says which it must.
type callNames struct {
	// all lists, as first seen: the declared properties, the names [Required] labels
	// require, then the proposed and the answered names.
	all []string
	// inCall lists the names of the intended call, proposed or answered, as first seen: an
	// optional argument the model proposed is part of the call it means.
	inCall   []string
	isInCall map[string]bool
}

// collectNames lists the names a run may have to settle into cn, which holds the storage for
// them: empty, made by the caller (see valueGate). Answered names come in sorted order, so that
// the record does not depend on map iteration.
//
// The map it returns has a nil entry for each name, for the caller to fill in with the name's
// resolution: it is the set of names seen while they are collected, and one map is cheaper than
// two. It is sized for the declared names, which are usually all there is (candidates name
// declared properties): a map of up to eight is one small allocation, a larger hint several.
func collectNames(cn callNames, declared, labelRequired []string, conds []*policy.Condition, cands []api.Candidate, answers map[string]answer) (callNames, map[string]*resolution) {
	seen := make(map[string]*resolution, len(declared))
	add := func(n string) {
		if _, ok := seen[n]; !ok {
			seen[n] = nil
			cn.all = append(cn.all, n)
		}
	}
	for _, n := range declared {
		add(n)
	}
	for _, n := range labelRequired {
		if !isCondition(conds, n) {
			add(n)
		}
	}
	inCall := func(n string) {
		add(n)
		if !cn.isInCall[n] {
			cn.isInCall[n] = true
			cn.inCall = append(cn.inCall, n)
		}
	}
	for _, c := range cands {
		inCall(c.Field)
	}
	for _, n := range slices.Sorted(maps.Keys(answers)) {
		inCall(n)
	}
	return cn, seen
}

// isCondition reports whether name is one of a tool's provider conditions: a [Required] label
// naming one requires the condition, not an argument.
func isCondition(conds []*policy.Condition, name string) bool {
	return slices.ContainsFunc(conds, func(c *policy.Condition) bool { return c.ID == name })
}

// slotSet is the plan of a run: which names are slots, and in which order the record lists
// them.
type slotSet struct {
	// names are the slots: the required names in their required order, then the names of
	// the intended call as first seen.
	names []string
	// isSlot tells, for each of callNames.all, whether it is a slot; the others are settled
	// only as extra fields.
	isSlot []bool
	// rank holds each required name with its first place among the names the selection
	// requires, or len(selection.required) for a name only a [Required] label requires.
	rank map[string]int
}

// planSlots decides the slot set from the materialized selection: every name the selection
// or a [Required] label requires, and every name of the intended call. ss holds the storage for
// it, made by the caller (see valueGate): no names, isSlot as long as cn.all, an empty rank.
func planSlots(ss slotSet, sel selection, labelRequired []string, conds []*policy.Condition, cn callNames) slotSet {
	for i, n := range sel.required {
		if _, dup := ss.rank[n]; !dup {
			ss.rank[n] = i
		}
	}
	for _, n := range labelRequired {
		if _, dup := ss.rank[n]; !dup && !isCondition(conds, n) {
			ss.rank[n] = len(sel.required)
		}
	}
	for i, n := range cn.all {
		if ss.required(n) || cn.isInCall[n] {
			ss.names = append(ss.names, n)
			ss.isSlot[i] = true
		}
	}
	// Required names in their required order, then everything else as first seen.
	last := len(sel.required)
	rank := func(n string) int {
		if i, ok := ss.rank[n]; ok {
			return i
		}
		return last
	}
	slices.SortStableFunc(ss.names, func(a, b string) int { return rank(a) - rank(b) })
	return ss
}

// required reports whether the selection or a [Required] label requires name.
func (ss slotSet) required(name string) bool {
	_, ok := ss.rank[name]
	return ok
}

// appendExtraFields appends the known values of declared properties that are not slots: they
// are part of the call although nothing required or proposed them (a pre-set default).
func appendExtraFields(dst []api.ExtraField, cn callNames, ss slotSet, resolved map[string]*resolution, props map[string]*property) []api.ExtraField {
	for i, n := range cn.all {
		if ss.isSlot[i] || props[n] == nil {
			continue
		}
		if res := resolved[n]; res.known {
			dst = append(dst, api.ExtraField{Field: n, Value: res.value, Source: res.source})
		}
	}
	return dst
}
