package audit

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

// refusedOn returns x refused with reason on executor.
func refusedOn(x api.ExecutionRecord, reason, executor string) api.ExecutionRecord {
	x.Reason, x.ExecutorID = reason, executor
	return x
}

// TestConsumedNotStarted: the audit tells a verdict issued and never presented from one
// consumed and never started, as far as the records can: a refusal that says the verdict was
// consumed (replayed, consumed_not_started) with nothing on record for the consume is an
// anomaly until a record accounts for it, and a consumed_without_start record does.
func TestConsumedNotStarted(t *testing.T) {
	ctx := context.Background()
	decs := []dec{issued("rec_1", "v1", d1), issued("rec_2", "v2", d1), issued("rec_3", "v3", d1)}
	replayedOnB := refusedOn(exe("exe_r1", "v1", "rec_1", d1, api.ExecutionNotExecuted), "replayed", "executor-b")
	unstartedOnA := refusedOn(exe("exe_u1", "v1", "rec_1", d1, api.ExecutionNotExecuted), store.ReasonConsumedWithoutStart, "executor-a")
	for _, tc := range []struct {
		name      string
		execs     []api.ExecutionRecord
		anomalies []Kind
		pairs     PairCounts
		listed    int
	}{
		{
			name:  "issued, never presented",
			pairs: PairCounts{IssuedNotExecuted: 3},
		},
		{
			name:      "a replay refused, and no record of the consume anywhere",
			execs:     []api.ExecutionRecord{replayedOnB},
			anomalies: []Kind{ConsumedUnaccounted},
			pairs:     PairCounts{IssuedNotExecuted: 3},
		},
		{
			name:      "refused as consumed_not_started, the executor's record missing",
			execs:     []api.ExecutionRecord{refusedOn(replayedOnB, "consumed_not_started", "executor-b")},
			anomalies: []Kind{ConsumedUnaccounted},
			pairs:     PairCounts{IssuedNotExecuted: 3},
		},
		{
			name:   "the consuming executor's reconciliation accounts for it",
			execs:  []api.ExecutionRecord{replayedOnB, unstartedOnA},
			pairs:  PairCounts{IssuedNotExecuted: 2, ConsumedNotStarted: 1},
			listed: 1,
		},
		{
			name:   "recorded, never presented again",
			execs:  []api.ExecutionRecord{unstartedOnA},
			pairs:  PairCounts{IssuedNotExecuted: 2, ConsumedNotStarted: 1},
			listed: 1,
		},
		{
			name:  "a replay of a verdict that ran",
			execs: []api.ExecutionRecord{exe("exe_2", "v2", "rec_2", d1, api.ExecutionExecuted), refusedOn(exe("exe_r2", "v2", "rec_2", d1, api.ExecutionNotExecuted), "replayed", "executor-b")},
			pairs: PairCounts{Paired: 1, IssuedNotExecuted: 2},
		},
		{
			name: "a call that never reached the server accounts for its consume",
			execs: []api.ExecutionRecord{refusedOn(exe("exe_s1", "v1", "rec_1", d1, api.ExecutionNotExecuted), api.ExecutionReasonUpstreamUnavailable, "executor-a"),
				replayedOnB},
			pairs: PairCounts{IssuedNotExecuted: 3},
		},
		{
			name:  "an unavailable store's refusal says nothing about a consume",
			execs: []api.ExecutionRecord{refusedOn(exe("exe_n3", "v3", "rec_3", d1, api.ExecutionNotExecuted), "nonce_store_unavailable", "executor-a")},
			pairs: PairCounts{IssuedNotExecuted: 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(ctx,
				[]Source{file(writeDecisionsJSONL(t, tempPath(t, "d.jsonl"), decs))},
				[]Source{file(writeExecutionsJSONL(t, tempPath(t, "x.jsonl"), tc.execs))}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := kinds(r)
			if len(got) != len(tc.anomalies) || (len(got) > 0 && got[0] != tc.anomalies[0]) {
				t.Fatalf("anomalies %+v, want %v", r.Anomalies, tc.anomalies)
			}
			if r.Clean != (len(tc.anomalies) == 0) {
				t.Errorf("clean %v with %d anomalies", r.Clean, len(got))
			}
			if r.Pairs != tc.pairs {
				t.Errorf("pairs %+v, want %+v", r.Pairs, tc.pairs)
			}
			if len(r.ConsumedNotStarted) != tc.listed {
				t.Errorf("consumed, never started: %+v, want %d", r.ConsumedNotStarted, tc.listed)
			}
			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if tc.listed > 0 && !strings.Contains(text.String(), "CONSUMED, NEVER STARTED (1)") {
				t.Errorf("text report:\n%s", text.String())
			}
		})
	}
}
