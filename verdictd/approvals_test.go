package verdictd

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testop"
	"github.com/verdictgate/verdict/store"
)

// approvalsResource is the approvals API's resource URI: the audience of approver tokens.
const approvalsResource = "http://verdictd.test/approvals"

// consolePolicy gates bank/transfer with a confirmation of the recipient whose approval only
// the console gives, by another person than the principal, of the payments-approvers group.
const consolePolicy = `policy_version: "2026-12-02.1"
servers:
  bank:
    audience: [executor-bank]
    tools_from: %BANK%
tools:
  bank/transfer:
    class: irreversible
    actions: ["pay"]
    fields:
      to_account: {allowed_sources: [user_answer, instruction], confirm: true}
      from_account: {allowed_sources: [pre_set_data]}
    notices: ["Transfers are final."]
    approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m}
  bank/get_balance: {class: read}
  bank/list_transactions: {class: read}
  bank/schedule_transfer: {class: reversible}
`

// payCall is an immediate transfer of amount to 110-222-333, every value in the instruction.
func payCall(principal string, amount int) map[string]any {
	n := len(fmt.Sprint(amount))
	text := fmt.Sprintf("pay %d to 110-222-333", amount)
	return map[string]any{
		"principal": principal, "conversation_id": "c_apr", "server": "bank", "tool": "transfer",
		"instruction": []map[string]any{{"text": text, "trust": "user"}},
		"intent":      map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 3}}},
		"candidates": []map[string]any{
			{"field": "amount", "segment": 0, "span": []int{4, 4 + n}, "value": amount},
			{"field": "to_account", "segment": 0, "span": []int{8 + n, len(text)}, "value": "110-222-333"},
		},
		"pre_set_data": map[string]any{"from_account": map[string]any{"value": "1102534471", "trust": "user", "origin": "settings"}},
	}
}

// approvalSchemas are the Approval and ApprovalList schemas of api/openapi.yaml, compiled once:
// what the approvals API answers must be what it describes (the console reads it).
var approvalSchemas = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	b, err := os.ReadFile(filepath.Join("..", "api", "openapi.yaml"))
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("https://verdict.invalid/api/openapi.yaml", doc); err != nil {
		return nil, err
	}
	out := map[string]*jsonschema.Schema{}
	for _, name := range []string{"Approval", "ApprovalList"} {
		if out[name], err = c.Compile("https://verdict.invalid/api/openapi.yaml#/components/schemas/" + name); err != nil {
			return nil, err
		}
	}
	return out, nil
})

// validateApproval checks an answer of the approvals API against its schema in api/openapi.yaml.
func validateApproval(t testing.TB, schema string, body []byte) {
	t.Helper()
	schemas, err := approvalSchemas()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas[schema].Validate(doc); err != nil {
		t.Errorf("answer does not match api/openapi.yaml's %s: %v\n%s", schema, err, body)
	}
}

// recordApproval is the approval member of a record.
func recordApproval(t testing.TB, r *record) api.RecordApproval {
	t.Helper()
	var m struct {
		Approval *api.RecordApproval `json:"approval"`
	}
	if err := json.Unmarshal(r.raw, &m); err != nil || m.Approval == nil {
		t.Fatalf("record %s has no approval (%v):\n%s", r.RecordID, err, r.raw)
	}
	return *m.Approval
}

// approvalCall calls the approvals API with token and decodes a 200 into out; it returns the
// status and the envelope's code.
func (e *env) approvalCall(method, path, token string, body any, out any) (int, string) {
	e.t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			e.t.Fatal(err)
		}
	}
	status, got := do(e.t, method, e.srv.URL+path, token, "application/json", b)
	if status != http.StatusOK {
		var eb api.ErrorBody
		if err := json.Unmarshal(got, &eb); err != nil {
			e.t.Fatalf("%s %s: %d, not an error envelope: %s", method, path, status, got)
		}
		return status, eb.Error.Code
	}
	switch out.(type) {
	case *api.Approval:
		validateApproval(e.t, "Approval", got)
	case *api.ApprovalList:
		validateApproval(e.t, "ApprovalList", got)
	}
	if out != nil {
		if err := json.Unmarshal(got, out); err != nil {
			e.t.Fatalf("%s %s: %v\n%s", method, path, err, got)
		}
	}
	return status, ""
}

