package verdictd

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/verdict"
)

// TestMainPath is the product's main path over real components: a preflight on the real bank
// server asks for the unknown recipient, the answer comes back with its question id, the whole
// call is approved, the verdict binds exactly the record, and a real executor runs it.
func TestMainPath(t *testing.T) {
	e := newEnv(t, envOpts{executor: true})

	r1 := e.preflight(landlord())
	if r1.Outcome != "ask_user" || r1.Phase == nil || *r1.Phase != "at_trigger" {
		t.Fatalf("first run: outcome %s, want ask_user at_trigger\n%s", r1.Outcome, r1.raw)
	}
	q := r1.question("to_account")
	if q.QuestionID == "" {
		t.Fatalf("no question for to_account: %s", r1.raw)
	}
	if r1.Verdict != nil || r1.VerdictID != nil {
		t.Fatal("a verdict on an ask_user record")
	}

	r2 := e.preflight(landlord(map[string]any{"question_id": q.QuestionID, "value": "110-222-333"}))
	if r2.Outcome != "ask_user" {
		t.Fatalf("second run: outcome %s\n%s", r2.Outcome, r2.raw)
	}
	if s := r2.slot("to_account"); s["status"] != "known" || s["source"] != "user_answer" {
		t.Fatalf("to_account after the answer: %v", s)
	}
	approve := r2.question("confirm_transfer")
	if approve.QuestionID == "" || approve.Kind != "approval" {
		t.Fatalf("no approval question for the whole call: %s", r2.raw)
	}
	var approveValue any
	json.Unmarshal(approve.Value, &approveValue)

	r3 := e.preflight(landlord(
		map[string]any{"question_id": q.QuestionID, "value": "110-222-333"},
		map[string]any{"question_id": approve.QuestionID, "approved": true, "value": approveValue},
	))
	if r3.Outcome != "verdict_issued" || r3.Verdict == nil || r3.VerdictID == nil {
		t.Fatalf("third run: outcome %s\n%s", r3.Outcome, r3.raw)
	}

	// The verdict verifies against the published JWKS and binds exactly the record.
	status, jwks := do(t, "GET", e.srv.URL+"/.well-known/jwks.json", "", "", nil)
	if status != http.StatusOK {
		t.Fatalf("jwks: %d", status)
	}
	set, err := keys.ParseJWKS(jwks)
	if err != nil {
		t.Fatal(err)
	}
	argsDigest, err := canonical.DigestJSON(r3.CallArguments)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := verdict.Verify(*r3.Verdict, verdict.Expectation{
		Issuers:         []verdict.TrustedIssuer{{ID: issuerID, Keys: set}},
		Audience:        execID,
		ToolDigest:      func(server, tool string) (string, bool) { return *r3.ToolSchemaDigest, true },
		ArgumentsDigest: argsDigest,
	})
	if err != nil {
		t.Fatalf("verify verdict: %v", err)
	}
	want := map[string][2]string{
		"jti":  {claims.ID, *r3.VerdictID},
		"sub":  {claims.Subject, r3.Principal},
		"srv":  {claims.Server, r3.Server},
		"tool": {claims.Tool, r3.Tool},
		"tsd":  {claims.ToolDigest, *r3.ToolSchemaDigest},
		"pol":  {claims.Policy, r3.PolicyVersion},
		"args": {claims.Arguments, *r3.ArgumentsDigest},
		"akey": {claims.ActionKey, *r3.ActionKey},
		"rec":  {claims.Record, r3.RecordID},
	}
	for name, v := range want {
		if v[0] != v[1] {
			t.Errorf("claim %s = %q, record says %q", name, v[0], v[1])
		}
	}
	if claims.Arguments != argsDigest {
		t.Errorf("args claim %s is not the digest of call_arguments %s", claims.Arguments, argsDigest)
	}
	if claims.Phase != "at_trigger" || claims.Expiry-claims.IssuedAt != 60 {
		t.Errorf("phase %s, ttl %d", claims.Phase, claims.Expiry-claims.IssuedAt)
	}
	if !slices.Equal(claims.Audience, []string{execID}) {
		t.Errorf("aud %v", claims.Audience)
	}
	if len(claims.Slots) != len(r3.Slots) {
		t.Errorf("%d slot claims for %d slots", len(claims.Slots), len(r3.Slots))
	}
	for _, sl := range claims.Slots {
		if sl.Status == "unknown" {
			t.Errorf("verdict carries an unknown slot %s", sl.ID)
		}
	}

	// The stored record is the response, verdict included.
	status, stored := do(t, "GET", e.srv.URL+"/v1/records/"+r3.RecordID, adminToken, "", nil)
	if status != http.StatusOK || string(stored) != string(r3.raw) {
		t.Fatalf("stored record differs from the response (%d)\n%s\n%s", status, stored, r3.raw)
	}

	// A real executor runs it, once.
	res := e.execute(*r3.Verdict, r3.CallArguments)
	if res.status != http.StatusOK || res.decision != "executed" || res.receipt == "" {
		t.Fatalf("execute: %d %s", res.status, res.body)
	}
	if again := e.execute(*r3.Verdict, r3.CallArguments); again.status != http.StatusConflict {
		t.Fatalf("replayed verdict: %d %s", again.status, again.body)
	}

	// The contract's series, with no principal, value or nonce in any label.
	_, metrics := do(t, "GET", e.srv.URL+"/metrics", "", "", nil)
	for _, series := range []string{
		`verdictd_preflight_total{outcome="ask_user"} 2`,
		`verdictd_preflight_total{outcome="verdict_issued"} 1`,
		`verdictd_verdicts_issued_total 1`,
		`verdictd_preflight_duration_seconds_count 3`,
		`verdictd_slots_total{source="user_answer",status="known"}`,
		`verdictd_routes_total{route="ask_user"}`,
		`verdictd_measurement_failures_total 0`,
		`verdictd_policy_info{version="2026-11-30.1"} 1`,
		`verdictd_policy_reloads_total{result="error"} 0`,
		`go_goroutines`,
		`process_open_fds`,
	} {
		if !strings.Contains(string(metrics), series) {
			t.Errorf("metrics lack %s", series)
		}
	}
	for _, secret := range []string{"u_01", "110-222-333", *r3.VerdictID} {
		if strings.Contains(string(metrics), secret) {
			t.Errorf("metrics carry %q", secret)
		}
	}
}

