package gates

import (
	"bytes"
	"slices"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
)

// selection is the outcome of slot materialization.
type selection struct {
	gateKind string     // "" when the required set is decided
	required []string   // the required slot names, in order
	options  [][]string // branch options, for branch kinds
	matched  []int      // complete branches, for branch_conflict
}

// knownValues answers whether an argument has a known value, and which.
type knownValues func(name string) (any, bool)

// materialize decides the required slot set from the shape and the grounded partial state.
// Only known values select branches; proposed names are slots whichever branch they belong to,
// and if that completes two oneOf branches the call is a conflict.
func (s *shape) materialize(known knownValues, isInCall map[string]bool, chosen []string) selection {
	has := func(n string) bool { _, ok := known(n); return ok }
	sel := selection{required: slices.Clone(s.base)}
	// Membership by map: a definition may list many names in many branches.
	isRequired := make(map[string]bool, len(sel.required))
	for _, n := range sel.required {
		isRequired[n] = true
	}
	add := func(names ...string) {
		for _, n := range names {
			if !isRequired[n] {
				isRequired[n] = true
				sel.required = append(sel.required, n)
			}
		}
	}
	if s.combo != "" {
		var complete, partial []int
		for i, b := range s.branches {
			n := 0
			for _, name := range b {
				if has(name) {
					n++
				}
			}
			switch {
			case n == len(b):
				complete = append(complete, i)
			case n > 0:
				partial = append(partial, i)
			}
		}
		var picked []int
		switch {
		case s.combo == "oneOf" && len(complete) > 1:
			return selection{gateKind: api.GateBranchConflict, options: s.branches, matched: complete}
		case len(complete) > 0:
			picked = complete // anyOf: every complete branch is acceptable
		case len(partial) == 1:
			picked = partial
		default:
			for i, b := range s.branches {
				if slices.Equal(b, chosen) {
					picked = []int{i}
				}
			}
		}
		if picked == nil {
			return selection{gateKind: api.GateBranchUnresolved, options: s.branches}
		}
		for _, i := range picked {
			add(s.branches[i]...)
		}
	}
	if s.ifProp != "" {
		add(s.ifProp)
		if v, ok := known(s.ifProp); ok {
			if slices.ContainsFunc(s.ifValues, func(c any) bool { return sameJSON(v, c) }) {
				add(s.then...)
			} else {
				add(s.els...)
			}
		}
	}
	if s.combo == "oneOf" {
		// Everything that will be in the call: required slots plus proposed and known names.
		var matched []int
		for i, b := range s.branches {
			all := true
			for _, name := range b {
				if !isRequired[name] && !isInCall[name] && !has(name) {
					all = false
					break
				}
			}
			if all {
				matched = append(matched, i)
			}
		}
		if len(matched) > 1 {
			return selection{gateKind: api.GateBranchConflict, options: s.branches, matched: matched}
		}
	}
	return sel
}

// sameJSON compares two JSON values by their canonical form, so 1 and 1.0 are equal and key
// order does not matter.
func sameJSON(a, b any) bool {
	ca, err1 := canonical.Marshal(a)
	cb, err2 := canonical.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}