func decisionBody(d, digest string) map[string]any {
	return map[string]any{"decision": d, "arguments_digest": digest}
}

// TestConsoleApprovals: a transfer that only another person of the payments-approvers group
// may approve in the console. test-user's call waits as one pending approval; test-user
// cannot approve it, nor can a caller token, a token for another resource, or a decision on
// other values; test-user2 approves it and the next preflight issues a verdict whose approval
// slot names test-user2; the decision counts once; a denial refuses the call.
func TestConsoleApprovals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t), "-resource", approvalsResource, "-group", "id2=payments-approvers",
		"-client", "agent:agent-secret", "-client", "other:other-secret=https://other.test/approvals")
	e := newEnv(t, envOpts{policy: consolePolicy, mutate: func(c *Config) {
		c.Approvers = &Approvers{Issuers: []identity.Issuer{{Issuer: op.Issuer, Audience: approvalsResource}}}
	}})
	user, user2 := op.AuthCode(t, "test-user@127.0.0.1"), op.AuthCode(t, "test-user2")
	id1, id2 := identity.PrincipalID(op.Issuer, "id1"), identity.PrincipalID(op.Issuer, "id2")

	first := e.preflight(payCall(id1, 900))
	if first.Outcome != api.OutcomeAskUser {
		t.Fatalf("first preflight: %s %+v\n%s", first.Outcome, first.Gate, first.raw)
	}
	ra := recordApproval(t, first)
	if ra.State != api.ApprovalPending || !strings.HasPrefix(ra.ApprovalID, "apr_") || len(ra.ApprovalID) < len("apr_")+26 ||
		strings.Join(ra.Channels, ",") != "console" || ra.ExpiresAt == "" {
		t.Fatalf("record approval %+v", ra)
	}
	path := "/v1/approvals/" + ra.ApprovalID
	// The same call asked again finds the same pending approval.
	if again := recordApproval(t, e.preflight(payCall(id1, 900))); again.ApprovalID != ra.ApprovalID {
		t.Fatalf("the same call made another approval: %s, then %s", ra.ApprovalID, again.ApprovalID)
	}

	var a api.Approval
	if status, code := e.approvalCall("GET", path, user2, nil, &a); status != 200 {
		t.Fatalf("GET as test-user2: %d %s", status, code)
	}
	if a.State != api.ApprovalPending || a.Principal != id1 || a.RecordID != first.RecordID || a.ArgumentsDigest != ra.ArgumentsDigest ||
		a.Arguments["amount"] != float64(900) || a.Arguments["to_account"] != "110-222-333" || !a.FourEyes ||
		a.Group != "payments-approvers" || !a.MayDecide || a.Refusal != "" || len(a.Slots) != 2 ||
		a.Slots[0].SlotID != "confirm:to_account" || a.Slots[0].Value != "110-222-333" || len(a.Notices) != 1 {
		t.Fatalf("approval as test-user2 sees it: %+v", a)
	}
	a = api.Approval{}
	if _, code := e.approvalCall("GET", path, user, nil, &a); code != "" || a.MayDecide || a.Refusal != api.CodeSelfApproval {
		t.Errorf("approval as test-user sees it: may_decide %v refusal %q", a.MayDecide, a.Refusal)
	}
	a = api.Approval{}
	if _, code := e.approvalCall("GET", path, callerToken, nil, &a); code != "" || a.MayDecide || a.Refusal != "" {
		t.Errorf("approval as the caller sees it: may_decide %v refusal %q", a.MayDecide, a.Refusal)
	}
	var list api.ApprovalList
	if status, _ := e.approvalCall("GET", "/v1/approvals?state=pending", user2, nil, &list); status != 200 ||
		len(list.Approvals) != 1 || list.Approvals[0].ApprovalID != ra.ApprovalID {
		t.Errorf("pending list: %d %+v", status, list)
	}

	// Refusals: nothing below decides anything.
	other := op.ClientCredentials(t, "other", "other-secret")
	wrongDigest := "sha256:" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		name, path, token string
		body              any
		status            int
		code              string
	}{
		{"no token", path, "", decisionBody("approve", ra.ArgumentsDigest), 401, api.CodeUnauthorized},
		{"a caller token", path, callerToken, decisionBody("approve", ra.ArgumentsDigest), 401, api.CodeUnauthorized},
		{"a token for another audience", path, other, decisionBody("approve", ra.ArgumentsDigest), 401, api.CodeUnauthorized},
		{"not a token", path, "eyJ.eyJ.sig", decisionBody("approve", ra.ArgumentsDigest), 401, api.CodeUnauthorized},
		{"the principal", path, user, decisionBody("approve", ra.ArgumentsDigest), 403, api.CodeSelfApproval},
		{"a stale digest", path, user2, decisionBody("approve", wrongDigest), 409, api.CodeApprovalValueMismatch},
		{"an unknown id", "/v1/approvals/apr_" + strings.Repeat("A", 26), user2, decisionBody("approve", ra.ArgumentsDigest), 404, api.CodeNotFound},
		{"not a decision", path, user2, decisionBody("maybe", ra.ArgumentsDigest), 400, api.CodeInvalidRequest},
		{"an unknown member", path, user2, map[string]any{"decision": "approve", "arguments_digest": ra.ArgumentsDigest, "by": id2}, 400, "unknown_field"},
	} {
		if status, code := e.approvalCall("POST", tc.path, tc.token, tc.body, nil); status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, code, tc.status, tc.code)
		}
	}
	// No digest but the pending one decides anything: one character changed, another case,
	// padding, another digest of the same length, the record's own id.
	rapid.Check(t, func(rt *rapid.T) {
		d := []byte(ra.ArgumentsDigest)
		switch rapid.IntRange(0, 4).Draw(rt, "how") {
		case 0:
			i := rapid.IntRange(len("sha256:"), len(d)-1).Draw(rt, "at")
			c := rapid.SampledFrom([]byte("0123456789abcdefABCDEF")).Filter(func(c byte) bool { return c != d[i] }).Draw(rt, "to")
			d[i] = c
		case 1:
			d = []byte(strings.ToUpper(string(d)))
		case 2:
			d = []byte(rapid.SampledFrom([]string{" ", "\n", "\u0000"}).Draw(rt, "pad") + string(d))
		case 3:
			d = []byte("sha256:" + rapid.StringMatching(`[0-9a-f]{64}`).Filter(func(s string) bool { return "sha256:"+s != ra.ArgumentsDigest }).Draw(rt, "other"))
		case 4:
			d = []byte(rapid.SampledFrom([]string{"", first.RecordID, "sha256:", ra.ApprovalID}).Draw(rt, "other"))
		}
		status, code := e.approvalCall("POST", path, user2, decisionBody(rapid.SampledFrom([]string{"approve", "deny"}).Draw(rt, "decision"), string(d)), nil)
		if status == http.StatusOK || (code != api.CodeApprovalValueMismatch && code != api.CodeInvalidRequest) {
			rt.Fatalf("digest %q: %d %s", d, status, code)
		}
	})
	if got := recordApproval(t, e.preflight(payCall(id1, 900))); got.State != api.ApprovalPending || got.ApprovalID != ra.ApprovalID {
		t.Fatalf("after the refusals the approval is %+v", got)
	}

	// A long poll started now answers when the decision lands, not at its wait.
	var wg sync.WaitGroup
	var polled api.Approval
	wg.Go(func() {
		status, body := do(t, "GET", e.srv.URL+path+"?wait=60s", callerToken, "", nil)
		if status != 200 || json.Unmarshal(body, &polled) != nil {
			t.Errorf("long poll: %d %s", status, body)
		}
	})
	var decided api.Approval
	if status, code := e.approvalCall("POST", path, user2, decisionBody("approve", ra.ArgumentsDigest), &decided); status != 200 {
		t.Fatalf("approve as test-user2: %d %s", status, code)
	}
	wg.Wait()
	if decided.State != api.ApprovalApproved || decided.DecidedBy != id2 || decided.DecidedAt == "" || polled.State != api.ApprovalApproved {
		t.Fatalf("decided %+v, polled %+v", decided, polled)
	}
	if status, code := e.approvalCall("POST", path, user2, decisionBody("approve", ra.ArgumentsDigest), nil); status != 409 || code != api.CodeAlreadyDecided {
		t.Errorf("the decision replayed: %d %s, want 409 already_decided", status, code)
	}

	issued := e.preflight(payCall(id1, 900))
	if issued.Outcome != api.OutcomeVerdictIssued || issued.Verdict == nil {
		t.Fatalf("after the approval: %s %+v\n%s", issued.Outcome, issued.Gate, issued.raw)
	}
	s := issued.slot("confirm:to_account")
	if s["status"] != api.StatusKnown || s["source"] != string(api.SourceConsoleApproval) || s["approved_by"] != id2 {
		t.Errorf("approval slot %v", s)
	}
	if got := recordApproval(t, issued); got.ApprovalID != ra.ApprovalID || got.State != api.ApprovalApproved || got.DecidedBy != id2 {
		t.Errorf("verdict record's approval %+v", got)
	}
	e.approvalCall("GET", path, callerToken, nil, &a)
	if a.UsedBy != issued.RecordID {
		t.Errorf("used_by %q, want %s", a.UsedBy, issued.RecordID)
	}

	// A decision counts for one preflight: the same call again waits for a new approval, and
	// a denial of that one refuses it.
	next := e.preflight(payCall(id1, 900))
	nra := recordApproval(t, next)
	if next.Outcome != api.OutcomeAskUser || nra.ApprovalID == ra.ApprovalID || nra.State != api.ApprovalPending {
		t.Fatalf("the same call after its verdict: %s %+v", next.Outcome, nra)
	}
	if status, code := e.approvalCall("POST", "/v1/approvals/"+nra.ApprovalID, user2, decisionBody("deny", nra.ArgumentsDigest), nil); status != 200 {
		t.Fatalf("deny: %d %s", status, code)
	}
	refused := e.preflight(payCall(id1, 900))
	if refused.Outcome != api.OutcomeRefuse || refused.Gate.Kind != api.GateApprovalRefused || refused.Gate.Detail != api.CodeApprovalDenied ||
		refused.Verdict != nil || len(refused.Questions) != 0 {
		t.Fatalf("after the denial: %s %+v\n%s", refused.Outcome, refused.Gate, refused.raw)
	}

	// Group: test-user is not in payments-approvers, so may not approve test-user2's call, nor
	// read it: an approver outside the group reads nothing of another principal's call, by its
	// id or in the list, and is answered as for an unknown id; its own calls it reads.
	theirs := recordApproval(t, e.preflight(payCall(id2, 700)))
	if status, code := e.approvalCall("POST", "/v1/approvals/"+theirs.ApprovalID, user, decisionBody("approve", theirs.ArgumentsDigest), nil); status != 404 || code != api.CodeNotFound {
		t.Errorf("approve without the group: %d %s, want 404 not_found", status, code)
	}
	if status, code := e.approvalCall("GET", "/v1/approvals/"+theirs.ApprovalID, user, nil, nil); status != 404 || code != api.CodeNotFound {
		t.Errorf("read without the group: %d %s, want 404 not_found", status, code)
	}
	if status, code := e.approvalCall("GET", "/v1/approvals/"+theirs.ApprovalID+"?wait=60s", user, nil, nil); status != 404 || code != api.CodeNotFound {
		t.Errorf("long poll without the group: %d %s, want 404 not_found", status, code)
	}
	// Another amount is another call, with its own approval.
	more := recordApproval(t, e.preflight(payCall(id1, 901)))
	for _, tc := range []struct {
		token string
		want  []string
	}{{user, []string{more.ApprovalID}}, {user2, []string{more.ApprovalID, theirs.ApprovalID}}} {
		var list api.ApprovalList
		e.approvalCall("GET", "/v1/approvals?state=pending", tc.token, nil, &list)
		var got []string
		for _, a := range list.Approvals {
			got = append(got, a.ApprovalID)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("pending list: %v, want %v", got, tc.want)
		}
	}
	if more.ApprovalID == nra.ApprovalID || more.ArgumentsDigest == nra.ArgumentsDigest {
		t.Errorf("a call with other values shares an approval: %+v", more)
	}
	// Ids are random, not derived from the call: four approvals, four unrelated ids.
	ids := map[string]bool{}
	for _, id := range []string{ra.ApprovalID, nra.ApprovalID, theirs.ApprovalID, more.ApprovalID} {
		if ids[id] || ids[id[:len(id)-8]] {
			t.Errorf("approval id %s repeats another's", id)
		}
		ids[id], ids[id[:len(id)-8]] = true, true
	}
	for series, want := range map[string]float64{
		`verdictd_approvals_total{decision="approved"}`: 1, `verdictd_approvals_total{decision="denied"}`: 1,
		`verdictd_approvals_pending`: 2, `verdictd_preflight_total{outcome="refuse"}`: 1,
	} {
		if got := e.metric(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// TestConsoleApprovalExpires: a pending approval past its timeout reads as expired, and the
// next preflight of its call is refused approval_expired. The clock is the service's own.
func TestConsoleApprovalExpires(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	e := newEnv(t, envOpts{policy: consolePolicy, now: now, mutate: func(c *Config) {
		c.Callers = append(c.Callers, Caller{Name: "narrow", TokenSHA256: httpx.HashToken(narrowToken), Principals: []string{"u_02"}})
	}})
	first := e.preflight(payCall("u_01", 900))
	ra := recordApproval(t, first)
	// A caller reads only the approvals of the principals it acts for; another's is unknown.
	if status, code := e.approvalCall("GET", "/v1/approvals/"+ra.ApprovalID, narrowToken, nil, nil); status != 404 || code != api.CodeNotFound {
		t.Errorf("another principal's approval: %d %s, want 404", status, code)
	}
	var list api.ApprovalList
	if e.approvalCall("GET", "/v1/approvals", narrowToken, nil, &list); len(list.Approvals) != 0 {
		t.Errorf("another principal's approvals listed: %+v", list.Approvals)
	}
	if e.approvalCall("GET", "/v1/approvals?state=pending", callerToken, nil, &list); len(list.Approvals) != 1 {
		t.Errorf("the principal's caller lists %d approvals, want 1", len(list.Approvals))
	}
	var a api.Approval
	e.approvalCall("GET", "/v1/approvals/"+ra.ApprovalID, callerToken, nil, &a)
	if a.State != api.ApprovalPending {
		t.Fatalf("state %s", a.State)
	}
	// A shutdown answers the long polls with the approval as it stands.
	polled := make(chan api.Approval)
	go func() {
		var p api.Approval
		e.approvalCall("GET", "/v1/approvals/"+ra.ApprovalID+"?wait=60s", callerToken, nil, &p)
		polled <- p
	}()
	e.svc.EndWaits()
	if p := <-polled; p.State != api.ApprovalPending {
		t.Fatalf("long poll ended by shutdown: %+v", p)
	}
	offset.Store(int64(10*time.Minute + time.Second))
	e.approvalCall("GET", "/v1/approvals/"+ra.ApprovalID+"?wait=30s", callerToken, nil, &a)
	if a.State != api.ApprovalExpired {
		t.Fatalf("past its timeout the approval is %s", a.State)
	}
	// The sweep marks it expired in the file, once, and the pending set forgets it; an
	// unreadable approval beside it (its id sorts first) is reported and does not stop the sweep.
	if err := e.svc.db.Approvals().Write(t.Context(), &store.ApprovalWrite{Meta: store.ApprovalMeta{ID: "apr_0unreadable",
		Call: "elsewhere", Principal: "u_99", Created: time.Now(), Pending: true}, Value: []byte("{not json")}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.svc.approvals.Expire(t.Context()); err == nil {
			t.Fatal("the sweep did not report the unreadable approval")
		}
	}
	if got := e.metric(`verdictd_approvals_total{decision="expired"}`); got != 1 {
		t.Errorf("expired approvals %v, want 1", got)
	}
	if got := e.metric(`verdictd_approvals_pending`); got != 0 {
		t.Errorf("pending approvals %v, want 0", got)
	}
	refused := e.preflight(payCall("u_01", 900))
	if refused.Outcome != api.OutcomeRefuse || refused.Gate.Detail != api.CodeApprovalExpired {
		t.Fatalf("after the expiry: %s %+v", refused.Outcome, refused.Gate)
	}
	if got := e.metric(`verdictd_approvals_total{decision="expired"}`); got != 1 {
		t.Errorf("expired approvals after the refusal %v, want 1", got)
	}
	// The expiry was acted on once: the call asked again waits for a new approval.
	if again := recordApproval(t, e.preflight(payCall("u_01", 900))); again.ApprovalID == ra.ApprovalID || again.State != api.ApprovalPending {
		t.Errorf("after the refusal: %+v", again)
	}
	// Without an approvers section no token decides anything.
	if status, code := e.approvalCall("POST", "/v1/approvals/"+ra.ApprovalID, "eyJ.eyJ.sig", decisionBody("approve", ra.ArgumentsDigest), nil); status != 401 || code != api.CodeUnauthorized {
		t.Errorf("decision without approvers: %d %s", status, code)
	}
}

// TestConsoleApprovalShowsDrafts: the approver sees the model's drafted text in full, with
// its digest and size, beside the values: the digest the decision binds covers it. The memo
// holds a direction override, which its policy allows (the console shows it marked).
func TestConsoleApprovalShowsDrafts(t *testing.T) {
	pol := strings.Replace(consolePolicy, `    notices: ["Transfers are final."]`, `    notices: ["Transfers are final."]
    drafted: [memo]`, 1)
	pol = strings.Replace(pol, `      from_account: {allowed_sources: [pre_set_data]}`, `      from_account: {allowed_sources: [pre_set_data]}
      memo: {allow_hidden_characters: true}`, 1)
	e := newEnv(t, envOpts{policy: pol})
	call := payCall("u_01", 900)
	memo := "December rent, flat 3B.\u202e Thank you!"
	call["candidates"] = append(call["candidates"].([]map[string]any), map[string]any{"field": "memo", "value": memo})
	first := e.preflight(call)
	// The draft is not reviewed yet, so there is no call to approve: the host is asked the
	// review, and nothing it cannot answer.
	q := first.question("memo")
	if first.Outcome != api.OutcomeAskUser || q.Kind != api.QuestionReviewDraft || len(first.Questions) != 1 || strings.Contains(string(first.raw), `"approval":{`) {
		t.Fatalf("before the review: %s %+v\n%s", first.Outcome, first.Questions, first.raw)
	}
	call["user_answers"] = []map[string]any{{"question_id": q.QuestionID, "approved": true, "value": json.RawMessage(q.Value)}}
	rec := e.preflight(call)
	ra := recordApproval(t, rec)
	var a api.Approval
	if status, code := e.approvalCall("GET", "/v1/approvals/"+ra.ApprovalID, callerToken, nil, &a); status != 200 {
		t.Fatalf("GET: %d %s", status, code)
	}
	if len(a.Drafts) != 1 || a.Drafts[0].Field != "memo" || a.Drafts[0].Text != memo || a.Arguments["memo"] != memo ||
		!strings.HasPrefix(a.Drafts[0].Digest, "sha256:") || a.Drafts[0].Bytes == 0 {
		t.Fatalf("drafts %+v (arguments %v)", a.Drafts, a.Arguments)
	}
	if s := rec.slot("memo"); s["source"] != string(api.SourceReviewedDraft) {
		t.Errorf("the reviewed draft: %v", s)
	}
}

// TestConsoleApprovalClosedByHost: where the policy takes approvals in the host and the console,
// a call the host approved closes its pending console approval: approving it afterwards would
// approve a call that already ran, and let the same call run again.
func TestConsoleApprovalClosedByHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hostOnly: the policy drops console while the approval is pending, before the host
		// approves; it may take console back later, and the approval must not be decidable.
		hostOnly bool
	}{{"host and console", false}, {"console dropped meanwhile", true}} {
		t.Run(tc.name, func(t *testing.T) { testConsoleApprovalClosedByHost(t, tc.hostOnly) })
	}
}

