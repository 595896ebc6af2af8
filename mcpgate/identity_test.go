package mcpgate_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testop"
	"github.com/verdictgate/verdict/mcpgate"
)

// opCmd is the example OpenID Provider, built on first need.
var opCmd = testbin.New(testop.Package)

// The gateway's resource identifier in these tests. It is not where the test server listens:
// the tokens only have to be issued for it, and its metadata is read at the matching path.
const (
	gwResource    = "https://gateway.test/mcp"
	gwMetadata    = "https://gateway.test/.well-known/oauth-protected-resource/mcp"
	otherResource = "https://other.test/mcp"
)

// idStack is an OpenID Provider, and verdictd and the executor over the shared bank, verdictd
// taking the principal of a preflight from the subject token the gateway forwards: its
// gateway caller may name no principal itself.
type idStack struct {
	*stack
	op *testop.OP
}

// identityStack starts an idStack, each edit adjusting the stack (its daemons' configs) before
// they start.
func identityStack(t *testing.T, edits ...func(*stack, *testop.OP)) *idStack {
	t.Helper()
	if testing.Short() {
		t.Skip("runs an OpenID Provider, verdictd, the executor and the bank")
	}
	bank := bankStack(t)
	op := testop.Start(t, opCmd.Path(t), "-resource", gwResource,
		"-client", "agent:agent-secret", "-client", "other:other-secret="+otherResource,
		"-client", "near:near-secret=https://gateway.test/other")
	dir, err := os.MkdirTemp("", "mcpgate-identity-")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dir: dir, bankURL: bank.bankURL, bankLog: bank.bankLog, verdictdConfig: map[string]any{
		"callers": []map[string]any{
			{"name": "gateway", "token_sha256": httpx.HashToken(agentToken), "principals": []string{}},
			{"name": "executor", "token_sha256": httpx.HashToken(execToken), "principals": []string{}}},
		"identity": map[string]any{"issuers": []map[string]any{{"issuer": op.Issuer, "audience": gwResource}}},
	}}
	t.Cleanup(s.stop)
	for _, edit := range edits {
		edit(s, op)
	}
	policy, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy = bytes.ReplaceAll(policy, []byte("BANK_URL"), []byte(s.bankURL))
	if err := s.startGate(policy, map[string]any{"bank": map[string]string{"url": s.bankURL}}); err != nil {
		t.Fatalf("%v\n%s\n%s", err, readFile(s.path("verdictd.log")), readFile(s.path("executor.log")))
	}
	return &idStack{stack: s, op: op}
}

// identityConfig is the gateway config of the stack with an identity section: no static
// tokens, the principals' stored values keyed by their issuer-qualified ids.
func (s *idStack) identityConfig(dir string) map[string]any {
	cfg := s.gatewayConfig(dir)
	delete(cfg, "stdio_principal")
	preset := map[string]any{"pre_set_data": map[string]any{"from_account": "1102534471"}}
	cfg["principals"] = map[string]any{
		identity.PrincipalID(s.op.Issuer, "agent"): preset,
		identity.PrincipalID(s.op.Issuer, "id2"):   preset,
	}
	cfg["identity"] = map[string]any{"issuers": []map[string]any{{"issuer": s.op.Issuer, "audience": gwResource}}}
	return cfg
}

// clock is the in-process gateway's clock: expiry is tested by moving it, never by waiting.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *clock) set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = d
}

// serveGateway runs the gateway of raw in the test process on its clock c and returns it.
func serveGateway(t *testing.T, raw map[string]any, c *clock) *gateway {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "mcpgate.yaml")
	if err := writeJSON(path, raw); err != nil {
		t.Fatal(err)
	}
	cfg, err := mcpgate.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "mcpgate.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gw, err := mcpgate.New(ctx, *cfg, mcpgate.Options{Now: c.now, Logger: slog.New(slog.NewJSONHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		cancel()
		logf.Close()
		t.Fatal(err)
	}
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = gw.Run(ctx) }()
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-runDone
		gw.Close(context.Background())
		logf.Close()
		if t.Failed() {
			t.Logf("mcpgate log:\n%s", readFile(logPath))
		}
	})
	return &gateway{url: srv.URL, log: logPath}
}

