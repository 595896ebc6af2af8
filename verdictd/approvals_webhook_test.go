package verdictd

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

// webhookPolicy is consolePolicy with the transfer's approval given by the webhook %HOOK%
// only, under four eyes (the webhook is not the principal), waiting 10m.
var webhookPolicy = strings.Replace(consolePolicy,
	"approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m}",
	`approval: {channels: [webhook], four_eyes: true, timeout: 10m, webhook: "%HOOK%", webhook_timeout: 1s}`, 1)

// hookEnv is an env whose transfer policy asks the approval webhook hook; results tells each
// webhook request's result once it is counted.
type hookEnv struct {
	*env
	hook    *httptest.Server
	results chan string
}

func newHookEnv(t *testing.T, handler http.HandlerFunc, o envOpts) *hookEnv {
	t.Helper()
	hook := httptest.NewServer(handler)
	t.Cleanup(hook.Close)
	if o.policy == "" {
		o.policy = webhookPolicy
	}
	o.policy = strings.Replace(o.policy, "%HOOK%", hook.URL+"/decide", 1)
	results := make(chan string, 64)
	o.webhookResult = func(_, result string) { results <- result }
	return &hookEnv{env: newEnv(t, o), hook: hook, results: results}
}

// answer writes a webhook's answer.
func answer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// readApproval reads the approval a webhook request posts, checked against api/openapi.yaml.
func readApproval(t *testing.T, r *http.Request) api.Approval {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Error(err)
	}
	validateApproval(t, "Approval", b)
	var a api.Approval
	if err := json.Unmarshal(b, &a); err != nil {
		t.Errorf("the posted approval: %v\n%s", err, b)
	}
	return a
}

func decisionJSON(decision, digest string) string {
	return `{"decision": "` + decision + `", "arguments_digest": "` + digest + `", "reason": "ticket PAY-1"}`
}

// TestWebhookApproval: the webhook is asked after the preflight answered (its handler waits
// until the test saw the answer, so a preflight waiting on it would never answer), is shown
// every value of the call, approves exactly its digest, and the next preflight issues the
// verdict; the approval records the webhook as its decider. Then a denial refuses the call.
func TestWebhookApproval(t *testing.T) {
	answered := make(chan struct{})
	var posted atomic.Pointer[api.Approval]
	var decision atomic.Value
	decision.Store(api.DecisionApprove)
	e := newHookEnv(t, func(w http.ResponseWriter, r *http.Request) {
		<-answered
		a := readApproval(t, r)
		posted.Store(&a)
		answer(w, http.StatusOK, decisionJSON(decision.Load().(string), a.ArgumentsDigest))
	}, envOpts{})

	first := e.preflight(payCall("u_01", 900))
	if first.Outcome != api.OutcomeAskUser {
		t.Fatalf("first preflight: %s %+v\n%s", first.Outcome, first.Gate, first.raw)
	}
	ra := recordApproval(t, first)
	if ra.State != api.ApprovalPending || strings.Join(ra.Channels, ",") != "webhook" {
		t.Fatalf("record approval %+v", ra)
	}
	close(answered)
	if got := <-e.results; got != "approve" {
		t.Fatalf("webhook result %s, want approve", got)
	}
	a := posted.Load()
	if a.ApprovalID != ra.ApprovalID || a.ArgumentsDigest != ra.ArgumentsDigest || a.State != api.ApprovalPending ||
		a.Arguments["amount"] != float64(900) || a.Arguments["to_account"] != "110-222-333" ||
		a.Arguments["from_account"] != "1102534471" || len(a.Notices) != 1 || len(a.Slots) != 2 || a.MayDecide {
		t.Errorf("posted approval %+v", a)
	}

	issued := e.preflight(payCall("u_01", 900))
	if issued.Outcome != api.OutcomeVerdictIssued || issued.Verdict == nil {
		t.Fatalf("after the webhook's approval: %s %+v\n%s", issued.Outcome, issued.Gate, issued.raw)
	}
	s := issued.slot("confirm:to_account")
	if s["status"] != api.StatusKnown || s["source"] != string(api.SourceConsoleApproval) || s["approved_by"] != api.DecidedByWebhook {
		t.Errorf("approval slot %v", s)
	}
	var got api.Approval
	e.approvalCall("GET", "/v1/approvals/"+ra.ApprovalID, callerToken, nil, &got)
	if got.State != api.ApprovalApproved || got.DecidedBy != api.DecidedByWebhook || got.UsedBy != issued.RecordID ||
		got.WebhookHost != strings.TrimPrefix(e.hook.URL, "http://") || got.DecisionReason != "ticket PAY-1" {
		t.Errorf("decided approval %+v", got)
	}

	// The same call again is another approval, which the webhook denies.
	decision.Store(api.DecisionDeny)
	next := recordApproval(t, e.preflight(payCall("u_01", 900)))
	if next.ApprovalID == ra.ApprovalID || next.State != api.ApprovalPending {
		t.Fatalf("the same call after its verdict: %+v", next)
	}
	if got := <-e.results; got != "deny" {
		t.Fatalf("webhook result %s, want deny", got)
	}
	refused := e.preflight(payCall("u_01", 900))
	if refused.Outcome != api.OutcomeRefuse || refused.Gate.Kind != api.GateApprovalRefused || refused.Gate.Detail != api.CodeApprovalDenied ||
		refused.Verdict != nil {
		t.Fatalf("after the webhook's denial: %s %+v\n%s", refused.Outcome, refused.Gate, refused.raw)
	}
	for result, want := range map[string]float64{"approve": 1, "deny": 1, "failed": 0} {
		if got := e.metric(`verdictd_approval_webhook_total{result="` + result + `"}`); got != want {
			t.Errorf("verdictd_approval_webhook_total{result=%q} = %v, want %v", result, got, want)
		}
	}
	if got := e.metric(`verdictd_approvals_total{decision="approved"}`); got != 1 {
		t.Errorf("approved approvals %v, want 1", got)
	}
}

