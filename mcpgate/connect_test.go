package mcpgate_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/testing/testop"
	"github.com/verdictgate/verdict/vault"
)

// grantStack is an idStack whose executor calls the bank with each user's own grant from its
// vault (credentials mode user_grant): a call of a user who connected no account there is
// refused credential_required, with the executor's page to connect one.
type grantStack struct {
	*idStack
	vaultKey string
}

// newGrantStack starts the stack with an executor whose bank is a user_grant server; edits
// change the executor's config before it starts.
func newGrantStack(t *testing.T, edits ...func(cfg map[string]any, s *stack)) *grantStack {
	t.Helper()
	if testing.Short() {
		t.Skip("runs an OpenID Provider, verdictd, the executor and the bank")
	}
	key := writeVaultKey(t)
	s := identityStack(t, func(s *stack, op *testop.OP) {
		addr := freeAddr()
		s.executorConfig = map[string]any{
			"listen":   addr,
			"identity": map[string]any{"issuers": []map[string]any{{"issuer": op.Issuer, "audience": gwResource}}},
			"credentials": map[string]any{"bank": map[string]any{"mode": "user_grant", "registration": "dynamic",
				"subject_issuer": op.Issuer}},
			"vault": map[string]any{"key_files": []string{key}},
			"connect": map[string]any{"public_url": "http://" + addr,
				"sign_in": map[string]any{"issuer": op.Issuer, "client_id": "verdict-connect"}},
		}
		for _, edit := range edits {
			edit(s.executorConfig, s)
		}
	})
	return &grantStack{idStack: s, vaultKey: key}
}

