package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
)

func TestReportOutput(t *testing.T) {
	ds := writeBolt(t, tempPath(t, "verdictd.db"), []dec{
		issued("rec_1", "v1", d1), issued("rec_2", "v2", d1), decided("rec_3", "ask_user", "", ""),
	}, nil)
	xs := writeExecutionsJSONL(t, tempPath(t, "executions.jsonl"), []api.ExecutionRecord{
		exe("exe_1", "v1", "rec_1", d2, api.ExecutionExecuted),
		exe("exe_2", "v1", "rec_1", d1, api.ExecutionNotExecuted),
		exe("exe_3", "v2", "rec_2", d1, api.ExecutionOutcomeUnknown),
	})
	r, err := Run(context.Background(), []Source{file(ds)}, []Source{file(xs)}, Options{})
	if err != nil {
		t.Fatal(err)
	}

	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		ds, xs,
		"DECISION RECORDS  3", "verdict_issued", "ask_user",
		"EXECUTION RECORDS  3", "outcome_unknown", "REFUSALS BY REASON", "replayed",
		"issued and executed", "OUTCOME UNKNOWN (1)", "exe_3: verdict v2",
		"ANOMALIES (1)", "arguments_digest_mismatch: execution exe_1 of verdict v1",
		"NOT CLEAN: 1 anomalies",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}

	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Clean     bool `json:"clean"`
		Anomalies []struct {
			Kind             string   `json:"kind"`
			VerdictID        string   `json:"verdict_id"`
			DecisionRecords  []string `json:"decision_records"`
			ExecutionRecords []string `json:"execution_records"`
			Message          string   `json:"message"`
		} `json:"anomalies"`
		OutcomeUnknown []struct {
			RecordID string `json:"record_id"`
		} `json:"outcome_unknown"`
		Executions struct {
			RefusalsByReason map[string]int `json:"refusals_by_reason"`
		} `json:"executions"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Clean || len(back.Anomalies) != 1 || back.Anomalies[0].Kind != "arguments_digest_mismatch" ||
		back.Anomalies[0].DecisionRecords[0] != "rec_1" || back.OutcomeUnknown[0].RecordID != "exe_3" ||
		back.Executions.RefusalsByReason["replayed"] != 1 {
		t.Errorf("json report = %s", b)
	}
}

func TestCleanReportOutput(t *testing.T) {
	ds := writeDecisionsJSONL(t, tempPath(t, "records.jsonl"), nil)
	xs := writeExecutionsJSONL(t, tempPath(t, "executions.jsonl"), nil)
	r, err := Run(context.Background(), []Source{file(ds)}, []Source{file(xs)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(text.String(), "clean: no anomaly\n") || strings.Contains(text.String(), "ANOMALIES") {
		t.Errorf("text report:\n%s", text.String())
	}
	// Empty lists are [] in JSON, never null, so a script can iterate without a check.
	b, _ := json.Marshal(r)
	for _, want := range []string{`"anomalies":[]`, `"outcome_unknown":[]`, `"in_flight":[]`, `"clean":true`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("json report lacks %s: %s", want, b)
		}
	}
}