// TestWebhookNoDecision: every answer that is not exactly a decision of the pending digest
// decides nothing, and the approval stays pending for the next preflight. The webhook's
// answer is attacker-controlled: a duplicate member could say both, an unknown member or a
// spelling in another case is not the contract.
func TestWebhookNoDecision(t *testing.T) {
	tests := []struct {
		name    string
		handler func(w http.ResponseWriter, r *http.Request, digest string)
		// result is the one counted: failed, or ignored for an answer that came too late.
		result string
	}{
		{"other digest", func(w http.ResponseWriter, _ *http.Request, _ string) {
			answer(w, 200, decisionJSON("approve", "sha256:"+strings.Repeat("0", 64)))
		}, "failed"},
		{"status 500", func(w http.ResponseWriter, _ *http.Request, d string) {
			answer(w, 500, decisionJSON("approve", d))
		}, "failed"},
		{"status 201", func(w http.ResponseWriter, _ *http.Request, d string) {
			answer(w, 201, decisionJSON("approve", d))
		}, "failed"},
		{"redirect", func(w http.ResponseWriter, r *http.Request, _ string) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, "failed"},
		{"malformed", func(w http.ResponseWriter, _ *http.Request, d string) {
			answer(w, 200, `{"decision": "approve", "arguments_digest": "`+d+`"`)
		}, "failed"},
		{"not JSON", func(w http.ResponseWriter, _ *http.Request, d string) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, decisionJSON("approve", d))
		}, "failed"},
		{"duplicate member", func(w http.ResponseWriter, _ *http.Request, d string) {
			answer(w, 200, `{"decision": "deny", "decision": "approve", "arguments_digest": "`+d+`"}`)
		}, "failed"},
		{"unknown member", func(w http.ResponseWriter, _ *http.Request, d string) {
			answer(w, 200, `{"decision": "approve", "arguments_digest": "`+d+`", "approved": true}`)
		}, "failed"},
		{"folded name", func(w http.ResponseWriter, _ *http.Request, d string) {
			answer(w, 200, `{"Decision": "approve", "arguments_digest": "`+d+`"}`)
		}, "failed"},
		{"other decision", func(w http.ResponseWriter, _ *http.Request, d string) {
			answer(w, 200, decisionJSON("yes", d))
		}, "failed"},
		{"no digest", func(w http.ResponseWriter, _ *http.Request, _ string) {
			answer(w, 200, `{"decision": "approve"}`)
		}, "failed"},
		{"long reason", func(w http.ResponseWriter, _ *http.Request, d string) {
			answer(w, 200, `{"decision": "approve", "arguments_digest": "`+d+`", "reason": "`+strings.Repeat("x", api.MaxDecisionReason+1)+`"}`)
		}, "failed"},
		{"oversize", func(w http.ResponseWriter, _ *http.Request, d string) {
			answer(w, 200, decisionJSON("approve", d)+strings.Repeat(" ", 64<<10) /* past the bound, 64 KiB */)
		}, "failed"},
		{"timeout", func(w http.ResponseWriter, r *http.Request, d string) {
			<-r.Context().Done() // verdictd gives up after webhook_timeout and closes the request
		}, "failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newHookEnv(t, func(w http.ResponseWriter, r *http.Request) {
				tt.handler(w, r, readApproval(t, r).ArgumentsDigest)
			}, envOpts{})
			ra := recordApproval(t, e.preflight(payCall("u_01", 900)))
			if got := <-e.results; got != tt.result {
				t.Fatalf("webhook result %s, want %s", got, tt.result)
			}
			var a api.Approval
			e.approvalCall("GET", "/v1/approvals/"+ra.ApprovalID, callerToken, nil, &a)
			if a.State != api.ApprovalPending || a.DecidedBy != "" {
				t.Errorf("after the answer the approval is %+v", a)
			}
			again := e.preflight(payCall("u_01", 900))
			if again.Outcome != api.OutcomeAskUser || recordApproval(t, again).ApprovalID != ra.ApprovalID {
				t.Errorf("the call again: %s %+v", again.Outcome, recordApproval(t, again))
			}
			if got := e.metric(`verdictd_approval_webhook_total{result="` + tt.result + `"}`); got != 1 {
				t.Errorf("verdictd_approval_webhook_total{result=%q} = %v, want 1", tt.result, got)
			}
		})
	}
}