// list posts tools/list with the Authorization header auth ("" for none) and returns the
// answer's status and challenge.
func (g *gateway) list(t *testing.T, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// decided returns verdictd's decision records so far: "<principal> by <principal_auth method>" of
// each, by record id.
func (s *idStack) decided(t *testing.T) map[string]string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.verdictd+"/v1/records?since=2000-01-01T00:00:00Z", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var r struct {
			RecordID      string `json:"record_id"`
			Principal     string `json:"principal"`
			PrincipalAuth struct {
				Method string `json:"method"`
			} `json:"principal_auth"`
		}
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		out[r.RecordID] = r.Principal + " by " + r.PrincipalAuth.Method
	}
	return out
}

// decidedSince returns the principals of the records that are not in before.
func (s *idStack) decidedSince(t *testing.T, before map[string]string) []string {
	t.Helper()
	var out []string
	for id, p := range s.decided(t) {
		if _, ok := before[id]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// TestIdentityGatedCall: a host signed in at the OpenID Provider, by client credentials or by
// the authorization code grant with PKCE, connects with its access token; its gated call is
// decided by verdictd for the token's principal (the gateway forwards the token, and verdictd
// trusts the gateway for no principal of its own) and executed once.
func TestIdentityGatedCall(t *testing.T) {
	s := identityStack(t)
	g := serveGateway(t, s.identityConfig(t.TempDir()), &clock{})
	for _, tc := range []struct {
		name, token, subject string
	}{
		{"client credentials", s.op.ClientCredentials(t, "agent", "agent-secret"), "agent"},
		{"authorization code with PKCE", s.op.AuthCode(t, "test-user2"), "id2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.decided(t)
			u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}}
			sess := g.connect(t, tc.token, &mcp.ClientOptions{ElicitationHandler: u.answer})
			mark := s.mark(t)
			res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				t.Fatalf("call failed: %s %v\nverdictd log:\n%s", text(res), res.Meta, readFile(s.path("verdictd.log")))
			}
			if transfers := only(mustCalls(t, s.stack, mark), "transfer"); len(transfers) != 1 {
				t.Fatalf("bank saw %d transfer calls, want 1: %+v", len(transfers), transfers)
			}
			// verdictd decided for the token's principal, established by the token itself.
			want := identity.PrincipalID(s.op.Issuer, tc.subject) + " by " + api.PrincipalByJWT
			decided := s.decidedSince(t, before)
			if len(decided) == 0 {
				t.Fatal("verdictd recorded no decision")
			}
			for _, p := range decided {
				if p != want {
					t.Errorf("verdictd decided for %q, want %q", p, want)
				}
			}
		})
	}
}

