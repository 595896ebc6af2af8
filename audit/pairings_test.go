package audit

import (
	"context"
	"reflect"
	"testing"

	"github.com/verdictgate/verdict/api"
)

// TestPairings: with Options.Pairings the report lists what the pairing put together under each
// verdict id, the same ids its anomalies name; without it, nothing.
func TestPairings(t *testing.T) {
	ds := writeDecisionsJSONL(t, tempPath(t, "records.jsonl"), []dec{
		issued("rec_1", "v1", d1),
		decided("rec_2", "ask_user", "", ""),
		decided("rec_3", "refuse", "v3", d1),
	})
	xs := writeExecutionsJSONL(t, tempPath(t, "executions.jsonl"), []api.ExecutionRecord{
		exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted),
		exe("exe_2", "v2", "rec_9", d1, api.ExecutionExecuted),
		exe("exe_3", "v3", "rec_3", d1, api.ExecutionExecuted),
	})
	r, err := Run(context.Background(), []Source{file(ds)}, []Source{file(xs)}, Options{Pairings: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []Pairing{
		{VerdictID: "v1", Issued: true, DecisionRecords: []string{"rec_1"}, ExecutionRecords: []string{"exe_1"}},
		{VerdictID: "v2", DecisionRecords: []string{}, ExecutionRecords: []string{"exe_2"}},
		{VerdictID: "v3", DecisionRecords: []string{"rec_3"}, ExecutionRecords: []string{"exe_3"}},
	}
	if !reflect.DeepEqual(r.Pairings, want) {
		t.Errorf("pairings %+v\nwant %+v", r.Pairings, want)
	}
	if got := kinds(r); !reflect.DeepEqual(got, sortedKinds(ExecutionWithoutVerdict, DecisionNotIssued)) {
		t.Errorf("anomalies %v", got)
	}

	r, err = Run(context.Background(), []Source{file(ds)}, []Source{file(xs)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Pairings != nil {
		t.Errorf("pairings without Options.Pairings: %+v", r.Pairings)
	}
}
