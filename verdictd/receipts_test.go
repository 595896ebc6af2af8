package verdictd

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
)

// issueTo runs the main path to a verdict_issued record in conversation conv, the user
// answering to for the recipient.
func (e *env) issueTo(conv, to string) *record {
	e.t.Helper()
	req := func(answers ...map[string]any) map[string]any {
		r := landlord(answers...)
		r["conversation_id"] = conv
		return r
	}
	q := e.preflight(req()).question("to_account")
	answer := map[string]any{"question_id": q.QuestionID, "value": to}
	approve := e.preflight(req(answer)).question("confirm_transfer")
	var v any
	json.Unmarshal(approve.Value, &v)
	r := e.preflight(req(answer, map[string]any{"question_id": approve.QuestionID, "approved": true, "value": v}))
	if r.Outcome != "verdict_issued" {
		e.t.Fatalf("outcome %s\n%s", r.Outcome, r.raw)
	}
	return r
}

// postReceipt posts a receipt and returns the status and the answer.
func (e *env) postReceipt(receipt string) (int, api.ReceiptResult, []byte) {
	e.t.Helper()
	status, out := do(e.t, "POST", e.srv.URL+"/v1/receipts", callerToken, "application/jose", []byte(receipt))
	var res api.ReceiptResult
	json.Unmarshal(out, &res)
	return status, res, out
}

// TestReceiptReplayCannotRollBack: executions A then B of one action key, both receipts
// signed within the same second; A's receipt posted again after B's leaves B the baseline (the
// order is the record ids', not the receipts' one-second iat), and B's posted again is
// accepted without changing anything.
func TestReceiptReplayCannotRollBack(t *testing.T) {
	e := newEnv(t, envOpts{executor: true})
	a := e.issueTo("c_a", "110-222-333")
	ra := e.execute(*a.Verdict, a.CallArguments)
	b := e.issueTo("c_b", "220-555-010")
	rb := e.execute(*b.Verdict, b.CallArguments)
	if ra.status != http.StatusOK || rb.status != http.StatusOK {
		t.Fatalf("execute: %d %s / %d %s", ra.status, ra.body, rb.status, rb.body)
	}
	if *a.ActionKey != *b.ActionKey || a.RecordID >= b.RecordID {
		t.Fatalf("A %s %s, B %s %s: want one action key, A's record first", *a.ActionKey, a.RecordID, *b.ActionKey, b.RecordID)
	}
	steps := []struct {
		name     string
		receipt  string
		baseline string
		prior    bool
	}{
		{"A", ra.receipt, "applied", true},
		{"B", rb.receipt, "applied", true},
		{"A replayed", ra.receipt, "superseded", false},
		{"B again", rb.receipt, "already_applied", true},
		{"A replayed again", ra.receipt, "superseded", false},
	}
	for _, st := range steps {
		status, res, out := e.postReceipt(st.receipt)
		if status != http.StatusOK || !res.Accepted || res.Baseline != st.baseline || res.PriorState != st.prior {
			t.Fatalf("%s: %d %s, want baseline %s prior_state %v", st.name, status, out, st.baseline, st.prior)
		}
	}
	req := landlord()
	req["conversation_id"] = "c_after"
	offered, _ := e.preflight(req).slot("to_account")["offered"].(map[string]any)
	if offered["value"] != "220-555-010" {
		t.Fatalf("offered %v, want B's recipient", offered)
	}
	for label, want := range map[string]float64{"accepted": 2, "superseded": 2, "already_applied": 1} {
		if got := e.metric(`verdictd_receipts_total{result="` + label + `"}`); got != want {
			t.Errorf("receipts %s: %v, want %v", label, got, want)
		}
	}
}

