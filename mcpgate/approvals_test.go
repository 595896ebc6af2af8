package mcpgate_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

const (
	approvalsResource = "http://verdictd.test/approvals"
	consoleURL        = "https://console.test"
)

// consoleStack is verdictd and the executor over the shared bank with a policy whose
// transfers only another person of payments-approvers approves, in the console, and the
// OpenID Provider whose test-user2 is such an approver.
type consoleStack struct {
	*stack
	op *testop.OP
}

func newConsoleStack(t *testing.T) *consoleStack { return newConsoleStackTimeout(t, "10m") }

// newConsoleStackTimeout is newConsoleStack with the approval's timeout.
func newConsoleStackTimeout(t *testing.T, timeout string) *consoleStack {
	t.Helper()
	if testing.Short() {
		t.Skip("runs an OpenID Provider, verdictd, the executor and the bank")
	}
	bank := bankStack(t)
	op := testop.Start(t, opCmd.Path(t), "-resource", approvalsResource, "-group", "id2=payments-approvers")
	dir, err := os.MkdirTemp("", "mcpgate-console-")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dir: dir, bankURL: bank.bankURL, bankLog: bank.bankLog, verdictdConfig: map[string]any{
		"approvers": map[string]any{"issuers": []map[string]any{{"issuer": op.Issuer, "audience": approvalsResource}}},
	}}
	t.Cleanup(s.stop)
	policy, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy = bytes.ReplaceAll(policy, []byte("BANK_URL"), []byte(s.bankURL))
	policy = bytes.Replace(policy, []byte(`    notices: ["Transfers are final."]`),
		[]byte(`    notices: ["Transfers are final."]
    approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: `+timeout+`}`), 1)
	if err := s.startGate(policy, map[string]any{"bank": map[string]string{"url": s.bankURL}}); err != nil {
		t.Fatalf("%v\n%s", err, readFile(s.path("verdictd.log")))
	}
	return &consoleStack{stack: s, op: op}
}