// writeVaultKey writes a fresh age identity as age-keygen does, mode 0600, and returns its path.
func writeVaultKey(t *testing.T) string {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "vault.key")
	if err := os.WriteFile(p, []byte("# public key: "+id.Recipient().String()+"\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// connectAccount stores a grant of principal for the bank in the executor's vault, as the
// executor's connect pages do once the user consented: the executor is stopped meanwhile, since
// its file is its own while it runs.
func (s *grantStack) connectAccount(t *testing.T, principal string) {
	t.Helper()
	s.restart(t, "executor", s.executor, func() {
		k, err := vault.LoadKey(s.vaultKey)
		if err != nil {
			t.Fatal(err)
		}
		v, err := vault.Open(s.path("executor-data", executor.DBFile), []*vault.Key{k}, vault.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		if err := v.Put(context.Background(), vault.Grant{Principal: principal, Server: "bank", Kind: vault.KindUserGrant,
			AccessToken: "bank-grant-of-" + principal, TokenType: "Bearer"}); err != nil {
			t.Fatal(err)
		}
	})
}

// refusals counts the executor's credential_required refusals of the verdicts of decision
// record recordID: each is one presentation of a verdict that did not run.
func (s *grantStack) refusals(t *testing.T, recordID string) int {
	t.Helper()
	c, err := client.New(s.executor, client.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if _, err := c.Executions(ctxT(t), client.Query{}, func(raw json.RawMessage) error {
		var r struct {
			RefRecord string `json:"ref_record"`
			Reason    string `json:"reason"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		if r.RefRecord == recordID && r.Reason == "credential_required" {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// connectHost is a host that answers the gateway's forms as u does, and a URL elicitation with
// action, after connect (the user connecting the account on the page) when set.
type connectHost struct {
	u       *user
	action  string
	connect func()

	mu        sync.Mutex
	urls      []*mcp.ElicitParams
	completed chan string
}

func newConnectHost(action string, connect func()) *connectHost {
	return &connectHost{u: &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}},
		action: action, connect: connect, completed: make(chan string, 1)}
}

func (h *connectHost) answer(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	if req.Params.Mode != "url" {
		return h.u.answer(ctx, req)
	}
	h.mu.Lock()
	h.urls = append(h.urls, req.Params)
	h.mu.Unlock()
	if h.connect != nil {
		h.connect()
	}
	return &mcp.ElicitResult{Action: h.action}, nil
}

// options declares form elicitation, and URL elicitation too when urlMode.
func (h *connectHost) options(urlMode bool) *mcp.ClientOptions {
	caps := &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}
	if urlMode {
		caps.URL = &mcp.URLElicitationCapabilities{}
	}
	return &mcp.ClientOptions{
		ElicitationHandler: h.answer,
		Capabilities:       &mcp.ClientCapabilities{Elicitation: caps},
		ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			h.completed <- req.Params.ElicitationID
		},
	}
}

// shownURLs are the URL elicitations the host was sent.
func (h *connectHost) shownURLs() []*mcp.ElicitParams {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*mcp.ElicitParams(nil), h.urls...)
}

// TestConnectAccount: a gated call of a user_grant server whose user connected no account is
// refused by the real executor with its page to connect one. A host that declared URL
// elicitation (2025-11-25 in place, 2026-07-28 through input_required) is asked to open that
// page in the gateway's words; once the user accepted and connected the account, the same
// verdict is presented again and the call runs once, without the model asking again. A
// declined page ends the call; an accepted page whose account is still not connected is
// presented once more and no further; a host without URL elicitation is given the page in a
// tool error; and a page off the executor's origin is not shown at all.
func TestConnectAccount(t *testing.T) {
	s := newGrantStack(t)
	cfg := s.identityConfig(t.TempDir())
	// A user who accepts and does not connect is waited for this long, not the default two
	// minutes.
	cfg["connect_pages"] = map[string]any{"wait": "1s"}
	g := serveGateway(t, cfg, &clock{})
	page := s.executor + "/connect/bank"
	agent := s.op.ClientCredentials(t, "agent", "agent-secret")
	id2 := s.op.AuthCode(t, "test-user2")

	call := func(t *testing.T, token, rev string, h *connectHost, urlMode bool) *mcp.CallToolResult {
		t.Helper()
		sess, err := g.connectAs(t, token, rev, h.options(urlMode))
		if err != nil {
			t.Fatal(err)
		}
		mark := s.mark(t)
		res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if !res.IsError {
			want = 1
		}
		if n := len(only(mustCalls(t, s.stack, mark), "transfer")); n != want {
			t.Fatalf("bank saw %d transfers, want %d (%q %v)", n, want, text(res), res.Meta)
		}
		return res
	}
	refused := func(t *testing.T, res *mcp.CallToolResult, want string) {
		t.Helper()
		if !res.IsError || reason(res) != want {
			t.Fatalf("isError=%v reason %q (%s), want %s\nexecutor log:\n%s", res.IsError, reason(res), text(res), want, readFile(s.path("executor.log")))
		}
	}
	askedOnce := func(t *testing.T, h *connectHost, rev string) {
		t.Helper()
		urls := h.shownURLs()
		if len(urls) != 1 {
			t.Fatalf("%d URL elicitations, want 1", len(urls))
		}
		p := urls[0]
		if p.URL != page || !strings.HasPrefix(p.Message, "Your account at the service must be connected") || strings.Contains(p.Message, "://") {
			t.Errorf("URL elicitation %+v, want the executor's page %s and the gateway's words without a URL", p, page)
		}
		// 2025-11-25 names each URL elicitation; 2026-07-28 has no elicitationId.
		if (p.ElicitationID != "") != (rev != "2026-07-28") {
			t.Errorf("elicitationId %q for a %s host", p.ElicitationID, rev)
		}
	}

	t.Run("a host without URL elicitation is given the page", func(t *testing.T) {
		for _, rev := range []string{"2025-11-25", "2026-07-28"} {
			h := newConnectHost("accept", nil)
			res := call(t, agent, rev, h, false)
			refused(t, res, "credential_required")
			if !strings.Contains(text(res), "connect it at "+page+",") || !strings.HasPrefix(text(res), "Your account at the service must be connected") {
				t.Errorf("%s: the host was told %q, want the page %s", rev, text(res), page)
			}
			if len(h.shownURLs()) != 0 {
				t.Errorf("%s: a host that declared no URL elicitation was sent one", rev)
			}
		}
	})

	t.Run("declined", func(t *testing.T) {
		for _, rev := range []string{"2025-11-25", "2026-07-28"} {
			h := newConnectHost("decline", nil)
			res := call(t, agent, rev, h, true)
			refused(t, res, "declined")
			askedOnce(t, h, rev)
			if strings.Contains(text(res), "://") {
				t.Errorf("%s: the declined call's result holds a URL: %q", rev, text(res))
			}
		}
	})

	t.Run("accepted, still not connected", func(t *testing.T) {
		h := newConnectHost("accept", nil)
		res := call(t, agent, "2025-11-25", h, true)
		refused(t, res, "credential_required")
		askedOnce(t, h, "2025-11-25")
		if strings.Contains(text(res), "://") {
			t.Errorf("a host that was shown the page is given it again in the result: %q", text(res))
		}
		// The verdict was presented twice, and no more: the first refusal, and once after the
		// user's answer.
		rec, _ := res.Meta["io.verdict/record_id"].(string)
		if n := s.refusals(t, rec); n != 2 {
			t.Errorf("the executor refused the verdict %d times, want 2", n)
		}
	})

	t.Run("a page off the executor's origin is not shown", func(t *testing.T) {
		// The gateway reaches the executor through a proxy of another origin: the executor's
		// page is not on the origin the gateway knows it by.
		target, err := url.Parse(s.executor)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
		defer proxy.Close()
		other := s.identityConfig(t.TempDir())
		other["executor"] = map[string]string{"url": proxy.URL, "token": agentToken}
		g2 := serveGateway(t, other, &clock{})
		h := newConnectHost("accept", nil)
		sess, err := g2.connectAs(t, agent, "2025-11-25", h.options(true))
		if err != nil {
			t.Fatal(err)
		}
		res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
		if err != nil {
			t.Fatal(err)
		}
		refused(t, res, "credential_required")
		if len(h.shownURLs()) != 0 || strings.Contains(text(res), "://") {
			t.Errorf("a page off the executor's origin was shown: %d URL elicitations, %q", len(h.shownURLs()), text(res))
		}
		if log := readFile(g2.log); !strings.Contains(log, `"level":"ERROR","msg":"execute: the page to connect an account is not shown"`) {
			t.Errorf("the refused page was not logged as an error:\n%s", log)
		}
	})

	for _, tc := range []struct {
		rev, token, principal string
	}{
		{"2025-11-25", agent, identity.PrincipalID(s.op.Issuer, "agent")},
		{"2026-07-28", id2, identity.PrincipalID(s.op.Issuer, "id2")},
	} {
		t.Run("connected, "+tc.rev, func(t *testing.T) {
			h := newConnectHost("accept", func() { s.connectAccount(t, tc.principal) })
			res := call(t, tc.token, tc.rev, h, true)
			if res.IsError {
				t.Fatalf("call failed: %s %v\nexecutor log:\n%s", text(res), res.Meta, readFile(s.path("executor.log")))
			}
			askedOnce(t, h, tc.rev)
			rec, _ := res.Meta["io.verdict/record_id"].(string)
			if n := s.refusals(t, rec); n != 1 {
				t.Errorf("the executor refused the verdict %d times, want once before the account was connected", n)
			}
			if tc.rev == "2026-07-28" {
				return
			}
			select {
			case id := <-h.completed:
				if id != h.shownURLs()[0].ElicitationID {
					t.Errorf("elicitation %s completed, want %s", id, h.shownURLs()[0].ElicitationID)
				}
			case <-ctxT(t).Done():
				t.Fatal("no notifications/elicitation/complete")
			}
		})
	}
}