// TestIdentityRefusals: the gateway serves its metadata, and refuses every request whose
// access token it cannot verify, with the challenge RFC 9728 asks for, counted by reason. An
// issuer that cannot be reached fails closed.
func TestIdentityRefusals(t *testing.T) {
	s := identityStack(t)
	foreign := testop.Start(t, opCmd.Path(t), "-resource", gwResource) // an issuer the gateway does not trust
	c := &clock{}
	g := serveGateway(t, s.identityConfig(t.TempDir()), c)

	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(g.url + path)
		if err != nil {
			t.Fatal(err)
		}
		var md identity.ResourceMetadata
		err = json.NewDecoder(resp.Body).Decode(&md)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || md.Resource != gwResource || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != s.op.Issuer {
			t.Errorf("%s: %d %+v %v", path, resp.StatusCode, md, err)
		}
	}

	good := s.op.ClientCredentials(t, "agent", "agent-secret")
	if status, _ := g.list(t, "Bearer "+good); status != 200 {
		t.Fatalf("a good token: %d", status)
	}
	parts := strings.Split(good, ".")
	payload, err := b64.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	none := b64.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "never-published"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	unknownKid, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}

	challenge := `Bearer resource_metadata="` + gwMetadata + `"`
	for _, tc := range []struct {
		name   string
		auth   string
		skew   time.Duration // the gateway's clock, ahead of the OP's
		status int
		reason identity.Reason
	}{
		{"no token", "", 0, 401, identity.TokenMissing},
		{"not bearer", "Basic YWdlbnQ6YWdlbnQtc2VjcmV0", 0, 401, identity.TokenMalformed},
		{"expired", "Bearer " + good, 10 * time.Minute, 401, identity.TokenExpired},
		{"wrong audience", "Bearer " + s.op.ClientCredentials(t, "near", "near-secret"), 0, 401, identity.WrongAudience},
		{"a token for another resource", "Bearer " + s.op.ClientCredentials(t, "other", "other-secret"), 0, 401, identity.WrongAudience},
		{"wrong issuer", "Bearer " + foreign.ClientCredentials(t, "agent", "agent-secret"), 0, 401, identity.WrongIssuer},
		{"alg none", "Bearer " + none, 0, 401, identity.AlgNotAllowed},
		{"a kid the issuer never published", "Bearer " + unknownKid, 0, 401, identity.UnknownKey},
		// A static token is no way in beside the issuers'.
		{"a static token", "Bearer " + userToken, 0, 401, identity.TokenMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			series := `mcpgate_auth_refusals_total{reason="` + string(tc.reason) + `"}`
			before := g.metric(t, series)
			c.set(tc.skew)
			status, ch := g.list(t, tc.auth)
			c.set(0)
			if status != tc.status {
				t.Errorf("HTTP %d, want %d", status, tc.status)
			}
			if !strings.HasPrefix(ch, challenge) {
				t.Errorf("challenge %q, want it to start %q", ch, challenge)
			}
			if tc.reason != identity.TokenMissing && !strings.Contains(ch, `error="invalid_token"`) {
				t.Errorf("challenge %q without invalid_token", ch)
			}
			if after := g.metric(t, series); after != before+1 {
				t.Errorf("%s went from %v to %v, want one more", series, before, after)
			}
		})
	}

	t.Run("issuer down", func(t *testing.T) {
		s.op.Stop()
		// A gateway that has not fetched the issuer's keys yet: it fails closed, and never
		// takes a static token instead.
		fresh := serveGateway(t, s.identityConfig(t.TempDir()), &clock{})
		const series = `mcpgate_auth_refusals_total{reason="idp_unavailable"}`
		if v := fresh.metric(t, series); v != 0 {
			t.Fatalf("%s = %v before any request", series, v)
		}
		status, ch := fresh.list(t, "Bearer "+good)
		if status != http.StatusServiceUnavailable || !strings.HasPrefix(ch, challenge) {
			t.Errorf("HTTP %d %q, want 503 with the challenge", status, ch)
		}
		if v := fresh.metric(t, series); v != 1 {
			t.Errorf("%s = %v, want 1", series, v)
		}
	})
}

