package policytest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/internal/yamlpos"
)

// absent is how a diff writes what is not there.
const absent = "(none)"

// compare lists how rec differs from what e expects, in the order the members are documented.
func compare(e *Expect, rec *api.Record) []Diff {
	var out []Diff
	diff := func(path, want, got string) {
		if want != got {
			out = append(out, Diff{Path: path, Want: want, Got: got})
		}
	}
	if e.Outcome != "" {
		got := rec.Outcome
		if got != e.Outcome && rec.Gate.Kind != api.GateValue && rec.Gate.Kind != "" {
			// The gate says why a run ended where it did when the outcome alone does not.
			got += " (gate " + rec.Gate.Kind
			if rec.Gate.Detail != "" {
				got += ": " + rec.Gate.Detail
			}
			got += ")"
		}
		diff("outcome", e.Outcome, got)
	}
	if e.Gate != "" {
		diff("gate", e.Gate, rec.Gate.Kind)
	}
	slots := map[string]*api.Slot{}
	for i := range rec.Slots {
		slots[rec.Slots[i].SlotID] = &rec.Slots[i]
	}
	for _, id := range slices.Sorted(maps.Keys(e.Known)) {
		want := e.Known[id]
		_, _, withOrigin := cutFrom(want)
		diff(yamlpos.Key("known", id), want, slotState(slots[id], withOrigin))
	}
	for _, id := range slices.Sorted(maps.Keys(e.Unknown)) {
		got := slotState(slots[id], false)
		if s := slots[id]; s != nil && s.Status == api.StatusUnknown && s.Route != nil {
			got = *s.Route
		}
		diff(yamlpos.Key("unknown", id), e.Unknown[id], got)
	}
	if e.Asked != nil {
		asked := map[string]string{}
		for _, q := range rec.Questions {
			asked[q.SlotID] = q.Kind
		}
		for _, id := range slices.Sorted(maps.Keys(e.Asked)) {
			got, ok := asked[id]
			if !ok {
				got = "not asked"
			}
			diff(yamlpos.Key("asked", id), e.Asked[id], got)
		}
		for _, id := range slices.Sorted(maps.Keys(asked)) {
			if _, ok := e.Asked[id]; !ok {
				diff(yamlpos.Key("asked", id), "not asked", asked[id])
			}
		}
	}
	if e.Unmet != nil {
		got := make([]string, len(rec.Unmet))
		for i, u := range rec.Unmet {
			got[i] = u.SlotID
		}
		diff("unmet", list(e.Unmet), list(got))
	}
	if e.Checklist != nil {
		items := map[string]string{}
		for _, c := range rec.UserChecklist {
			items[c.ItemID] = checkState(c)
		}
		for _, id := range slices.Sorted(maps.Keys(e.Checklist)) {
			got, ok := items[id]
			if !ok {
				got = absent
			}
			diff(yamlpos.Key("checklist", id), e.Checklist[id], got)
		}
	}
	if e.Call != nil {
		diff("call", canonicalText([]byte(e.Call), true), canonicalText(rec.CallArguments, false))
	}
	if e.Notices != nil {
		diff("notices", list(e.Notices), list(rec.Notices))
	}
	return out
}

// slotState writes a slot the way known is written: its source (and origin), or what it is
// instead.
func slotState(s *api.Slot, withOrigin bool) string {
	switch {
	case s == nil:
		return "no such slot"
	case s.Status == api.StatusKnown:
		src, origin := "", ""
		if s.Source != nil {
			src = string(*s.Source)
		}
		if s.OriginSource != nil {
			origin = string(*s.OriginSource)
		}
		if withOrigin {
			return src + sourceFromWord + origin
		}
		return src
	case s.Status == api.StatusUnknown && s.Route != nil:
		return "unknown, route " + *s.Route
	}
	return s.Status
}

func checkState(c api.CheckResult) string {
	if c.Status != api.StatusKnown {
		return c.Status
	}
	return metWord(c.Met != nil && *c.Met)
}

// list writes a list of names in brackets, in order.
func list(s []string) string { return "[" + strings.Join(s, ", ") + "]" }

// canonicalText writes a JSON value in its canonical form (RFC 8785), so that two ways of
// writing one value compare equal; raw says v is JSON text.
func canonicalText(v any, raw bool) string {
	var b []byte
	var err error
	if text, ok := v.([]byte); raw && ok {
		b, err = canonical.Transform(text)
	} else if m, ok := v.(map[string]any); ok && m == nil {
		return "null"
	} else {
		b, err = canonical.Marshal(v)
	}
	if err != nil {
		return fmt.Sprintf("(not canonical JSON: %v)", err)
	}
	return string(b)
}
