package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

// opCmd is the example OpenID Provider, built once for the tests that need one.
var opCmd = testbin.New(testop.Package)

// approvalsResource is the audience of the approver tokens verdictd accepts.
const approvalsResource = "http://verdictd.e2e/approvals"

// approvalPolicy gates two inline tools whose recipient is confirmed out of band: transfer's in
// the console, by another member of payments-approvers than the principal, used within 10 s of
// the decision; wire's by the organisation's approval webhook only.
const approvalPolicy = `policy_version: "e2e-approvals.1"
servers:
  pay:
    audience: [executor-bank]
    tools:
      - name: transfer
        description: Move money between accounts.
        inputSchema:
          type: object
          properties:
            from_account: {type: string, minLength: 1, maxLength: 64}
            to_account: {type: string, minLength: 1, maxLength: 64}
            amount: {type: integer, minimum: 1}
          required: [from_account, to_account, amount]
          additionalProperties: false
      - name: wire
        description: Wire money abroad.
        inputSchema:
          type: object
          properties:
            from_account: {type: string, minLength: 1, maxLength: 64}
            to_account: {type: string, minLength: 1, maxLength: 64}
            amount: {type: integer, minimum: 1}
          required: [from_account, to_account, amount]
          additionalProperties: false
tools:
  pay/transfer:
    class: irreversible
    actions: ["send money"]
    fields:
      to_account: {allowed_sources: [user_answer, instruction], confirm: true}
    approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m, use_within: 10s}
  pay/wire:
    class: irreversible
    actions: ["send money"]
    fields:
      to_account: {allowed_sources: [user_answer, instruction], confirm: true}
    approval: {channels: [webhook], four_eyes: true, webhook: "%HOOK%"}
`