func testConsoleApprovalClosedByHost(t *testing.T, hostOnly bool) {
	const rule = "approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m}"
	pol := strings.Replace(consolePolicy, rule, "approval: {channels: [host, console], group: payments-approvers}", 1)
	e := newEnv(t, envOpts{policy: pol})
	call := payCall("u_01", 900)
	first := e.preflight(call)
	ra := recordApproval(t, first)
	if hostOnly {
		e.writePolicy(strings.Replace(strings.Replace(consolePolicy, rule, "", 1), "2026-12-02.1", "2026-12-02.2", 1), "")
		if err := e.svc.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	var answers []map[string]any
	for _, q := range first.Questions {
		answers = append(answers, map[string]any{"question_id": q.QuestionID, "approved": true, "value": json.RawMessage(q.Value)})
	}
	call["user_answers"] = answers
	issued := e.preflight(call)
	if issued.Outcome != api.OutcomeVerdictIssued {
		t.Fatalf("the host's approval: %s %+v\n%s", issued.Outcome, issued.Gate, issued.raw)
	}
	if s := issued.slot("confirm:to_account"); s["source"] != string(api.SourceUserAnswer) {
		t.Errorf("approval slot %v", s)
	}
	var a api.Approval
	e.approvalCall("GET", "/v1/approvals/"+ra.ApprovalID, callerToken, nil, &a)
	if a.State != api.ApprovalExpired || a.UsedBy != issued.RecordID {
		t.Errorf("the console approval after the host's: %s used by %q, want expired, used by %s", a.State, a.UsedBy, issued.RecordID)
	}
	var list api.ApprovalList
	if e.approvalCall("GET", "/v1/approvals?state=pending", callerToken, nil, &list); len(list.Approvals) != 0 {
		t.Errorf("still pending: %+v", list.Approvals)
	}
}

// TestConsoleApprovalCoversTheChecklist: a checklist item of kind confirm approves the whole
// call too; where the console alone approves, it is one of the approval's slots, and the
// host's answer to it counts for nothing.
func TestConsoleApprovalCoversTheChecklist(t *testing.T) {
	e := newEnv(t, envOpts{policy: consolePolicy})
	call := payCall("u_01", 900)
	call["user_checklist"] = []map[string]any{{"id": "chk_name", "kind": "confirm", "description": "I have checked the recipient's name"}}
	first := e.preflight(call)
	ra := recordApproval(t, first)
	var a api.Approval
	e.approvalCall("GET", "/v1/approvals/"+ra.ApprovalID, callerToken, nil, &a)
	var ids []string
	for _, s := range a.Slots {
		ids = append(ids, s.SlotID)
	}
	if strings.Join(ids, ",") != "confirm:to_account,confirm_transfer,chk_name" || a.Slots[2].Question != "Please confirm: I have checked the recipient's name" {
		t.Fatalf("approval slots %+v", a.Slots)
	}
	q := first.question("chk_name")
	call["user_answers"] = []map[string]any{{"question_id": q.QuestionID, "approved": true, "value": json.RawMessage(q.Value)}}
	again := e.preflight(call)
	if len(again.RejectedAnswers) != 1 || again.RejectedAnswers[0].Reason != api.AnswerChannelNotAllowed || again.Outcome != api.OutcomeAskUser ||
		recordApproval(t, again).ApprovalID != ra.ApprovalID {
		t.Fatalf("the host's confirmation: %s %+v\n%s", again.Outcome, again.RejectedAnswers, again.raw)
	}
}

// TestApproverTokensRefused: tokens made to pass for an approver of the group decide nothing —
// unsigned (alg none), HMAC-signed, from an issuer the approvers section does not name, or
// expired — and the approval stays pending for the real approver.
func TestApproverTokensRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example OpenID Provider")
	}
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	op := testop.Start(t, opCmd.Path(t), "-resource", approvalsResource, "-group", "id2=payments-approvers")
	e := newEnv(t, envOpts{policy: consolePolicy, now: now, mutate: func(c *Config) {
		c.Approvers = &Approvers{Issuers: []identity.Issuer{{Issuer: op.Issuer, Audience: approvalsResource}}}
	}})
	user2 := op.AuthCode(t, "test-user2")
	ra := recordApproval(t, e.preflight(payCall(identity.PrincipalID(op.Issuer, "id1"), 900)))
	path := "/v1/approvals/" + ra.ApprovalID

	b64 := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	claims := func(iss string) string {
		return b64(map[string]any{"iss": iss, "aud": approvalsResource, "sub": "id2", "groups": []string{"payments-approvers"},
			"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	}
	hs := func(iss string) string {
		in := b64(map[string]string{"alg": "HS256", "typ": "JWT"}) + "." + claims(iss)
		m := hmac.New(sha256.New, []byte("secret"))
		m.Write([]byte(in))
		return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	for _, tc := range []struct{ name, token string }{
		{"alg none", b64(map[string]string{"alg": "none", "typ": "JWT"}) + "." + claims(op.Issuer) + "."},
		{"HS256", hs(op.Issuer)},
		{"an issuer not configured", hs("https://idp.attacker.test")},
		{"the real token's claims, re-signed", strings.Join(strings.Split(user2, ".")[:2], ".") + ".AAAA"},
	} {
		if status, code := e.approvalCall("POST", path, tc.token, decisionBody("approve", ra.ArgumentsDigest), nil); status != 401 || code != api.CodeUnauthorized {
			t.Errorf("%s: %d %s, want 401 unauthorized", tc.name, status, code)
		}
	}
	// The real approver's token, once expired by verdictd's clock, decides nothing either.
	offset.Store(int64(48 * time.Hour))
	if status, code := e.approvalCall("POST", path, user2, decisionBody("approve", ra.ArgumentsDigest), nil); status != 401 || code != api.CodeUnauthorized {
		t.Errorf("an expired token: %d %s, want 401 unauthorized", status, code)
	}
	offset.Store(0)
	var a api.Approval
	if status, code := e.approvalCall("POST", path, user2, decisionBody("approve", ra.ArgumentsDigest), &a); status != 200 || a.State != api.ApprovalApproved {
		t.Fatalf("the real approver: %d %s %+v", status, code, a)
	}
}