type execResult struct {
	status   int
	decision string
	receipt  string
	body     []byte
}

func (e *env) execute(token string, args json.RawMessage) execResult {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"verdict": token, "arguments": args})
	status, out := do(e.t, "POST", e.exec.URL+"/v1/execute", callerToken, "application/json", body)
	var resp struct {
		Execution struct {
			Decision string `json:"execution_decision"`
		} `json:"execution"`
		Receipt string `json:"receipt"`
	}
	json.Unmarshal(out, &resp)
	return execResult{status: status, decision: resp.Execution.Decision, receipt: resp.Receipt, body: out}
}

// issue runs the main path to a verdict_issued record.
func (e *env) issue(ctx context.Context) *record {
	e.t.Helper()
	r1 := e.preflight(landlord())
	q := r1.question("to_account")
	r2 := e.preflight(landlord(map[string]any{"question_id": q.QuestionID, "value": "110-222-333"}))
	approve := r2.question("confirm_transfer")
	var v any
	json.Unmarshal(approve.Value, &v)
	r3 := e.preflight(landlord(
		map[string]any{"question_id": q.QuestionID, "value": "110-222-333"},
		map[string]any{"question_id": approve.QuestionID, "approved": true, "value": v},
	))
	if r3.Outcome != "verdict_issued" {
		e.t.Fatalf("outcome %s\n%s", r3.Outcome, r3.raw)
	}
	return r3
}
