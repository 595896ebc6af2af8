package verdictd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/verdict"
)

// startHTTPBank runs the bank over streamable HTTP on addr ("127.0.0.1:0" picks a port) and
// returns its endpoint and a stop function.
func startHTTPBank(t *testing.T, addr, state string, extra ...string) (string, func()) {
	t.Helper()
	cmd := exec.Command(bankCmd.Path(t), append([]string{"--http", addr, "--state", state}, extra...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	url := ""
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "bank: listening on "); ok {
			url = u
			break
		}
	}
	if url == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("bank did not start")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return url, stop
}

// TestSchemaChangeUpstream: the bank starts publishing a different transfer schema between two
// preflights. The new record carries the new digest, and the verdict issued under the old one
// is refused by the executor as schema_changed.
func TestSchemaChangeUpstream(t *testing.T) {
	state := filepath.Join(t.TempDir(), "bank.json")
	url, stop := startHTTPBank(t, "127.0.0.1:0", state)
	e := newEnv(t, envOpts{bankURL: url, executor: true})
	old := e.issue(context.Background())

	stop()
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	startHTTPBank(t, addr, state, "--schema-variant", "2")
	ctx := context.Background()
	if err := e.svc.Refresh(ctx); err != nil {
		t.Fatalf("refresh verdictd catalog: %v", err)
	}
	if err := e.execSvc.Refresh(ctx); err != nil {
		t.Fatalf("refresh executor catalog: %v", err)
	}
	res := e.execute(*old.Verdict, old.CallArguments)
	if res.status != http.StatusForbidden || !strings.Contains(string(res.body), "schema_changed") {
		t.Fatalf("old verdict after a schema change: %d %s", res.status, res.body)
	}
	fresh := e.issue(ctx)
	if *fresh.ToolSchemaDigest == *old.ToolSchemaDigest {
		t.Fatalf("digest unchanged after a schema change: %s", *fresh.ToolSchemaDigest)
	}
	claims := unverifiedClaims(t, *fresh.Verdict)
	if claims["tsd"] != *fresh.ToolSchemaDigest {
		t.Fatalf("new verdict tsd %v, record %s", claims["tsd"], *fresh.ToolSchemaDigest)
	}
	if res := e.execute(*fresh.Verdict, fresh.CallArguments); res.status != http.StatusOK {
		t.Fatalf("new verdict: %d %s", res.status, res.body)
	}
}

func unverifiedClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", token)
	}
	var out map[string]any
	if err := json.Unmarshal(mustB64(t, parts[1]), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReceiptMakesPriorStateOfferable: an executed verdict's receipt makes its values the
// action key's baseline; the next run offers the recipient for confirmation (it settles
// nothing by itself), and the confirmed value keeps prior_state as its origin.
func TestReceiptMakesPriorStateOfferable(t *testing.T) {
	e := newEnv(t, envOpts{executor: true})
	r := e.issue(context.Background())
	res := e.execute(*r.Verdict, r.CallArguments)
	if res.status != http.StatusOK || res.receipt == "" {
		t.Fatalf("execute: %d %s", res.status, res.body)
	}

	bodies := []struct {
		name, contentType string
		body              []byte
	}{
		{"compact jose", "application/jose", []byte(res.receipt)},
		{"json string", "application/json", []byte(`"` + res.receipt + `"`)},
		{"json object", "application/json", []byte(`{"receipt":"` + res.receipt + `"}`)},
	}
	for _, b := range bodies {
		status, out := do(t, "POST", e.srv.URL+"/v1/receipts", callerToken, b.contentType, b.body)
		if status != http.StatusOK || !strings.Contains(string(out), `"prior_state":true`) {
			t.Fatalf("%s: %d %s", b.name, status, out)
		}
	}
	if status, _ := do(t, "POST", e.srv.URL+"/v1/receipts", "", "application/jose", []byte(res.receipt)); status != http.StatusUnauthorized {
		t.Fatalf("receipt without a caller token: %d", status)
	}

	// A new conversation: the recipient is not given, the executed one is offered.
	req := landlord()
	req["conversation_id"] = "c_next"
	next := e.preflight(req)
	s := next.slot("to_account")
	offered, _ := s["offered"].(map[string]any)
	if s["status"] != "unknown" || offered["value"] != "110-222-333" || offered["source"] != "prior_state" {
		t.Fatalf("to_account not offered from prior state: %v\n%s", s, next.raw)
	}
	q := next.question("to_account")
	req["user_answers"] = []map[string]any{{"question_id": q.QuestionID, "approved": true, "value": "110-222-333"}}
	confirmed := e.preflight(req)
	s = confirmed.slot("to_account")
	if s["status"] != "known" || s["source"] != "user_answer" || s["origin_source"] != "prior_state" {
		t.Fatalf("confirmed prior value: %v\n%s", s, confirmed.raw)
	}
}

func TestReceiptRefusals(t *testing.T) {
	e := newEnv(t, envOpts{executor: true})
	r := e.issue(context.Background())
	res := e.execute(*r.Verdict, r.CallArguments)
	if res.status != http.StatusOK {
		t.Fatalf("execute: %d %s", res.status, res.body)
	}
	receiptKey, err := keys.LoadSigner(filepath.Join(e.dir, "receipt", keys.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := keys.Generate(keys.EdDSA)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	good := verdict.Receipt{Issuer: execID, ID: *r.VerdictID, ActionKey: *r.ActionKey, Arguments: *r.ArgumentsDigest,
		Decision: "executed", IssuedAt: now}
	sign := func(k *keys.Signer, rc verdict.Receipt) string {
		tok, err := verdict.SignReceipt(k, rc)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	with := func(f func(*verdict.Receipt)) verdict.Receipt { rc := good; f(&rc); return rc }
	tampered := []byte(res.receipt)
	// Swap one signature character for another base64url character, so the token stays
	// well-formed and only the signature is wrong.
	if i := len(tampered) - 3; tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"not a token", "hello world", 400, api.CodeMalformedReceipt},
		{"empty", "", 400, api.CodeMalformedReceipt},
		{"tampered signature", string(tampered), 403, "bad_signature"},
		{"unknown key", sign(forged, good), 403, "unknown_kid"},
		{"a verdict is not a receipt", *r.Verdict, 403, "typ_mismatch"},
		{"unknown verdict id", sign(receiptKey, with(func(rc *verdict.Receipt) { rc.ID = "AAAAAAAAAAAAAAAAAAAAAA" })), 404, api.CodeUnknownVerdict},
		{"other arguments", sign(receiptKey, with(func(rc *verdict.Receipt) { rc.Arguments = "sha256:" + strings.Repeat("0", 64) })), 409, api.CodeArgumentsMismatch},
		{"other action key", sign(receiptKey, with(func(rc *verdict.Receipt) { rc.ActionKey = "u_02:pay:bank/transfer" })), 409, api.CodeActionKeyMismatch},
		{"issued in the future", sign(receiptKey, with(func(rc *verdict.Receipt) { rc.IssuedAt = now + 3600 })), 403, "not_yet_valid"},
		{"older than receipt_max_age", sign(receiptKey, with(func(rc *verdict.Receipt) {
			rc.IssuedAt = now - int64((DefaultReceiptMaxAge+time.Minute)/time.Second)
		})), 403, api.CodeReceiptTooOld},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := do(t, "POST", e.srv.URL+"/v1/receipts", callerToken, "application/jose", []byte(tt.body))
			if status != tt.status || !strings.Contains(string(out), `"code":"`+tt.code+`"`) {
				t.Fatalf("%d %s, want %d %s", status, out, tt.status, tt.code)
			}
		})
	}
	// None of them made anything offerable.
	req := landlord()
	req["conversation_id"] = "c_other"
	if s := e.preflight(req).slot("to_account"); s["offered"] != nil {
		t.Fatalf("a refused receipt made a value offerable: %v", s)
	}
	// The same receipts in one batch: each item gets the status and code it got alone, in the
	// batch's order, and the good receipt among them is applied (after the check above).
	t.Run("batch", func(t *testing.T) {
		batch := api.ReceiptBatch{Receipts: []string{res.receipt}}
		for _, tt := range tests[2:] { // the first two are not tokens: they refuse a whole batch
			batch.Receipts = append(batch.Receipts, tt.body)
		}
		body, _ := json.Marshal(batch)
		status, out := do(t, "POST", e.srv.URL+"/v1/receipts/batch", callerToken, "application/json", body)
		var got api.ReceiptBatchResult
		if err := json.Unmarshal(out, &got); status != http.StatusOK || err != nil || len(got.Results) != len(batch.Receipts) {
			t.Fatalf("%d %s", status, out)
		}
		if first := got.Results[0]; first.Status != http.StatusOK || first.Result == nil || !first.Result.Accepted || first.Error != nil {
			t.Fatalf("the good receipt: %+v", first)
		}
		for i, tt := range tests[2:] {
			item := got.Results[i+1]
			if item.Status != tt.status || item.Error == nil || item.Error.Code != tt.code || item.Result != nil {
				t.Errorf("%s: %+v, want %d %s", tt.name, item, tt.status, tt.code)
			}
		}
	})
}

