package audit

import (
	"context"
	"slices"
	"testing"

	"github.com/verdictgate/verdict/api"
)

// TestConflictingCopiesAreReported gives two sources copies of one record
// that cannot both be true, in both orders. Whichever copy the audit
// keeps, the disagreement itself must be reported: keeping one silently
// can drop an attempt (a started record read as a refusal) or pair an
// execution with a decision the other source contradicts.
func TestConflictingCopiesAreReported(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		decs       [2][]dec
		execs      [2][]api.ExecutionRecord
		wantFields []string
	}{
		{
			name: "a started attempt and a refusal under one record id",
			decs: [2][]dec{{issued("rec_1", "v1", d1)}, nil},
			execs: [2][]api.ExecutionRecord{
				{exe("exe_1", "v1", "rec_1", d1, api.ExecutionStarted)},
				{exe("exe_1", "v1", "rec_1", d1, api.ExecutionNotExecuted)},
			},
			wantFields: []string{"execution_decision"},
		},
		{
			name:       "an executed decision with two argument digests",
			decs:       [2][]dec{{issued("rec_1", "v1", d1)}, {issued("rec_1", "v1", d2)}},
			execs:      [2][]api.ExecutionRecord{{exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted)}, nil},
			wantFields: []string{"arguments_digest"},
		},
		{
			name:       "an executed decision with two principals",
			decs:       [2][]dec{{issued("rec_1", "v1", d1)}, {issued("rec_1", "v1", d1).with("principal", "u_02")}},
			execs:      [2][]api.ExecutionRecord{{exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted)}, nil},
			wantFields: []string{"principal"},
		},
		{
			name: "a started attempt and a refusal other than a call never sent",
			decs: [2][]dec{{issued("rec_1", "v1", d1)}, nil},
			execs: [2][]api.ExecutionRecord{
				{exe("exe_1", "v1", "rec_1", d1, api.ExecutionStarted)},
				{refusedOn(exe("exe_1", "v1", "rec_1", d1, api.ExecutionNotExecuted), "expired", "executor-bank")},
			},
			wantFields: []string{"execution_decision"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ds, xs []Source
			for i := range 2 {
				ds = append(ds, file(writeDecisionsJSONL(t, tempPath(t, "d.jsonl"), tc.decs[i])))
				xs = append(xs, file(writeExecutionsJSONL(t, tempPath(t, "x.jsonl"), tc.execs[i])))
			}
			for _, rev := range []bool{false, true} {
				ds, xs := slices.Clone(ds), slices.Clone(xs)
				if rev {
					slices.Reverse(ds)
					slices.Reverse(xs)
				}
				r, err := Run(ctx, ds, xs, Options{})
				if err != nil {
					t.Fatal(err)
				}
				var found *Anomaly
				for i := range r.Anomalies {
					if r.Anomalies[i].Kind == ConflictingRecords {
						found = &r.Anomalies[i]
					}
				}
				if found == nil || r.Clean {
					t.Fatalf("reversed %v: no conflicting_records; anomalies %+v", rev, r.Anomalies)
				}
				for _, f := range tc.wantFields {
					if !slices.Contains(found.Fields, f) {
						t.Errorf("reversed %v: fields %v, want %s", rev, found.Fields, f)
					}
				}
			}
		})
	}
}

// TestStartedThenNeverSent: a started record read in one source, and in another finished as
// not_executed because its request never reached the server, is one record: no conflict, the
// finished copy kept whatever the order, and no attempt left started.
func TestStartedThenNeverSent(t *testing.T) {
	ctx := context.Background()
	started := exe("exe_1", "v1", "rec_1", d1, api.ExecutionStarted)
	unsent := refusedOn(exe("exe_1", "v1", "rec_1", d1, api.ExecutionNotExecuted), api.ExecutionReasonUpstreamUnavailable, "executor-bank")
	ds := []Source{file(writeDecisionsJSONL(t, tempPath(t, "d.jsonl"), []dec{issued("rec_1", "v1", d1)}))}
	xs := []Source{
		file(writeExecutionsJSONL(t, tempPath(t, "x.jsonl"), []api.ExecutionRecord{started})),
		file(writeExecutionsJSONL(t, tempPath(t, "x.jsonl"), []api.ExecutionRecord{unsent})),
	}
	for _, rev := range []bool{false, true} {
		xs := slices.Clone(xs)
		if rev {
			slices.Reverse(xs)
		}
		r, err := Run(ctx, ds, xs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Clean || len(r.InFlight) != 0 {
			t.Fatalf("reversed %v: anomalies %+v, in flight %+v", rev, r.Anomalies, r.InFlight)
		}
		if r.Executions.RefusalsByReason[api.ExecutionReasonUpstreamUnavailable] != 1 || r.Pairs.IssuedNotExecuted != 1 {
			t.Errorf("reversed %v: executions %+v, pairs %+v", rev, r.Executions, r.Pairs)
		}
	}
}