// TestReceiptBatchForm: a batch that is not 1 to 64 compact tokens under {"receipts"}, with no
// other member, is refused whole with malformed_receipt, and nothing of it is applied.
func TestReceiptBatchForm(t *testing.T) {
	e := newEnv(t, envOpts{executor: true})
	a := e.issueTo("c_a", "110-222-333")
	ra := e.execute(*a.Verdict, a.CallArguments)
	if ra.status != http.StatusOK {
		t.Fatalf("execute: %d %s", ra.status, ra.body)
	}
	many := make([]string, api.MaxReceiptBatch+1)
	for i := range many {
		many[i] = ra.receipt
	}
	manyJSON, _ := json.Marshal(map[string]any{"receipts": many})
	tiny := func(n int) string { return `{"receipts": [` + strings.Repeat(`"a",`, n) + `"a"]}` }
	tests := []struct {
		name, contentType, body string
		status                  int
		code                    string
	}{
		{"empty object", "", `{}`, 400, api.CodeMalformedReceipt},
		{"no receipts", "", `{"receipts": []}`, 400, api.CodeMalformedReceipt},
		{"null", "", `{"receipts": null}`, 400, api.CodeMalformedReceipt},
		{"not an array", "", `{"receipts": "` + ra.receipt + `"}`, 400, api.CodeMalformedReceipt},
		{"unknown member", "", `{"receipts": ["` + ra.receipt + `"], "extra": 1}`, 400, api.CodeMalformedReceipt},
		{"case-varied name", "", `{"Receipts": ["` + ra.receipt + `"]}`, 400, api.CodeMalformedReceipt},
		{"repeated name", "", `{"receipts": ["` + ra.receipt + `"], "receipts": ["` + ra.receipt + `"]}`, 400, api.CodeMalformedReceipt},
		{"a non-token among tokens", "", `{"receipts": ["` + ra.receipt + `", "not a token"]}`, 400, api.CodeMalformedReceipt},
		{"a number among tokens", "", `{"receipts": ["` + ra.receipt + `", 1]}`, 400, api.CodeMalformedReceipt},
		{"an empty token", "", `{"receipts": [""]}`, 400, api.CodeMalformedReceipt},
		{"too many", "", string(manyJSON), 400, api.CodeMalformedReceipt},
		{"data after the batch", "", `{"receipts": ["` + ra.receipt + `"]} {}`, 400, api.CodeMalformedReceipt},
		{"not JSON", "", ra.receipt, 400, api.CodeMalformedReceipt},
		{"many tiny elements", "", tiny(60000), 400, api.CodeMalformedReceipt},
		{"many tiny elements, over the size limit", "", tiny(70000), 413, "body_too_large"},
		{"a JWS content type", "application/jose", `{"receipts": ["` + ra.receipt + `"]}`, 415, "unsupported_media_type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct := tt.contentType
			if ct == "" {
				ct = "application/json"
			}
			status, out := do(t, "POST", e.srv.URL+"/v1/receipts/batch", callerToken, ct, []byte(tt.body))
			if status != tt.status || !strings.Contains(string(out), `"code":"`+tt.code+`"`) {
				t.Fatalf("%d %s, want %d %s", status, out, tt.status, tt.code)
			}
		})
	}
	if got := e.metric(`verdictd_receipts_total{result="accepted"}`); got != 0 {
		t.Fatalf("receipts accepted from refused batches: %v", got)
	}
	// Without the caller token nothing is read.
	if status, _ := do(t, "POST", e.srv.URL+"/v1/receipts/batch", "", "application/json", []byte(`{"receipts": ["`+ra.receipt+`"]}`)); status != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", status)
	}
	// The same receipt twice in one batch: applied once, the other already applied (in either
	// order: they are decided concurrently).
	body, _ := json.Marshal(api.ReceiptBatch{Receipts: []string{ra.receipt, ra.receipt}})
	status, out := do(t, "POST", e.srv.URL+"/v1/receipts/batch", callerToken, "application/json", body)
	var got api.ReceiptBatchResult
	if err := json.Unmarshal(out, &got); status != http.StatusOK || err != nil || len(got.Results) != 2 {
		t.Fatalf("%d %s", status, out)
	}
	seen := map[string]int{}
	for _, it := range got.Results {
		if it.Status != http.StatusOK || it.Result == nil {
			t.Fatalf("%s", out)
		}
		seen[it.Result.Baseline]++
	}
	if seen["applied"] != 1 || seen["already_applied"] != 1 {
		t.Fatalf("baselines %v, want one applied and one already_applied\n%s", seen, out)
	}
}