// TestApprovalsOnRealProcesses runs verdictd and the OpenID Provider as processes, with the
// provider's own tokens. A token of the provider without a role for an approval reads nothing
// of it: the list is empty and its id is answered as unknown, by GET and POST. A member of the
// tool's group reads the console approval and not the webhook's; an admin of the approvals
// API reads both, the webhook's in full, and decides neither. Then the member approves the
// transfer, nobody uses the approval within its use_within, and the call made again after it
// is refused approval_lapsed.
func TestApprovalsOnRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs verdictd and the OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t), "-resource", approvalsResource,
		"-group", "id2=payments-approvers", "-group", "auditor=verdict-admins",
		"-client", "auditor:auditor-secret", "-client", "nobody:nobody-secret")
	// The webhook decides nothing: the wire's approval stays pending, for the admin to read.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not now", http.StatusServiceUnavailable)
	}))
	t.Cleanup(hook.Close)
	g := newGateConfig(t, strings.Replace(approvalPolicy, "%HOOK%", hook.URL+"/decide", 1), map[string]any{
		"approvers": map[string]any{
			"issuers":     []map[string]any{{"issuer": op.Issuer, "audience": approvalsResource}},
			"admin_group": "verdict-admins",
		},
	})
	startVerdictd(t, g)
	ctx := t.Context()
	caller := newClient(g.addr, callerToken, 30*time.Second)
	member := newClient(g.addr, op.AuthCode(t, "test-user2"), 30*time.Second)
	admin := newClient(g.addr, op.ClientCredentials(t, "auditor", "auditor-secret"), 30*time.Second)
	nobody := newClient(g.addr, op.ClientCredentials(t, "nobody", "nobody-secret"), 30*time.Second)
	principalID := identity.PrincipalID(op.Issuer, "id1")

	pending := func(tool string) api.RecordApproval {
		t.Helper()
		body := strings.Replace(string(transferRequest("c_"+tool, 900, true)), `"tool":"transfer"`, `"tool":"`+tool+`"`, 1)
		body = strings.Replace(body, `"principal":"`+principal+`"`, `"principal":"`+principalID+`"`, 1)
		r := caller.do(ctx, "POST", "/v1/preflight", []byte(body))
		var rec struct {
			Outcome  string              `json:"outcome"`
			Approval *api.RecordApproval `json:"approval"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &rec) != nil || rec.Outcome != api.OutcomeAskUser || rec.Approval == nil ||
			rec.Approval.State != api.ApprovalPending {
			t.Fatalf("preflight of %s: %d %s", tool, r.status, r.body)
		}
		return *rec.Approval
	}
	transfer, wire := pending("transfer"), pending("wire")
	listed := func(c *client) []string {
		t.Helper()
		r := c.do(ctx, "GET", "/v1/approvals", nil)
		var list api.ApprovalList
		if r.status != 200 || json.Unmarshal(r.body, &list) != nil {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		var ids []string
		for _, a := range list.Approvals {
			ids = append(ids, a.ApprovalID)
		}
		slices.Sort(ids)
		return ids
	}
	both := []string{transfer.ApprovalID, wire.ApprovalID}
	slices.Sort(both)

	// A token without a role: nothing listed, every id unknown, nothing decided.
	if got := listed(nobody); len(got) != 0 {
		t.Errorf("a token without a role lists %v", got)
	}
	decision := func(d, digest string) []byte {
		return fmt.Appendf(nil, `{"decision":%q,"arguments_digest":%q}`, d, digest)
	}
	for _, a := range []api.RecordApproval{transfer, wire} {
		for _, r := range []response{
			nobody.do(ctx, "GET", "/v1/approvals/"+a.ApprovalID, nil),
			nobody.do(ctx, "POST", "/v1/approvals/"+a.ApprovalID, decision("approve", a.ArgumentsDigest)),
		} {
			if r.status != 404 || r.errorCode() != api.CodeNotFound || strings.Contains(string(r.body), "110-222-333") {
				t.Errorf("approval %s to a token without a role: %d %s", a.ApprovalID, r.status, r.body)
			}
		}
	}
	// A member of the group: the console approval, not the webhook's.
	if got := listed(member); !slices.Equal(got, []string{transfer.ApprovalID}) {
		t.Errorf("the group's member lists %v, want only %s", got, transfer.ApprovalID)
	}
	if r := member.do(ctx, "GET", "/v1/approvals/"+wire.ApprovalID, nil); r.status != 404 {
		t.Errorf("the webhook's approval to the group's member: %d %s", r.status, r.body)
	}
	// An admin: both, the webhook's in full; deciding neither.
	if got := listed(admin); !slices.Equal(got, both) {
		t.Errorf("the admin lists %v, want %v", got, both)
	}
	r := admin.do(ctx, "GET", "/v1/approvals/"+wire.ApprovalID, nil)
	var a api.Approval
	if r.status != 200 || json.Unmarshal(r.body, &a) != nil || a.Tool != "wire" || a.Arguments["to_account"] != "110-222-333" ||
		a.Arguments["amount"] != float64(900) || a.MayDecide || a.Refusal != api.CodeChannelNotAllowed {
		t.Fatalf("the webhook's approval to the admin: %d %s", r.status, r.body)
	}
	if r := admin.do(ctx, "POST", "/v1/approvals/"+transfer.ApprovalID, decision("approve", transfer.ArgumentsDigest)); r.status != 403 ||
		r.errorCode() != api.CodeApproverNotInGroup {
		t.Errorf("the admin's decision: %d %s", r.status, r.body)
	}

	// The member approves; the approval is not used within its use_within, and lapses.
	r = member.do(ctx, "POST", "/v1/approvals/"+transfer.ApprovalID, decision("approve", transfer.ArgumentsDigest))
	if r.status != 200 || json.Unmarshal(r.body, &a) != nil || a.State != api.ApprovalApproved {
		t.Fatalf("the member's approval: %d %s", r.status, r.body)
	}
	decided, err1 := time.Parse(time.RFC3339Nano, a.DecidedAt)
	useBy, err2 := time.Parse(time.RFC3339Nano, a.UseBy)
	if err1 != nil || err2 != nil || useBy.Sub(decided) != 10*time.Second {
		t.Fatalf("decided at %q, use by %q: want 10s apart", a.DecidedAt, a.UseBy)
	}
	// verdictd's own answer says when it lapsed: wait for it, up to a bound well past use_by.
	waitLapsed(ctx, t, caller, transfer.ApprovalID, useBy.Add(30*time.Second))
	body := strings.Replace(string(transferRequest("c_transfer", 900, true)), `"principal":"`+principal+`"`, `"principal":"`+principalID+`"`, 1)
	r = caller.do(ctx, "POST", "/v1/preflight", []byte(body))
	var rec struct {
		Outcome string `json:"outcome"`
		Verdict *string
		Gate    struct{ Kind, Detail string }
	}
	if r.status != 200 || json.Unmarshal(r.body, &rec) != nil || rec.Outcome != api.OutcomeRefuse || rec.Verdict != nil ||
		rec.Gate.Kind != api.GateApprovalRefused || rec.Gate.Detail != api.CodeApprovalLapsed {
		t.Fatalf("the call after its approval's use_within: %d %s", r.status, r.body)
	}
}

// waitLapsed reads approval id until verdictd shows it lapsed, failing at deadline.
func waitLapsed(ctx context.Context, t *testing.T, c *client, id string, deadline time.Time) {
	t.Helper()
	for {
		r := c.do(ctx, "GET", "/v1/approvals/"+id, nil)
		var a api.Approval
		if r.status != 200 || json.Unmarshal(r.body, &a) != nil {
			t.Fatalf("approval %s: %d %s", id, r.status, r.body)
		}
		switch {
		case a.State == api.ApprovalLapsed:
			return
		case a.State != api.ApprovalApproved || time.Now().After(deadline):
			t.Fatalf("approval %s is %s at %s, want lapsed after its use_by %s", id, a.State, time.Now().UTC().Format(time.RFC3339Nano), a.UseBy)
		}
		// Until its use_by, or a moment when verdictd's clock is behind this one's.
		wait := 100 * time.Millisecond
		if u, err := time.Parse(time.RFC3339Nano, a.UseBy); err == nil && time.Until(u) > wait {
			wait = time.Until(u)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(wait):
		}
	}
}
