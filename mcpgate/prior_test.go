package mcpgate_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPriorValueIsOfferedAsAChoice: once a transfer ran, the next one offers its recipient as
// a host sees it — the form shows the value from last time and asks keep or change, with an
// optional field for a new value — and "keep" runs exactly that value, "change" the new one.
func TestPriorValueIsOfferedAsAChoice(t *testing.T) {
	bank := bankStack(t)
	dir, err := os.MkdirTemp("", "mcpgate-prior-")
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
	const from = "to_account: {allowed_sources: [user_answer, instruction], confirm: true}"
	if !bytes.Contains(policy, []byte(from)) {
		t.Fatalf("policy has no %q", from)
	}
	policy = bytes.Replace(policy, []byte(from),
		[]byte("to_account: {allowed_sources: [user_answer, instruction, prior_state], confirm: true}"), 1)
	if err := s.startGate(policy, map[string]any{"bank": map[string]string{"url": s.bankURL}}); err != nil {
		t.Fatalf("%v\n%s", err, readFile(s.path("verdictd.log")))
	}
	g := startGateway(t, s.gatewayConfig(t.TempDir()))

	call := func(u *user) map[string]any {
		t.Helper()
		sess := g.connect(t, userToken, &mcp.ClientOptions{ElicitationHandler: u.answer})
		mark := s.mark(t)
		res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("call failed: %s %v\nforms: %v", text(res), res.Meta, u.shown())
		}
		return sentTransfer(t, s, mark)
	}

	// The first transfer: nothing from last time, the recipient is typed.
	first := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}}
	if sent := call(first); sent["to_account"] != "110-222-333" {
		t.Fatalf("first transfer sent %v", sent)
	}
	// Its receipt makes the recipient the value from last time.
	waitLog(ctxT(t), t, s.path("verdictd.log"), `"msg":"receipt accepted"`, `"prior_state":true`)

	keep := &user{values: map[string]any{"to_account": "keep", "amount": 1000}}
	if sent := call(keep); sent["to_account"] != "110-222-333" {
		t.Errorf("keep sent %v, want the recipient from last time", sent)
	}
	keep.mu.Lock()
	offer := keep.forms[0]
	keep.mu.Unlock()
	if !strings.Contains(offer.Message, "Last time the to account was: 110-222-333") {
		t.Errorf("the form does not show the value from last time: %q", offer.Message)
	}
	props, required := formProps(t, offer)
	choice, fresh := props["to_account"], props["to_account_new"]
	if string(mustJSON(choice["enum"])) != `["keep","change"]` || !strings.Contains(choice["description"].(string), "110-222-333") {
		t.Errorf("choice field %v, want keep/change showing the value", choice)
	}
	if fresh["type"] != "string" || fresh["default"] != nil {
		t.Errorf("new-value field %v, want an empty string field", fresh)
	}
	if strings.Contains(strings.Join(required, ","), "to_account_new") || !strings.Contains(strings.Join(required, ","), "to_account") {
		t.Errorf("required %v: the choice is required, the new value is not", required)
	}

	change := &user{values: map[string]any{"to_account": "change", "to_account_new": "220-555-010", "amount": 1000}}
	if sent := call(change); sent["to_account"] != "220-555-010" {
		t.Errorf("change sent %v, want the new recipient", sent)
	}
}