// TestIdentityToolScopes: a tool whose tools entry requires a scope is refused to a token
// without it, before anything is decided or called, and stays listed; a token with the scope
// goes on to the gate.
func TestIdentityToolScopes(t *testing.T) {
	s := identityStack(t)
	cfg := s.identityConfig(t.TempDir())
	cfg["tools"] = map[string]any{"bank/transfer": map[string]any{"action_name_preset": "send money", "when_case": "immediate",
		"scopes": []string{"bank:transfer"}}}
	g := serveGateway(t, cfg, &clock{})

	sess := g.connect(t, s.op.ClientCredentials(t, "agent", "agent-secret", "bank:read"), nil)
	tools, err := sess.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slicesContainsTool(tools.Tools, "bank.transfer") {
		t.Error("bank.transfer is not listed to a token without its scope")
	}
	before, mark := s.decided(t), s.mark(t)
	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || reason(res) != api.ReasonInsufficientScope {
		t.Fatalf("without the scope: %s %v", text(res), res.Meta)
	}
	if got, _ := json.Marshal(res.Meta[api.MetaRequiredScopes]); string(got) != `["bank:transfer"]` {
		t.Errorf("required scopes %s", got)
	}
	if calls := mustCalls(t, s.stack, mark); len(calls) != 0 {
		t.Errorf("bank saw %+v", calls)
	}
	if decided := s.decidedSince(t, before); len(decided) != 0 {
		t.Errorf("verdictd decided %v", decided)
	}
	if v := g.metric(t, `mcpgate_auth_refusals_total{reason="insufficient_scope"}`); v != 1 {
		t.Errorf("insufficient_scope refusals %v, want 1", v)
	}

	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}}
	sess = g.connect(t, s.op.ClientCredentials(t, "agent", "agent-secret", "bank:transfer"), &mcp.ClientOptions{ElicitationHandler: u.answer})
	res, err = sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("with the scope: %s %v", text(res), res.Meta)
	}
}