// TestRecordsNeedAdminToken: records are read with the admin token only, as single records and
// JSONL streams, and mask=1 hides values.
func TestRecordsNeedAdminToken(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := e.issue(context.Background())
	get := func(path, token string) (int, []byte) {
		return do(t, "GET", e.srv.URL+path, token, "", nil)
	}
	for _, tok := range []string{"", callerToken, "nope"} {
		if status, _ := get("/v1/records/"+r.RecordID, tok); status != http.StatusUnauthorized {
			t.Fatalf("record with token %q: %d", tok, status)
		}
		if status, _ := get("/v1/records?since=2000-01-01T00:00:00Z", tok); status != http.StatusUnauthorized {
			t.Fatalf("records with token %q: %d", tok, status)
		}
	}
	if status, _ := get("/v1/records/rec_nope", adminToken); status != http.StatusNotFound {
		t.Fatalf("unknown record: %d", status)
	}
	lines := func(b []byte) []string { return strings.Split(strings.TrimSpace(string(b)), "\n") }
	status, body := get("/v1/records?action_key="+urlQuery(*r.ActionKey), adminToken)
	if status != 200 || len(lines(body)) != 3 {
		t.Fatalf("by action key: %d, %d lines\n%s", status, len(lines(body)), body)
	}
	status, body = get("/v1/records?since="+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), adminToken)
	if status != 200 || len(lines(body)) != 3 {
		t.Fatalf("since: %d, %d lines", status, len(lines(body)))
	}
	if status, _ = get("/v1/records?since=yesterday", adminToken); status != http.StatusBadRequest {
		t.Fatalf("bad since: %d", status)
	}
	status, body = get("/v1/records?mask=1&verdict_id="+*r.VerdictID, adminToken)
	if status != 200 || bytes.Contains(body, []byte("110-222-333")) || bytes.Contains(body, []byte(*r.Verdict)) ||
		!bytes.Contains(body, []byte(r.RecordID)) {
		t.Fatalf("masked export leaks values or lost the record: %s", body)
	}
}

func urlQuery(s string) string {
	r := strings.NewReplacer(" ", "%20", "/", "%2F", ":", "%3A")
	return r.Replace(s)
}

