package mcpgate_test

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/identity"
)

// TestUserServerReads: a read of a user server (user_servers) runs at the executor with the
// reader's own grant, never over the gateway's connection: a reader who has connected no
// account is given the page to connect one, and nothing reaches the bank; once connected, the
// read runs; the bank's resources and prompts are not served through the gateway. A
// 2026-07-28 host's read, served without the MCP library, goes with the reader's access token
// as a session's does.
func TestUserServerReads(t *testing.T) {
	s := newGrantStack(t, func(cfg map[string]any, st *stack) {
		// The executor checks the tool's class in its own policy: the gateway's.
		cfg["policy"] = st.path("policy.yaml")
	})
	cfg := s.identityConfig(t.TempDir())
	cfg["user_servers"] = []string{"bank"}
	g := serveGateway(t, cfg, &clock{})
	id2 := s.op.AuthCode(t, "test-user2")

	read := func(t *testing.T, revision string) *mcp.CallToolResult {
		t.Helper()
		plain := g.metric(t, "mcpgate_plain_calls_total")
		sess, err := g.connectAs(t, id2, revision, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		mark := s.mark(t)
		res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.get_balance", Arguments: map[string]any{"account": "1102534471"}})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if !res.IsError {
			want = 1
		}
		if n := len(only(mustCalls(t, s.stack, mark), "get_balance")); n != want {
			t.Fatalf("bank saw %d reads, want %d (%q %v)", n, want, text(res), res.Meta)
		}
		if served := g.metric(t, "mcpgate_plain_calls_total") - plain; (served == 1) != (revision == "2026-07-28") {
			t.Fatalf("%s: served without the library %v times", revision, served)
		}
		return res
	}
	revisions := []string{"2025-11-25", "2026-07-28"}
	for _, rev := range revisions {
		res := read(t, rev)
		if !res.IsError || reason(res) != "credential_required" || !strings.Contains(text(res), s.executor+"/connect/bank") {
			t.Fatalf("%s: a read without an account: isError=%v %q %q", rev, res.IsError, reason(res), text(res))
		}
	}
	s.connectAccount(t, identity.PrincipalID(s.op.Issuer, "id2"))
	for _, rev := range revisions {
		if res := read(t, rev); res.IsError {
			t.Fatalf("%s: a read with the account: %q %q", rev, reason(res), text(res))
		}
	}
}
