package verdictd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/policy"
)

// TestDraftedMemoThroughVerdictd: with the memo marked drafted, verdictd asks to review the
// model's memo in full (records checked against the contract's schema), issues a verdict only
// once that exact memo is approved, binds it in the call, and a masked export hides it.
func TestDraftedMemoThroughVerdictd(t *testing.T) {
	pol := strings.Replace(bankPolicy, `    notices: ["Check the recipient."]`,
		"    drafted: [memo]\n    notices: [\"Check the recipient.\"]", 1)
	if pol == bankPolicy {
		t.Fatal("the bank policy has no notices line to mark the memo after")
	}
	e := newEnv(t, envOpts{policy: pol})
	const memo = "December rent. Please also send 900 to 999-888-777."
	req := landlord()
	req["candidates"] = append(req["candidates"].([]map[string]any), map[string]any{"field": "memo", "value": memo})

	first := e.preflight(req)
	to, review := first.question("to_account"), first.question("memo")
	if review.Kind != "review_draft" || string(review.Value) != `"`+memo+`"` {
		t.Fatalf("memo question %+v\n%s", review, first.raw)
	}
	if s := first.slot("memo"); s["status"] != "unknown" || s["draft"] == nil {
		t.Fatalf("memo slot %v", s)
	}

	req["user_answers"] = []map[string]any{
		{"question_id": to.QuestionID, "value": "110-222-333"},
		{"question_id": review.QuestionID, "approved": true, "value": memo},
	}
	// The tool's [Verify] approval of the whole call comes once every value is known.
	verify := e.preflight(req).question("confirm_transfer")
	if verify.Kind != "approval" {
		t.Fatal("no approval of the call was asked")
	}
	var digest string
	if err := json.Unmarshal(verify.Value, &digest); err != nil {
		t.Fatal(err)
	}
	req["user_answers"] = append(req["user_answers"].([]map[string]any),
		map[string]any{"question_id": verify.QuestionID, "approved": true, "value": digest})
	rec := e.preflight(req)
	if rec.Outcome != "verdict_issued" {
		t.Fatalf("outcome %s\n%s", rec.Outcome, rec.raw)
	}
	if s := rec.slot("memo"); s["status"] != "known" || s["source"] != "reviewed_draft" || s["value"] != memo {
		t.Fatalf("memo slot %v", s)
	}
	var call map[string]any
	if err := json.Unmarshal(rec.CallArguments, &call); err != nil {
		t.Fatal(err)
	}
	if call["memo"] != memo || call["to_account"] != "110-222-333" {
		t.Fatalf("call %s", rec.CallArguments)
	}

	// The draft changed after its review: the approval is void and the new memo is asked.
	req["candidates"].([]map[string]any)[1]["value"] = memo + " Thanks!"
	changed := e.preflight(req)
	if changed.Outcome != "ask_user" || changed.slot("memo")["status"] != "unknown" ||
		len(changed.RejectedAnswers) != 1 || changed.RejectedAnswers[0].Reason != "approval_value_mismatch" {
		t.Fatalf("changed draft: %s", changed.raw)
	}

	status, body := do(t, "GET", e.srv.URL+"/v1/records?mask=1&verdict_id="+*rec.VerdictID, adminToken, "", nil)
	if status != http.StatusOK || bytes.Contains(body, []byte("December rent")) || !bytes.Contains(body, []byte(rec.RecordID)) {
		t.Fatalf("masked export leaks the draft or lost the record: %d %s", status, body)
	}
}

// A drafted entry naming no argument of the tool is refused on reload like a fields typo: in
// force, the field it meant would be grounded like any other, and its draft never reviewed.
func TestPolicyReloadRefusesDraftedTypo(t *testing.T) {
	e := newEnv(t, envOpts{})
	if err := e.svc.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	typo := strings.Replace(bankPolicy, "2026-11-30.1", "2026-12-01.1", 1)
	typo = strings.Replace(typo, `    notices: ["Check the recipient."]`, "    drafted: [meno]\n    notices: [\"Check the recipient.\"]", 1)
	e.writePolicy(typo, "")
	err := e.svc.Reload(context.Background())
	var pe *policy.Error
	if !errors.As(err, &pe) || len(pe.Problems) != 1 {
		t.Fatalf("reload of a drafted typo: %v", err)
	}
	if p := pe.Problems[0]; p.Path != `tools["bank/transfer"]` || !strings.Contains(p.Msg, `drafted meno names no argument of the tool (did you mean "memo"?)`) {
		t.Fatalf("problem: %s", p)
	}
	if v := e.svc.PolicyVersion(); v != "2026-11-30.1" {
		t.Fatalf("the typo was put in force: %s", v)
	}
}
