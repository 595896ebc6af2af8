package mcpgate_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
)

// TestWebhookApprovalThroughGateway: a transfer whose approval only the organisation's
// approval webhook gives. The host is asked nothing about the approval and sent nowhere:
// verdictd (a real process) posts the approval to the webhook, which approves exactly its
// digest, and the gateway, waiting on the approval, runs the transfer once. A webhook that
// denies ends the call approval_denied, nothing run.
func TestWebhookApprovalThroughGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs verdictd, the executor and the bank")
	}
	decisions := make(chan string, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a api.Approval
		if b, err := io.ReadAll(r.Body); err != nil || json.Unmarshal(b, &a) != nil {
			t.Errorf("the posted approval: %v %s", err, b)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(api.WebhookDecision{Decision: <-decisions, ArgumentsDigest: a.ArgumentsDigest})
	}))
	t.Cleanup(hook.Close)

	bank := bankStack(t)
	dir, err := os.MkdirTemp("", "mcpgate-webhook-")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dir: dir, bankURL: bank.bankURL, bankLog: bank.bankLog}
	t.Cleanup(s.stop)
	policy, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy = bytes.ReplaceAll(policy, []byte("BANK_URL"), []byte(s.bankURL))
	policy = bytes.Replace(policy, []byte(`    notices: ["Transfers are final."]`),
		[]byte(`    notices: ["Transfers are final."]
    approval: {channels: [webhook], four_eyes: true, webhook: "`+hook.URL+`/decide"}`), 1)
	if err := s.startGate(policy, map[string]any{"bank": map[string]string{"url": s.bankURL}}); err != nil {
		t.Fatalf("%v\n%s", err, readFile(s.path("verdictd.log")))
	}
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1500}}
	sess, err := g.connectAs(t, userToken, "2025-11-25", &mcp.ClientOptions{ElicitationHandler: u.answer})
	if err != nil {
		t.Fatal(err)
	}
	call := func(conv string) *mcp.CallToolResult { t.Helper(); return transferIn(t, sess, conv) }

	mark := s.mark(t)
	decisions <- api.DecisionApprove
	if res := call("conv-approve"); res.IsError {
		t.Fatalf("the approved call: %s %v\n%s", text(res), res.Meta, readFile(g.log))
	}
	if c := only(mustCalls(t, s, mark), "transfer"); len(c) != 1 {
		t.Fatalf("bank saw %+v, want one transfer", c)
	}

	mark = s.mark(t)
	decisions <- api.DecisionDeny
	if res := call("conv-deny"); !res.IsError || reason(res) != api.CodeApprovalDenied {
		t.Fatalf("the denied call: %v %s %v", res.IsError, text(res), res.Meta)
	}
	if c := only(mustCalls(t, s, mark), "transfer"); len(c) != 0 {
		t.Fatalf("a denied transfer ran: %+v", c)
	}
}
