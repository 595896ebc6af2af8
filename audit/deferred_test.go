package audit

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

// TestDeferredOverused: a deferred record triggered to more verdicts than it was allowed is an
// anomaly, whether its trigger records name it (and what the policy allowed) or predate that
// member and are counted against the latest deferred record of their action key; immediate
// requests, also at_trigger, are never counted.
func TestDeferredOverused(t *testing.T) {
	deferredRec := func(id, key, when string) dec {
		return decided(id, "deferred", "", "").with("action_key", key, "phase", "at_instruction",
			"fixed", map[string]any{"c1_when_case": when})
	}
	triggered := func(id, key, when, deferredID string, occurrence, allowed int) dec {
		d := issued(id, "v"+id, "sha256:"+id).with("action_key", key, "fixed", map[string]any{"c1_when_case": when})
		if deferredID != "" {
			d = d.with("deferred", map[string]any{"record_id": deferredID, "occurrence": occurrence, "allowed": allowed})
		}
		return d
	}
	tests := []struct {
		name string
		decs []dec
		want [][]string // the decision records of each anomaly
	}{
		{"one-off triggered once", []dec{
			deferredRec("rec_01", "k", "scheduled"),
			triggered("rec_02", "k", "scheduled", "rec_01", 1, 1),
		}, nil},
		{"one-off triggered three times", []dec{
			deferredRec("rec_01", "k", "scheduled"),
			triggered("rec_02", "k", "scheduled", "rec_01", 1, 1),
			triggered("rec_03", "k", "scheduled", "rec_01", 1, 1),
			triggered("rec_04", "k", "scheduled", "rec_01", 2, 1),
		}, [][]string{{"rec_01", "rec_02", "rec_03", "rec_04"}}},
		{"records without the deferred member", []dec{
			deferredRec("rec_01", "k", "conditional"),
			triggered("rec_02", "k", "conditional", "", 0, 0),
			deferredRec("rec_03", "k", "conditional"), // deferred again: a new record
			triggered("rec_04", "k", "conditional", "", 0, 0),
			triggered("rec_05", "k", "conditional", "", 0, 0),
		}, [][]string{{"rec_03", "rec_04", "rec_05"}}},
		{"recurring within its count", []dec{
			deferredRec("rec_01", "k", "recurring"),
			triggered("rec_02", "k", "recurring", "rec_01", 1, 2),
			triggered("rec_03", "k", "recurring", "rec_01", 2, 2),
		}, nil},
		{"recurring past its count", []dec{
			deferredRec("rec_01", "k", "recurring"),
			triggered("rec_02", "k", "recurring", "rec_01", 1, 2),
			triggered("rec_03", "k", "recurring", "rec_01", 2, 2),
			triggered("rec_04", "k", "recurring", "rec_01", 3, 2),
		}, [][]string{{"rec_01", "rec_02", "rec_03", "rec_04"}}},
		{"recurring without a bound", []dec{
			deferredRec("rec_01", "k", "recurring"),
			triggered("rec_02", "k", "recurring", "rec_01", 1, 0),
			triggered("rec_03", "k", "recurring", "rec_01", 2, 0),
		}, nil},
		{"immediate requests", []dec{
			triggered("rec_01", "k", "immediate", "", 0, 0),
			triggered("rec_02", "k", "immediate", "", 0, 0),
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decs := writeDecisionsJSONL(t, tempPath(t, "d.jsonl"), tt.decs)
			execs := writeExecutionsJSONL(t, tempPath(t, "x.jsonl"), nil)
			r, err := Run(context.Background(), []Source{file(decs)}, []Source{file(execs)}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for _, a := range r.Anomalies {
				if a.Kind != DeferredOverused {
					t.Fatalf("unexpected anomaly %s: %s", a.Kind, a.Message)
				}
				got = append(got, a.DecisionRecords)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || r.Clean != (len(tt.want) == 0) {
				t.Fatalf("anomalies %v (clean %v), want %v", got, r.Clean, tt.want)
			}
			if !slices.Equal(kinds(r), sortedKinds(slices.Repeat([]Kind{DeferredOverused}, len(tt.want))...)) {
				t.Fatalf("kinds %v", kinds(r))
			}
		})
	}
}

// TestTriggerRecordLastWord: a record that repeats a member is read as encoding/json reads it,
// the last value standing, null included: a trigger whose last phase is null is no trigger, and
// one whose last action key is null counts under no key.
func TestTriggerRecordLastWord(t *testing.T) {
	var u deferredUses
	add := func(id, outcome, record string) {
		t.Helper()
		if err := u.add(&store.Decision{DecisionMeta: store.DecisionMeta{RecordID: id, Outcome: outcome}, Record: []byte(record)}); err != nil {
			t.Fatal(err)
		}
	}
	add("r1", api.OutcomeDeferred, `{"action_key":"k","phase":"at_instruction","fixed":{"c1_when_case":"scheduled"}}`)
	for _, id := range []string{"r2", "r3"} {
		add(id, api.OutcomeVerdictIssued, `{"action_key":"k","phase":"at_trigger","phase":null,"fixed":{"c1_when_case":"scheduled"}}`)
		add(id+"k", api.OutcomeVerdictIssued, `{"action_key":"k","action_key":null,"phase":"at_trigger","fixed":{"c1_when_case":"scheduled"}}`)
		add(id+"f", api.OutcomeVerdictIssued, `{"action_key":"k","phase":"at_trigger","fixed":{"c1_when_case":"scheduled"},"fixed":null}`)
	}
	if got := u.check(); len(got) != 0 {
		t.Fatalf("anomalies %+v, want none: no record above is a trigger of r1", got)
	}
}