// TestWebhookAnswerTooLate: an approval that expired while the webhook decided is not
// decided by its answer (counted ignored); the next preflight refuses the call expired.
func TestWebhookAnswerTooLate(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	e := newHookEnv(t, func(w http.ResponseWriter, r *http.Request) {
		a := readApproval(t, r)
		offset.Store(int64(10*time.Minute + time.Second))
		answer(w, 200, decisionJSON("approve", a.ArgumentsDigest))
	}, envOpts{now: now})
	ra := recordApproval(t, e.preflight(payCall("u_01", 900)))
	if got := <-e.results; got != "ignored" {
		t.Fatalf("webhook result %s, want ignored", got)
	}
	var a api.Approval
	e.approvalCall("GET", "/v1/approvals/"+ra.ApprovalID, callerToken, nil, &a)
	if a.State != api.ApprovalExpired || a.DecidedBy != "" {
		t.Errorf("after the late answer the approval is %+v", a)
	}
	if refused := e.preflight(payCall("u_01", 900)); refused.Outcome != api.OutcomeRefuse || refused.Gate.Detail != api.CodeApprovalExpired {
		t.Fatalf("after the expiry: %s %+v", refused.Outcome, refused.Gate)
	}
}

// TestWebhookBesideConsole: with [console, webhook], the first decision recorded holds. An
// approver who decides first leaves the webhook's answer ignored; a webhook that decides
// first approves under the rule's group, which binds console approvers only.
func TestWebhookBesideConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t), "-resource", approvalsResource, "-group", "id2=payments-approvers")
	hold := make(chan struct{})
	var holding atomic.Bool
	holding.Store(true)
	policy := strings.Replace(consolePolicy,
		"approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m}",
		`approval: {channels: [console, webhook], four_eyes: true, group: payments-approvers, timeout: 10m, webhook: "%HOOK%"}`, 1)
	e := newHookEnv(t, func(w http.ResponseWriter, r *http.Request) {
		a := readApproval(t, r)
		if holding.Load() {
			<-hold
		}
		answer(w, http.StatusOK, decisionJSON("approve", a.ArgumentsDigest))
	}, envOpts{policy: policy, mutate: func(c *Config) {
		c.Approvers = &Approvers{Issuers: []identity.Issuer{{Issuer: op.Issuer, Audience: approvalsResource}}}
	}})
	user2 := op.AuthCode(t, "test-user2")
	id1, id2 := identity.PrincipalID(op.Issuer, "id1"), identity.PrincipalID(op.Issuer, "id2")

	ra := recordApproval(t, e.preflight(payCall(id1, 900)))
	if status, code := e.approvalCall("POST", "/v1/approvals/"+ra.ApprovalID, user2, decisionBody("deny", ra.ArgumentsDigest), nil); status != 200 {
		t.Fatalf("deny in the console: %d %s", status, code)
	}
	close(hold)
	if got := <-e.results; got != "ignored" {
		t.Fatalf("webhook result %s, want ignored", got)
	}
	var a api.Approval
	e.approvalCall("GET", "/v1/approvals/"+ra.ApprovalID, callerToken, nil, &a)
	if a.State != api.ApprovalDenied || a.DecidedBy != id2 || a.WebhookHost != "" {
		t.Fatalf("the console's denial became %+v", a)
	}
	if refused := e.preflight(payCall(id1, 900)); refused.Outcome != api.OutcomeRefuse || refused.Gate.Detail != api.CodeApprovalDenied {
		t.Fatalf("after the denial: %s %+v", refused.Outcome, refused.Gate)
	}

	holding.Store(false)
	recordApproval(t, e.preflight(payCall(id1, 950)))
	if got := <-e.results; got != "approve" {
		t.Fatalf("webhook result %s, want approve", got)
	}
	issued := e.preflight(payCall(id1, 950))
	if issued.Outcome != api.OutcomeVerdictIssued {
		t.Fatalf("after the webhook's approval under a group rule: %s %+v\n%s", issued.Outcome, issued.Gate, issued.raw)
	}
	if s := issued.slot("confirm:to_account"); s["approved_by"] != api.DecidedByWebhook {
		t.Errorf("approval slot %v", s)
	}
}

