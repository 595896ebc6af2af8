package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

// deferredUses counts the verdicts each deferred record was triggered to, from the decision
// records alone: a trigger record names its deferred record and the number of verdicts the
// policy allowed it (api.Occurrence). A trigger record written before records named their
// deferred record (phase at_trigger, a timing other than immediate, no deferred member) is
// counted against the latest deferred record of its action key before it, and a one-off
// timing allows it one verdict.
type deferredUses struct {
	timing   map[string]string        // deferred record id → when_case
	byKey    map[string][]string      // action key → deferred record ids
	verdicts map[string][]trigger     // deferred record id → verdicts triggered from it
	unnamed  map[string][]unnamedTrig // action key → trigger verdicts naming no deferred record
}

type trigger struct {
	recordID string
	allowed  int // 0: not bounded, or not known
}

type unnamedTrig struct {
	recordID, whenCase string
}

// triggerRecord is what the count reads of a deferred or trigger record.
type triggerRecord struct {
	// Pointers, as encoding/json reads a repeated member set to null: the record's last word,
	// which a plain string would not take.
	ActionKey *string `json:"action_key"`
	Phase     *string `json:"phase"`
	Fixed     *struct {
		WhenCase *string `json:"c1_when_case"`
	} `json:"fixed"`
	Occurrence *api.Occurrence `json:"deferred"`
}

// deferredTimings are the bytes of a record whose timing is deferred, as verdictd writes them.
var deferredTimings = [...][]byte{
	[]byte(`"c1_when_case":"scheduled"`), []byte(`"c1_when_case":"conditional"`), []byte(`"c1_when_case":"recurring"`),
}

// mayBeTrigger reports whether a verdict record can be a trigger run's: it holds a deferred
// member, or a deferred timing. Most verdicts are an immediate request's one run, and are not
// decoded.
func mayBeTrigger(record []byte) bool {
	return bytes.Contains(record, []byte(`"deferred":{`)) ||
		slices.ContainsFunc(deferredTimings[:], func(t []byte) bool { return bytes.Contains(record, t) })
}

// add notes d if it is a deferred record or a verdict of a trigger run. Other records are not
// decoded.
func (u *deferredUses) add(d *store.Decision) error {
	switch {
	case d.Outcome == api.OutcomeDeferred:
	case d.Outcome != api.OutcomeVerdictIssued || !mayBeTrigger(d.Record):
		return nil
	}
	var r triggerRecord
	if err := json.Unmarshal(d.Record, &r); err != nil {
		return fmt.Errorf("decision record %s: %w", d.RecordID, err)
	}
	var key, wc string
	if r.ActionKey != nil {
		key = *r.ActionKey
	}
	if r.Fixed != nil && r.Fixed.WhenCase != nil {
		wc = *r.Fixed.WhenCase
	}
	if u.timing == nil {
		u.timing, u.byKey = map[string]string{}, map[string][]string{}
		u.verdicts, u.unnamed = map[string][]trigger{}, map[string][]unnamedTrig{}
	}
	switch {
	case d.Outcome == api.OutcomeDeferred:
		u.timing[d.RecordID] = wc
		u.byKey[key] = append(u.byKey[key], d.RecordID)
	case r.Phase == nil || *r.Phase != api.PhaseAtTrigger:
	case r.Occurrence != nil:
		u.verdicts[r.Occurrence.RecordID] = append(u.verdicts[r.Occurrence.RecordID], trigger{d.RecordID, r.Occurrence.Allowed})
	case wc != "" && wc != "immediate":
		u.unnamed[key] = append(u.unnamed[key], unnamedTrig{d.RecordID, wc})
	}
	return nil
}

// check reports every deferred record with more verdicts than it was allowed: the fewest any
// of its trigger records says the policy allowed, and one for a one-off timing.
func (u *deferredUses) check() []Anomaly {
	for key, ts := range u.unnamed {
		ids := slices.Clone(u.byKey[key])
		slices.Sort(ids) // record ids sort by time
		for _, t := range ts {
			i, _ := slices.BinarySearch(ids, t.recordID)
			if i == 0 {
				continue // no deferred record of the key before it in these sources
			}
			u.verdicts[ids[i-1]] = append(u.verdicts[ids[i-1]], trigger{recordID: t.recordID})
		}
	}
	var out []Anomaly
	for _, id := range slices.Sorted(maps.Keys(u.verdicts)) {
		ts := u.verdicts[id]
		limit := 0
		if wc, ok := u.timing[id]; ok && wc != "recurring" {
			limit = 1
		}
		for _, t := range ts {
			if t.allowed > 0 && (limit == 0 || t.allowed < limit) {
				limit = t.allowed
			}
		}
		if limit == 0 || len(ts) <= limit {
			continue
		}
		ids := each(ts, func(t trigger) string { return t.recordID })
		slices.Sort(ids)
		out = append(out, Anomaly{
			Kind:            DeferredOverused,
			DecisionRecords: append([]string{id}, ids...),
			Message: fmt.Sprintf("deferred record %s was triggered to %d verdicts, %d allowed: %s",
				id, len(ts), limit, strings.Join(ids, ", ")),
		})
	}
	return out
}