// TestTokenRefusalsSayWhich: a request without a token is told one is required, a request with
// a wrong one that it is not accepted, on the caller and the admin endpoints alike.
func TestTokenRefusalsSayWhich(t *testing.T) {
	e := newEnv(t, envOpts{})
	tests := []struct {
		name, method, path, token, message string
	}{
		{"preflight without a token", "POST", "/v1/preflight", "", "a caller token is required"},
		{"preflight with a wrong token", "POST", "/v1/preflight", "guess", "the caller token is not accepted"},
		{"receipt with the admin token", "POST", "/v1/receipts", adminToken, "the caller token is not accepted"},
		{"records without a token", "GET", "/v1/records", "", "the admin token is required"},
		{"records with the caller token", "GET", "/v1/records", callerToken, "the admin token is not accepted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := do(t, tt.method, e.srv.URL+tt.path, tt.token, "application/json", []byte(`{}`))
			var env struct {
				Error struct{ Code, Message string }
			}
			json.Unmarshal(out, &env)
			if status != http.StatusUnauthorized || env.Error.Code != "unauthorized" || env.Error.Message != tt.message {
				t.Fatalf("%d %s, want 401 unauthorized %q", status, out, tt.message)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	e := newEnv(t, envOpts{mutate: func(c *Config) {
		c.Limits = Limits{MaxBodyBytes: 8192, MaxSegments: 2, MaxDepth: 8,
			MaxChecklistItems: 2, MaxExpressionBytes: 64, MaxChecklistBytes: 100}
	}})
	base, _ := json.Marshal(landlord())
	replace := func(old, new string) string { return strings.Replace(string(base), old, new, 1) }
	// checklist is the request with n user-checklist items whose expressions are size bytes.
	checklist := func(n, size int) string {
		items := make([]map[string]string, n)
		for i := range items {
			items[i] = map[string]string{"id": fmt.Sprint("c", i), "expr": "true" + strings.Repeat(" ", size-4)}
		}
		b, _ := json.Marshal(items)
		return replace(`"principal"`, `"user_checklist":`+string(b)+`,"principal"`)
	}
	tests := []struct {
		name   string
		token  string
		body   string
		status int
		code   string
	}{
		{"no token", "", string(base), 401, "unauthorized"},
		{"wrong token", "guess", string(base), 401, "unauthorized"},
		{"inexact number", callerToken, replace(`"value":500000`, `"value":9007199254740993`), 400, "number_not_exact"},
		{"unknown field", callerToken, replace(`"principal"`, `"principle":"x","principal"`), 400, "unknown_field"},
		{"malformed json", callerToken, `{"principal":`, 400, ""},
		{"duplicate key", callerToken, replace(`"principal":"u_01"`, `"principal":"u_01","principal":"u_02"`), 400, ""},
		{"oversized", callerToken, replace(`"principal"`, `"conversation_id":"`+strings.Repeat("x", 9000)+`","principal"`), 413, ""},
		{"too deep", callerToken, replace(`"value":500000`, `"value":[[[[[[[[[[1]]]]]]]]]]`), 400, ""},
		{"too many segments", callerToken, replace(`"trust":"user"}]`, `"trust":"user"},{"text":"a","trust":"user"},{"text":"b","trust":"user"}]`), 400, "too_many_segments"},
		// Separators of the action key cannot be smuggled in through the server or tool.
		{"server with a colon", callerToken, replace(`"server":"bank"`, `"server":"ba:nk"`), 400, "invalid_request"},
		{"server with a slash", callerToken, replace(`"server":"bank"`, `"server":"ba/nk"`), 400, "invalid_request"},
		{"tool with a colon", callerToken, replace(`"tool":"transfer"`, `"tool":"trans:fer"`), 400, "invalid_request"},
		// The checklist is bounded before any expression is compiled.
		{"too many checklist items", callerToken, checklist(3, 8), 400, "too_many_checklist_items"},
		{"checklist expression too large", callerToken, checklist(1, 65), 400, "expression_too_large"},
		{"checklist expressions too large together", callerToken, checklist(2, 60), 400, "checklist_too_large"},
		{"trigger for an unknown action key", callerToken, `{"principal":"u_01","phase":"at_trigger","action_key":"u_01:x:bank/transfer"}`, 404, api.CodeUnknownActionKey},
		{"trigger with an unknown field", callerToken, `{"principal":"u_01","phase":"at_trigger","action_key":"k","instruction":"x"}`, 400, "unknown_field"},
		// A phase spelt with escapes is still a trigger: a whole request cannot run at_trigger
		// without a deferred record.
		{"escaped trigger phase with a whole request", callerToken,
			replace(`"principal"`, `"phase":"at\u005ftrigger","action_key":"u_01:send money:bank/transfer","principal"`), 400, "unknown_field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := do(t, "POST", e.srv.URL+"/v1/preflight", tt.token, "application/json", []byte(tt.body))
			if status != tt.status {
				t.Fatalf("%d %s, want %d", status, out, tt.status)
			}
			var env struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(out, &env); err != nil || env.Error.Code == "" {
				t.Fatalf("not an error envelope: %s", out)
			}
			if tt.code != "" && env.Error.Code != tt.code {
				t.Fatalf("code %s, want %s", env.Error.Code, tt.code)
			}
		})
	}
	// Nothing was recorded for any of them.
	_, body := do(t, "GET", e.srv.URL+"/v1/records", adminToken, "", nil)
	if len(bytes.TrimSpace(body)) != 0 {
		t.Fatalf("a rejected request left a record: %s", body)
	}
}

// TestEvaluationBudgetRefusal: a request whose own checklist costs more than the evaluation
// budget is refused with a 400 and leaves no record; the same request with a cheap item is
// decided and recorded.
func TestEvaluationBudgetRefusal(t *testing.T) {
	e := newEnv(t, envOpts{})
	withItem := func(expr string) []byte {
		req := landlord()
		req["user_checklist"] = []map[string]string{{"id": "mine", "expr": expr}}
		b, _ := json.Marshal(req)
		return b
	}
	// Five nested comprehensions over ten elements: past the per-expression limit, and so past
	// the default budget on its own.
	const costly = "[0,1,2,3,4,5,6,7,8,9].all(a, [0,1,2,3,4,5,6,7,8,9].all(b, [0,1,2,3,4,5,6,7,8,9].all(c, " +
		"[0,1,2,3,4,5,6,7,8,9].all(d, [0,1,2,3,4,5,6,7,8,9].all(f, a+b+c+d+f >= 0)))))"
	status, out := do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", withItem(costly))
	if status != http.StatusBadRequest || !bytes.Contains(out, []byte(`"code":"evaluation_budget_exceeded"`)) {
		t.Fatalf("costly checklist: %d %s", status, out)
	}
	_, body := do(t, "GET", e.srv.URL+"/v1/records", adminToken, "", nil)
	if len(bytes.TrimSpace(body)) != 0 {
		t.Fatalf("a refused request left a record: %s", body)
	}
	status, out = do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", withItem("args.amount <= 1000000"))
	if status != http.StatusOK {
		t.Fatalf("cheap checklist: %d %s", status, out)
	}
	_, body = do(t, "GET", e.srv.URL+"/v1/records", adminToken, "", nil)
	if n := bytes.Count(bytes.TrimSpace(body), []byte("\n")) + 1; n != 1 {
		t.Fatalf("%d records, want 1: %s", n, body)
	}
}

// TestAskCeilingNotResettableByCaller: Gate-1 asks are counted by verdictd per conversation;
// a caller resending attempt 0 cannot lift the ceiling, not even across a restart; only
// new_request resets it.
func TestAskCeilingNotResettableByCaller(t *testing.T) {
	e := newEnv(t, envOpts{})
	req := landlord()
	req["intent"] = map[string]any{"action_name": map[string]any{"segment": 0, "span": []int{0, 10}}} // no timing
	req["intent_attempt"] = 0
	var outcomes []string
	for i := 0; i < 2; i++ {
		outcomes = append(outcomes, e.preflight(req).Outcome)
	}
	e.stop()
	e.start()
	r := e.preflight(req)
	outcomes = append(outcomes, r.Outcome)
	if fmt.Sprint(outcomes) != "[ask_user ask_user exhausted]" || r.Gate.Kind != "intent_undetermined_exhausted" {
		t.Fatalf("outcomes %v, gate %s", outcomes, r.Gate.Kind)
	}
	req["new_request"] = true
	if r := e.preflight(req); r.Outcome != "ask_user" {
		t.Fatalf("after new_request: %s", r.Outcome)
	}
}

// TestDeferredRunTriggeredLater: a scheduled transfer settles its values while the user is
// present and ends deferred; the trigger names only the action key, and the stored intent is
// run again to a verdict at_trigger.
func TestDeferredRunTriggeredLater(t *testing.T) {
	e := newEnv(t, envOpts{executor: true})
	text := "schedule a transfer of 50,000 won to 110-222-333"
	req := map[string]any{
		"principal": "u_01", "conversation_id": "c_sched", "server": "bank", "tool": "schedule_transfer",
		"instruction": []map[string]any{{"text": text, "trust": "user"}},
		"intent":      map[string]any{"when_case": "scheduled", "action_name": map[string]any{"segment": 0, "span": []int{0, 19}}},
		"candidates": []map[string]any{
			{"field": "amount", "segment": 0, "span": []int{23, 29}, "value": 50000},
			{"field": "to_account", "segment": 0, "span": []int{37, 48}, "value": "110-222-333"},
		},
		"pre_set_data": map[string]any{"from_account": map[string]any{"value": "1102534471", "trust": "user"}},
	}
	var answers []map[string]any
	var r *record
	for i := 0; i < 4; i++ {
		if len(answers) > 0 {
			req["user_answers"] = answers
		}
		r = e.preflight(req)
		if r.Outcome != "ask_user" {
			break
		}
		for _, q := range r.Questions {
			switch q.Kind {
			case "approval":
				var v any
				json.Unmarshal(q.Value, &v)
				answers = append(answers, map[string]any{"question_id": q.QuestionID, "approved": true, "value": v})
			case "value":
				if q.SlotID != "when" {
					t.Fatalf("unexpected question %s\n%s", q.SlotID, r.raw)
				}
				answers = append(answers, map[string]any{"question_id": q.QuestionID, "value": "2026-12-24T09:00:00Z"})
			}
		}
	}
	if r.Outcome != "deferred" || *r.Phase != "at_instruction" || r.Verdict != nil {
		t.Fatalf("instruction-time run: %s %v\n%s", r.Outcome, r.Phase, r.raw)
	}
	akey := *r.ActionKey

	// Another principal cannot trigger it.
	body := fmt.Sprintf(`{"principal":"u_02","phase":"at_trigger","action_key":%q}`, akey)
	if status, _ := do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", []byte(body)); status != 404 {
		t.Fatalf("foreign trigger: %d", status)
	}
	// Pre-set data is re-fetched at trigger time, never carried over: without it the run
	// cannot settle the debit account.
	body = fmt.Sprintf(`{"principal":"u_01","phase":"at_trigger","action_key":%q}`, akey)
	status, out := do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", []byte(body))
	if status != 200 || strings.Contains(string(out), `"outcome":"verdict_issued"`) {
		t.Fatalf("trigger without pre-set data: %d %s", status, out)
	}
	body = fmt.Sprintf(`{"principal":"u_01","phase":"at_trigger","action_key":%q,
		"pre_set_data":{"from_account":{"value":"1102534471","trust":"user"}}}`, akey)
	status, out = do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", []byte(body))
	if status != 200 {
		t.Fatalf("trigger: %d %s", status, out)
	}
	var tr record
	json.Unmarshal(out, &tr)
	validateRecord(t, out)
	if tr.Outcome != "verdict_issued" || *tr.Phase != "at_trigger" || *tr.ActionKey != akey {
		t.Fatalf("trigger run: %s\n%s", tr.Outcome, out)
	}
	if c := unverifiedClaims(t, *tr.Verdict); c["phase"] != "at_trigger" || c["akey"] != akey {
		t.Fatalf("trigger verdict claims: %v", c)
	}
	if res := e.execute(*tr.Verdict, tr.CallArguments); res.status != http.StatusOK {
		t.Fatalf("execute scheduled transfer: %d %s", res.status, res.body)
	}
}

// TestUnavailableToolIsDefinitionRepair: an inline tool without a schema and a listed tool
// without a digest end in definition repair, on record; a tool the server does not list and a
// server the policy does not name cannot succeed and are refused with 404 unknown_tool, with
// nothing recorded and no ask spent.
func TestUnavailableToolIsDefinitionRepair(t *testing.T) {
	pol := bankPolicy + `  inline/noschema: {actions: ["send money"]}
  bank/wire_everything: {actions: ["send money"]}
`
	// bank4 publishes a transfer schema holding a number no double denotes exactly: it has no
	// canonical form, so no digest, so no verdict.
	bank4 := `{command: ["` + bankCmd.Path(t) + `", "--state", "` + filepath.Join(t.TempDir(), "b4.json") + `", "--schema-variant", "4"]}`
	pol += "  bank4/transfer: {actions: [\"send money\"]}\n"
	pol = strings.Replace(pol, "tools:\n  bank/transfer", "  inline:\n    audience: [executor-bank]\n    tools:\n      - {name: noschema, description: \"no schema\"}\n"+
		"  bank4:\n    audience: [executor-bank]\n    tools_from: "+bank4+"\ntools:\n  bank/transfer", 1)
	e := newEnv(t, envOpts{policy: pol})
	for _, tc := range []struct{ server, tool string }{{"bank", "wire_everything"}, {"nowhere", "transfer"}} {
		req := landlord()
		req["server"], req["tool"] = tc.server, tc.tool
		body, _ := json.Marshal(req)
		status, out := do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", body)
		if status != http.StatusNotFound || !strings.Contains(string(out), `"code":"unknown_tool"`) {
			t.Errorf("%s/%s: %d %s", tc.server, tc.tool, status, out)
		}
	}
	if n := e.metric(`verdictd_preflight_total{outcome="ask_user"}`) + e.metric(`verdictd_preflight_total{outcome="definition_repair"}`); n > 0 {
		t.Errorf("an unknown tool was decided: %v records", n)
	}
	for _, tc := range []struct{ server, tool, outcome, gate string }{
		{"inline", "noschema", "definition_repair", "schema_unsupported"},
		{"bank4", "transfer", "definition_repair", "schema_unsupported"},
	} {
		req := landlord()
		req["server"], req["tool"] = tc.server, tc.tool
		req["conversation_id"] = tc.server + "/" + tc.tool
		r := e.preflight(req)
		if r.Outcome != tc.outcome || r.Gate.Kind != tc.gate || r.Verdict != nil {
			t.Errorf("%s/%s: outcome %s gate %s\n%s", tc.server, tc.tool, r.Outcome, r.Gate.Kind, r.raw)
		}
	}
}

// TestPolicyReloadWhileServing: a good policy file is picked up by the watcher while
// preflights run, each record carrying the version that decided it; a broken file keeps the
// policy in force and is counted.
func TestPolicyReloadWhileServing(t *testing.T) {
	e := newEnv(t, envOpts{pollPolicy: true})
	if v := e.metric(`verdictd_policy_info{version="2026-11-30.1"}`); v != 1 {
		t.Fatalf("policy_info: %v", v)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	versions := map[string]int{}
	for i := 0; i < 4; i++ {
		wg.Go(func() {
			body, _ := json.Marshal(landlord())
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, out := do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", body)
				if status != 200 {
					t.Errorf("preflight during reload: %d %s", status, out)
					return
				}
				var r record
				json.Unmarshal(out, &r)
				mu.Lock()
				versions[r.PolicyVersion]++
				mu.Unlock()
			}
		})
	}
	e.writePolicy(strings.Replace(bankPolicy, "2026-11-30.1", "2026-12-01.1", 1), "")
	e.pollPolicy(1)
	if v := e.svc.PolicyVersion(); v != "2026-12-01.1" {
		t.Fatalf("after a poll of the new file: policy %s", v)
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return versions["2026-12-01.1"] > 0 })
	e.writePolicy("policy_version: broken\nservers: {}\ntools: {bank/transfer: {class: maybe}}\n", "")
	e.pollPolicy(1)
	if n := e.metric(`verdictd_policy_reloads_total{result="error"}`); n != 1 {
		t.Fatalf("after a poll of the broken file: %v failed reloads, want 1", n)
	}
	close(stop)
	wg.Wait()
	if e.svc.PolicyVersion() != "2026-12-01.1" {
		t.Fatalf("broken reload replaced the policy: %s", e.svc.PolicyVersion())
	}
	for v := range versions {
		if v != "2026-11-30.1" && v != "2026-12-01.1" {
			t.Fatalf("record with policy version %q", v)
		}
	}
	if e.metric(`verdictd_policy_reloads_total{result="ok"}`) < 1 || e.metric(`verdictd_policy_info{version="2026-12-01.1"}`) != 1 ||
		e.metric(`verdictd_policy_info{version="2026-11-30.1"}`) != -1 {
		t.Fatal("reload metrics do not show the new policy alone")
	}
	// The watcher does not try the same broken content again: ten polls later it is still one
	// error.
	e.pollPolicy(10)
	if n := e.metric(`verdictd_policy_reloads_total{result="error"}`); n != 1 {
		t.Fatalf("one broken file counted %v times", n)
	}
	// An explicit reload (SIGHUP) of the still-broken file fails the same way, and counts.
	if err := e.svc.Reload(context.Background()); err == nil {
		t.Fatal("reload of a broken file succeeded")
	}
	if n := e.metric(`verdictd_policy_reloads_total{result="error"}`); n != 2 {
		t.Fatalf("after SIGHUP: %v errors, want 2", n)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("condition not reached")
}

// A policy whose fields name an argument the tool does not declare is refused on reload, with
// the tool and a suggestion: put in force, the typo would silently drop the constraint.
func TestPolicyReloadRefusesFieldTypo(t *testing.T) {
	e := newEnv(t, envOpts{})
	if err := e.svc.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	typo := strings.Replace(bankPolicy, "2026-11-30.1", "2026-12-01.1", 1)
	typo = strings.Replace(typo, "to_account: {allowed_sources", "to_acount: {allowed_sources", 1)
	e.writePolicy(typo, "")
	err := e.svc.Reload(context.Background())
	var pe *policy.Error
	if !errors.As(err, &pe) || len(pe.Problems) != 1 {
		t.Fatalf("reload of a fields typo: %v", err)
	}
	p := pe.Problems[0]
	if p.Path != `tools["bank/transfer"]` || !strings.Contains(p.Msg, `fields.to_acount names no argument of the tool (did you mean "to_account"?)`) {
		t.Fatalf("problem: %s", p)
	}
	if v := e.svc.PolicyVersion(); v != "2026-11-30.1" {
		t.Fatalf("the typo was put in force: %s", v)
	}
}