func slicesContainsTool(tools []*mcp.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// TestIdentityConfig: the identity section is read as strictly as the rest, each problem at
// its place, and static tokens are exclusive with it.
func TestIdentityConfig(t *testing.T) {
	hash := httpx.HashToken("x")
	base := "policy: p.yaml\nverdictd: {url: \"http://127.0.0.1:1\", token: t}\nexecutor: {url: \"http://127.0.0.1:2\", token: t}\nstate_key_file: k\n"
	for _, tc := range []struct {
		name, body string
		want       []string // after "<file>:"
	}{
		{"static tokens beside it", base + "identity:\n  issuers: [{issuer: \"https://idp.example.com\", audience: \"https://gw.example.com/mcp\"}]\n" +
			"principals:\n  u_01: {token_sha256: \"" + hash + "\"}\n",
			[]string{`8:10: principals.u_01.token_sha256: is exclusive with the identity section`}},
		{"an unknown key", base + "identity:\n  issuers:\n    - issuer: \"https://idp.example.com\"\n      audiance: x\n",
			[]string{`8:7: identity.issuers[0]: unknown field "audiance" (did you mean "audience"?)`}},
		{"issuer problems", base + "identity:\n  issuers:\n    - issuer: \"http://idp.example.com\"\n      audience: \"https://gw.example.com/mcp\"\n",
			[]string{`7:7: identity.issuers[0].issuer: "http://idp.example.com" must be an https URL`}},
		{"a negative max_token_lifetime", base + "identity:\n  issuers:\n    - issuer: \"https://idp.example.com\"\n      audience: \"https://gw.example.com/mcp\"\n      max_token_lifetime: -24h\n",
			[]string{`9:27: identity.issuers[0].max_token_lifetime: duration "-24h" is negative`}},
		{"audiences differ", base + "identity:\n  issuers:\n    - {issuer: \"https://a.example.com\", audience: \"https://gw.example.com/mcp\"}\n" +
			"    - {issuer: \"https://b.example.com\", audience: \"api://gw\"}\n",
			[]string{`identity.resource: is required when the issuers name different audiences`}},
		{"a resource no issuer serves", base + "identity:\n  resource: \"https://gw.example.com/mcp\"\n  issuers:\n    - {issuer: \"https://a.example.com\", audience: \"api://gw\"}\n",
			[]string{`6:3: identity.resource: "https://gw.example.com/mcp" is the audience of no issuer`}},
		{"the daemons over plain http off loopback", "policy: p.yaml\nverdictd: {url: \"http://verdictd.internal:8780\", token: t}\n" +
			"executor: {url: \"http://executor.internal:8781\", token: t}\nstate_key_file: k\n" +
			"identity:\n  issuers: [{issuer: \"https://idp.example.com\", audience: \"https://gw.example.com/mcp\"}]\n",
			[]string{`2:12: verdictd.url: "http://verdictd.internal:8780": with the identity section the users' access tokens are sent there, so it must be https (http only on a loopback host)`,
				`3:12: executor.url: "http://executor.internal:8781": with the identity section the users' access tokens are sent there, so it must be https (http only on a loopback host)`}},
		{"scopes without identity", base + "principals:\n  u_01: {token_sha256: \"" + hash + "\"}\ntools:\n  bank/transfer: {scopes: [\"bank:transfer\", \"a b\"]}\n",
			[]string{`8:19: tools["bank/transfer"].scopes: needs the identity section`,
				`8:45: tools["bank/transfer"].scopes[1]: "a b" is not a scope token`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mcpgate.yaml")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := mcpgate.LoadConfig(path)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), path+":"+w) && !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// headerLog records, for each request a proxy passes on, whom it was for and the subject token
// header it carried.
type headerLog struct {
	mu   sync.Mutex
	seen []string // "<daemon> <method> <path> <header>"
}

// proxy starts a proxy named name in front of target (a URL) and returns its URL with target's
// path: requests to it reach target as they were sent.
func (h *headerLog) proxy(t *testing.T, name, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, name+" "+r.Method+" "+r.URL.Path+" "+r.Header.Get(identity.SubjectTokenHeader))
		h.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

func (h *headerLog) requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

// TestSubjectTokenOnlyToTheDaemons: the host's access token goes with the gateway's requests
// to verdictd and with its execute request to the executor, which exchanges it at a server
// called with the user's own authority (docs/credentials.md), and with no request to a tool's
// server, nor with a request made outside a call.
func TestSubjectTokenOnlyToTheDaemons(t *testing.T) {
	s := identityStack(t)
	var log headerLog
	dir := t.TempDir()
	// The gateway reaches verdictd, the executor and the bank through proxies that see what it
	// sends; the bank of its policy is the proxy's.
	policy, err := os.ReadFile(s.path("policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policy = bytes.ReplaceAll(policy, []byte(s.bankURL), []byte(log.proxy(t, "bank", s.bankURL)))
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), policy, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := s.identityConfig(dir)
	cfg["policy"] = filepath.Join(dir, "policy.yaml")
	cfg["verdictd"] = map[string]string{"url": log.proxy(t, "verdictd", s.verdictd), "token": agentToken}
	cfg["executor"] = map[string]string{"url": log.proxy(t, "executor", s.executor), "token": agentToken}
	g := serveGateway(t, cfg, &clock{})

	token := s.op.AuthCode(t, "test-user2")
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}}
	sess := g.connect(t, token, &mcp.ClientOptions{ElicitationHandler: u.answer})
	for _, p := range []*mcp.CallToolParams{
		{Name: "bank.transfer", Arguments: modelArgs()},                                 // preflighted and executed
		{Name: "bank.get_balance", Arguments: map[string]any{"account": "220-555-010"}}, // passed to the bank
	} {
		res, err := sess.CallTool(ctxT(t), p)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", p.Name, err, text(res))
		}
	}

	var executed, preflighted, banked int
	for _, r := range log.requests() {
		f := strings.Fields(r)
		daemon, route, sent := f[0], f[1]+" "+f[2], len(f) == 4
		switch {
		case daemon == "bank":
			banked++
			if sent {
				t.Errorf("the bank was sent the host's token: %s %s", daemon, route)
			}
		case route == "POST /v1/execute" || route == "POST /v1/preflight":
			if !sent || f[3] != token {
				t.Errorf("%s %s without the host's token", daemon, route)
			}
			if daemon == "executor" {
				executed++
			} else {
				preflighted++
			}
		case sent:
			// Readiness and the like are asked outside any call.
			t.Errorf("%s %s, outside a call, carried the host's token", daemon, route)
		}
	}
	if executed != 1 || preflighted == 0 || banked == 0 {
		t.Errorf("%d execute requests, %d preflights, %d requests to the bank: want 1, some, some\n%s",
			executed, preflighted, banked, strings.Join(log.requests(), "\n"))
	}
}
