package mcpgate_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
)

// TestConversationLimitIsItsOwnReason: a verdictd that refuses a principal's new conversation
// (429 conversation_limit) makes the gated call fail with reason conversation_limit, not the
// generic preflight_failed, and nothing reaches the bank.
func TestConversationLimitIsItsOwnReason(t *testing.T) {
	if testing.Short() {
		t.Skip("runs verdictd, the executor and the bank")
	}
	bank := bankStack(t)
	dir, err := os.MkdirTemp("", "mcpgate-convlimit-")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dir: dir, bankURL: bank.bankURL, bankLog: bank.bankLog,
		verdictdConfig: map[string]any{"max_conversations_per_principal": 1}}
	t.Cleanup(s.stop)
	policy, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy = bytes.ReplaceAll(policy, []byte("BANK_URL"), []byte(s.bankURL))
	if err := s.startGate(policy, map[string]any{"bank": map[string]string{"url": s.bankURL}}); err != nil {
		t.Fatalf("%v\n%s", err, readFile(s.path("verdictd.log")))
	}
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	mark := s.mark(t)
	for i, want := range []string{"declined", api.CodeConversationLimit} {
		// Each call is a conversation of its own; the first asks (and is declined), so it
		// stays live and holds the principal's one place.
		u := &user{action: "decline"}
		sess := g.connect(t, userToken, &mcp.ClientOptions{ElicitationHandler: u.answer})
		res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || reason(res) != want {
			t.Fatalf("call %d: want %s, got isError=%v %q %v", i, want, res.IsError, text(res), res.Meta)
		}
		sess.Close()
	}
	if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
		t.Fatalf("bank saw %d transfer calls", n)
	}
}