// TestWebhookQueueBound: with one request in flight and room for one more, a third new
// approval is not posted (dropped) and stays pending; the preflights are never held up.
func TestWebhookQueueBound(t *testing.T) {
	entered, release := make(chan string, 8), make(chan struct{})
	e := newHookEnv(t, func(w http.ResponseWriter, r *http.Request) {
		a := readApproval(t, r)
		entered <- a.ApprovalID
		select {
		case <-release:
		case <-r.Context().Done():
		}
		answer(w, 500, `{}`)
	}, envOpts{mutate: func(c *Config) { c.ApprovalWebhooks = ApprovalWebhooks{InFlight: 1, Queue: 1} }})
	first := recordApproval(t, e.preflight(payCall("u_01", 901)))
	if got := <-entered; got != first.ApprovalID {
		t.Fatalf("in flight %s, want %s", got, first.ApprovalID)
	}
	second := recordApproval(t, e.preflight(payCall("u_01", 902))) // queued
	third := e.preflight(payCall("u_01", 903))                     // dropped
	if third.Outcome != api.OutcomeAskUser || recordApproval(t, third).State != api.ApprovalPending {
		t.Fatalf("the dropped call: %s %+v", third.Outcome, recordApproval(t, third))
	}
	if got := <-e.results; got != "dropped" {
		t.Fatalf("webhook result %s, want dropped", got)
	}
	close(release)
	if got := <-entered; got != second.ApprovalID {
		t.Errorf("then in flight %s, want the queued %s", got, second.ApprovalID)
	}
	for range 2 {
		if got := <-e.results; got != "failed" {
			t.Errorf("webhook result %s, want failed", got)
		}
	}
	if got := e.metric(`verdictd_approval_webhook_total{result="dropped"}`); got != 1 {
		t.Errorf("dropped %v, want 1", got)
	}
	if got := e.metric(`verdictd_approvals_pending`); got != 3 {
		t.Errorf("pending %v, want 3", got)
	}
}