// approver is test-user2 deciding through the client package with their own token.
func (s *consoleStack) approver(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(s.verdictd, client.WithToken(s.op.AuthCode(t, "test-user2")))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// approve approves the pending approval id for the digest it shows.
func approve(ctx context.Context, c *client.Client, id string) error {
	a, err := c.Approval(ctx, id, 0)
	if err != nil {
		return err
	}
	_, err = c.Decide(ctx, id, api.DecisionApprove, a.ArgumentsDigest)
	return err
}

// urlHost is a host that declared form and URL elicitation: it answers forms as u does, and
// on a URL elicitation has the approver approve the call after the user consented.
type urlHost struct {
	u        *user
	approver *client.Client
	t        *testing.T

	mu        sync.Mutex
	urls      []*mcp.ElicitParams
	completed chan string
	decided   sync.WaitGroup
}

func (h *urlHost) answer(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	if req.Params.Mode != "url" {
		return h.u.answer(ctx, req)
	}
	h.mu.Lock()
	h.urls = append(h.urls, req.Params)
	h.mu.Unlock()
	// The approver acts once the user has consented: the gateway waits for the decision,
	// whenever it lands.
	h.decided.Go(func() {
		if err := approve(context.Background(), h.approver, req.Params.ElicitationID); err != nil {
			h.t.Errorf("approve %s: %v", req.Params.ElicitationID, err)
		}
	})
	return &mcp.ElicitResult{Action: "accept"}, nil
}

// TestConsoleApprovalByURL: a host that declared URL elicitation is sent to the approval's
// page in the console; test-user2 approves there (through the client package, with a real
// token); the gateway, waiting on verdictd, re-runs the preflight and the transfer runs once,
// with the user's values.
func TestConsoleApprovalByURL(t *testing.T) {
	s := newConsoleStack(t)
	cfg := s.gatewayConfig(t.TempDir())
	cfg["console_url"] = consoleURL
	g := startGateway(t, cfg)
	h := &urlHost{u: &user{values: map[string]any{"to_account": "110-222-333", "amount": 1200}},
		approver: s.approver(t), t: t, completed: make(chan string, 1)}
	sess, err := g.connectAs(t, userToken, "2025-11-25", &mcp.ClientOptions{
		ElicitationHandler: h.answer,
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{
			Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			h.completed <- req.Params.ElicitationID
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mark := s.mark(t)
	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	h.decided.Wait()
	if res.IsError {
		t.Fatalf("call failed: %s %v\n%s", text(res), res.Meta, readFile(g.log))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.urls) != 1 {
		t.Fatalf("%d URL elicitations, want 1", len(h.urls))
	}
	p := h.urls[0]
	if !strings.HasPrefix(p.ElicitationID, "apr_") || p.URL != consoleURL+"/approvals/"+p.ElicitationID ||
		!strings.Contains(p.Message, "approved by an approver") {
		t.Errorf("URL elicitation %+v", p)
	}
	for _, f := range h.u.shown() {
		if strings.Contains(f, `"description":"Approve: `) {
			t.Errorf("the host was asked to approve what only the console approves: %s", f)
		}
	}
	select {
	case id := <-h.completed:
		if id != p.ElicitationID {
			t.Errorf("elicitation %s completed, want %s", id, p.ElicitationID)
		}
	case <-ctxT(t).Done():
		t.Fatal("no notifications/elicitation/complete")
	}
	transfers := only(mustCalls(t, s.stack, mark), "transfer")
	if len(transfers) != 1 || !strings.Contains(transfers[0].Arguments, `"amount":1200`) ||
		!strings.Contains(transfers[0].Arguments, `"to_account":"110-222-333"`) {
		t.Fatalf("bank saw %+v, want one transfer of the user's values", transfers)
	}
	a, err := h.approver.Approval(ctxT(t), p.ElicitationID, 0)
	if err != nil || a.State != api.ApprovalApproved || a.UsedBy == "" || !strings.HasSuffix(a.DecidedBy, "#id2") {
		t.Errorf("approval after the call: %+v %v", a, err)
	}
}

// TestConsoleApprovalElsewhere: a host without URL elicitation is told where the call is
// approved (approval_pending_elsewhere) and nothing runs; once an approver approved, the same
// call in the same conversation runs; a denied one ends approval_denied.
func TestConsoleApprovalElsewhere(t *testing.T) {
	s := newConsoleStack(t)
	cfg := s.gatewayConfig(t.TempDir())
	cfg["console_url"] = consoleURL
	g := startGateway(t, cfg)
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1300}}
	sess, err := g.connectAs(t, userToken, "2025-11-25", &mcp.ClientOptions{ElicitationHandler: u.answer})
	if err != nil {
		t.Fatal(err)
	}
	call := func(conv string) *mcp.CallToolResult { t.Helper(); return transferIn(t, sess, conv) }
	approver := s.approver(t)
	pendingID := func(res *mcp.CallToolResult) string {
		t.Helper()
		_, after, ok := strings.Cut(text(res), consoleURL+"/approvals/")
		id, _, _ := strings.Cut(after, ";")
		if !ok || !strings.HasPrefix(id, "apr_") {
			t.Fatalf("no approval page in %q", text(res))
		}
		return id
	}

	mark := s.mark(t)
	res := call("conv-approve")
	if !res.IsError || reason(res) != api.ReasonApprovalPendingElsewhere {
		t.Fatalf("first call: %v %s %v", res.IsError, text(res), res.Meta)
	}
	id := pendingID(res)
	if c := only(mustCalls(t, s.stack, mark), "transfer"); len(c) != 0 {
		t.Fatalf("a transfer ran before its approval: %+v", c)
	}
	if err := approve(ctxT(t), approver, id); err != nil {
		t.Fatal(err)
	}
	res = call("conv-approve")
	if res.IsError {
		t.Fatalf("the call after the approval: %s %v\n%s", text(res), res.Meta, readFile(g.log))
	}
	if c := only(mustCalls(t, s.stack, mark), "transfer"); len(c) != 1 {
		t.Fatalf("bank saw %+v, want one transfer", c)
	}

	mark = s.mark(t)
	id = pendingID(call("conv-deny"))
	a, err := approver.Approval(ctxT(t), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approver.Decide(ctxT(t), id, api.DecisionDeny, a.ArgumentsDigest); err != nil {
		t.Fatal(err)
	}
	res = call("conv-deny")
	if !res.IsError || reason(res) != api.CodeApprovalDenied {
		t.Fatalf("the call after the denial: %v %s %v", res.IsError, text(res), res.Meta)
	}
	if c := only(mustCalls(t, s.stack, mark), "transfer"); len(c) != 0 {
		t.Fatalf("a denied transfer ran: %+v", c)
	}
	// The caller token reads but never decides.
	caller, err := client.New(s.verdictd, client.WithToken(agentToken))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := caller.Decide(ctxT(t), id, api.DecisionApprove, a.ArgumentsDigest); !isClientCode(err, api.CodeUnauthorized) {
		t.Errorf("a caller token decided: %v", err)
	}
}

// TestConsoleApprovalTimeout: nobody decides; the gateway, waiting on verdictd's long poll,
// ends the call approval_timeout when the approval expires (the policy's shortest timeout,
// 10s: verdictd's own clock decides, the test only waits for the call's answer), and nothing
// runs.
func TestConsoleApprovalTimeout(t *testing.T) {
	s := newConsoleStackTimeout(t, "10s")
	cfg := s.gatewayConfig(t.TempDir())
	cfg["console_url"] = consoleURL
	g := startGateway(t, cfg)
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1400}}
	var (
		mu    sync.Mutex
		asked []*mcp.ElicitParams
	)
	sess, err := g.connectAs(t, userToken, "2025-11-25", &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Mode != "url" {
				return u.answer(ctx, req)
			}
			mu.Lock()
			asked = append(asked, req.Params)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{
			Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	mark := s.mark(t)
	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !res.IsError || reason(res) != api.ReasonApprovalTimeout || len(asked) != 1 {
		t.Fatalf("unapproved call: %v %s %v (%d URL elicitations)", res.IsError, text(res), res.Meta, len(asked))
	}
	if c := only(mustCalls(t, s.stack, mark), "transfer"); len(c) != 0 {
		t.Fatalf("an unapproved transfer ran: %+v", c)
	}
	a, err := s.approver(t).Approval(ctxT(t), asked[0].ElicitationID, 0)
	if err != nil || a.State != api.ApprovalExpired {
		t.Errorf("approval after the timeout: %+v %v", a, err)
	}
}

// isClientCode reports whether err is the client's typed refusal with code.
func isClientCode(err error, code string) bool {
	e, ok := errors.AsType[*client.Error](err)
	return ok && e.Code == code
}

// transferIn makes the model's transfer call in conversation conv and returns its result.
func transferIn(t *testing.T, sess *mcp.ClientSession, conv string) *mcp.CallToolResult {
	t.Helper()
	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs(),
		Meta: mcp.Meta{api.MetaConversationID: conv}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
