package executor

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testop"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/vault"
	"github.com/verdictgate/verdict/verdict"
)

// The bank's accounts of the two users (examples/bank's ledger), and the users: each has an
// account at the organisation's identity provider and at the bank's own authorization server,
// both example providers, whose users are the same.
const (
	aliceUser, bobUser       = "test-user@127.0.0.1", "test-user2"
	aliceSub, bobSub         = "id1", "id2"
	aliceAccount, bobAccount = "1102534471", "220-555-010"
)

// lateProxy is a reverse proxy whose address is known before its target: the bank's resource
// identifier is its URL, which its authorization server must be told before the bank, which
// discovers that server at start, can run.
type lateProxy struct {
	*httptest.Server
	target atomic.Pointer[url.URL]
}

func newLateProxy(t *testing.T) *lateProxy {
	p := &lateProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := p.target.Load()
		if u == nil {
			http.Error(w, "no target yet", http.StatusBadGateway)
			return
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.ErrorLog = log.New(io.Discard, "", 0) // a stream the bank ends is no news
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// connectEnv is an executor whose one server, the bank, is an OAuth protected resource with
// its own authorization server (as), called in mode user_grant; its users sign in at idp.
type connectEnv struct {
	*env
	idp, as  *testop.OP
	bankURL  string // the bank's MCP endpoint and resource, through the proxy
	public   string // the executor's connect pages' base URL
	log      *syncBuffer
	bankFile string
}

// register registers a public client of the code flow at op (RFC 7591) and returns its id.
func register(t *testing.T, op *testop.OP, redirect string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"client_name": "executor connect", "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}})
	resp, err := http.Post(op.Issuer+"/register", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.ClientID == "" {
		t.Fatalf("register at %s: %d %v %+v", op.Issuer, resp.StatusCode, err, out)
	}
	return out.ClientID
}

// newConnectEnv starts the environment; edits change the executor's config before it starts.
func newConnectEnv(t *testing.T, registration string, edits ...func(*Config)) *connectEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("runs two OpenID Providers and the bank")
	}
	x := &connectEnv{log: &syncBuffer{}}
	proxy := newLateProxy(t)
	x.bankURL = proxy.URL + "/mcp"
	x.idp = testop.Start(t, opCmd.Path(t), "-resource", gwResource, "-registration")
	x.as = testop.Start(t, opCmd.Path(t), "-resource", x.bankURL, "-registration", "-require-resource")
	dir := t.TempDir()
	x.bankFile = filepath.Join(dir, "bank.json")
	direct, _ := startHTTPBank(t, dir, "127.0.0.1:0", "--auth-issuer", x.as.Issuer, "--resource", x.bankURL,
		"--owner", aliceSub+"="+aliceAccount, "--owner", bobSub+"="+bobAccount)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = ""
	proxy.target.Store(u)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x.public = "http://" + ln.Addr().String()
	signIn := register(t, x.idp, x.public+"/connect/signed-in")
	var clientID string
	if registration == RegistrationConfigured {
		clientID = register(t, x.as, x.public+"/connect/callback")
	}

	e := &env{t: t, dir: dir, logger: slog.New(slog.NewJSONHandler(x.log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	e.clock = time.Now
	for _, d := range []string{"issuer", "receipt"} {
		if _, err := keys.Keygen(filepath.Join(dir, d), jose.EdDSA); err != nil {
			t.Fatal(err)
		}
	}
	if e.issuer, err = keys.LoadSigner(filepath.Join(dir, "issuer", keys.PrivateKeyFile)); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Listen:         "127.0.0.1:0",
		DataDir:        filepath.Join(dir, "data"),
		ExecutorID:     execID,
		TrustedIssuers: []TrustedIssuer{{Issuer: issuerID, JWKS: filepath.Join(dir, "issuer", "jwks.json")}},
		ReceiptKey:     filepath.Join(dir, "receipt", keys.PrivateKeyFile),
		// The catalog lists the bank's tools as a client of the authorization server, whose
		// own account holds nothing: a service identity that may list and do nothing else.
		Servers: map[string]upstream.Config{"bank": {URL: x.bankURL,
			Headers: map[string]string{"Authorization": "Bearer " + x.as.ClientCredentials(t, "agent", "agent-secret")}}},
		Credentials: map[string]Credential{"bank": {Mode: api.CredentialUserGrant, Registration: registration, ClientID: clientID, SubjectIssuer: x.idp.Issuer,
			Scopes: []string{"openid", "offline_access"}}},
		Identity:         &identity.Config{Issuers: []identity.Issuer{{Issuer: x.idp.Issuer, Audience: gwResource}}},
		Vault:            &VaultConfig{KeyFiles: []string{writeVaultKey(t, dir, "vault.key")}},
		Connect:          &Connect{PublicURL: x.public, SignIn: SignIn{Issuer: x.idp.Issuer, ClientID: signIn}},
		Callers:          []Caller{{Name: "gate", TokenSHA256: httpx.HashToken(callerToken)}},
		AdminTokenSHA256: httpx.HashToken(adminToken),
		Policy:           filepath.Join("..", "examples", "policy.yaml"), // the bank's tools' classes
	}
	for _, edit := range edits {
		edit(&cfg)
	}
	ctx := context.Background()
	svc, err := New(ctx, cfg, Options{Now: e.clock, Logger: e.logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewUnstartedServer(svc.Handler())
	e.srv.Listener.Close()
	e.srv.Listener = ln
	e.srv.Start()
	t.Cleanup(func() {
		e.srv.Close()
		svc.Close(context.Background())
	})
	e.svc = svc
	x.env = e
	return x
}

// connect has user connect their bank account through the connect pages, signing in at both
// providers as a person would, and returns the page the flow ended at.
func (x *connectEnv) connect(user string) *testop.Page {
	x.t.Helper()
	b := x.idp.Browser(user).Also(x.as, user)
	p, err := b.Visit(context.Background(), x.public+"/connect/bank", "")
	if err != nil {
		x.t.Fatal(err)
	}
	return p
}

// transfer signs principal's verdict for a transfer of amount from one account to another.
func (x *connectEnv) transfer(principal, from string, amount int) (string, string) {
	x.t.Helper()
	tool, ok := x.svc.catalog.Lookup("bank", "transfer")
	if !ok {
		x.t.Fatal("bank/transfer not in catalog")
	}
	args := map[string]any{"from_account": from, "to_account": "110-222-333", "amount": amount}
	digest, err := canonical.Digest(args)
	if err != nil {
		x.t.Fatal(err)
	}
	b, _ := json.Marshal(args)
	jti, _ := verdict.NewID()
	now := x.clock().Unix()
	return x.sign(verdict.Claims{
		Issuer: issuerID, Subject: principal, Audience: []string{execID},
		IssuedAt: now, NotBefore: now, Expiry: now + 60, ID: jti,
		Server: "bank", Tool: "transfer", ToolDigest: tool.Digest, Policy: "test.1",
		Arguments: digest, ActionKey: principal + ":transfer", Phase: "at_trigger", Record: "rec_test",
	}), string(b)
}

// run presents the verdict v for args with the user's token tok.
func (x *connectEnv) run(v, args, tok string) reply {
	x.t.Helper()
	return x.postWith(fmt.Sprintf(`{"verdict": %q, "arguments": %s}`, v, args), map[string]string{identity.SubjectTokenHeader: tok})
}

// readReply is the executor's answer to a read.
type readReply struct {
	Status int
	Body   string
}

// read posts a read of the bank's tool with the user's token tok ("" sends none).
func (x *connectEnv) read(tool, args, tok string) readReply {
	x.t.Helper()
	req, err := http.NewRequest(http.MethodPost, x.srv.URL+"/v1/read", strings.NewReader(`{"server":"bank","tool":"`+tool+`","arguments":`+args+`}`))
	if err != nil {
		x.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+callerToken)
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set(identity.SubjectTokenHeader, tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		x.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return readReply{resp.StatusCode, string(b)}
}

// get gets path of the executor as the test caller, with the user's token tok.
func (x *connectEnv) get(path, tok string) readReply {
	req, err := http.NewRequest(http.MethodGet, x.srv.URL+path, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+callerToken)
	req.Header.Set(identity.SubjectTokenHeader, tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return readReply{Body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return readReply{resp.StatusCode, string(b)}
}

// ledger returns the bank's transactions as stored.
func (x *connectEnv) ledger() []map[string]any {
	x.t.Helper()
	b, err := os.ReadFile(x.bankFile)
	if err != nil {
		x.t.Fatal(err)
	}
	var st struct {
		Transactions []map[string]any `json:"transactions"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		x.t.Fatal(err)
	}
	return st.Transactions
}

// TestConnectAndCall: two users each connect their own bank account at the bank's own
// authorization server through the connect pages, and each one's transfer runs with that
// user's own grant, as the bank's ledger says; a user without a grant is refused with the page
// to connect at and nothing spent; a verdict for one user never reaches the bank with the
// other's grant, whatever account the call names; a grant whose refresh token the
// authorization server revoked is removed and the user asked to connect again; and no token is
// in the log.
func TestConnectAndCall(t *testing.T) {
	for _, reg := range []string{RegistrationDynamic, RegistrationConfigured} {
		t.Run(reg, func(t *testing.T) { testConnectAndCall(t, reg) })
	}
}

func testConnectAndCall(t *testing.T, registration string) {
	x := newConnectEnv(t, registration)
	alice, bob := x.idp.AuthCode(t, aliceUser), x.idp.AuthCode(t, bobUser)
	aliceID, bobID := identity.PrincipalID(x.idp.Issuer, aliceSub), identity.PrincipalID(x.idp.Issuer, bobSub)

	// Before connecting: refused with the page, and the same verdict runs afterwards.
	v, args := x.transfer(aliceID, aliceAccount, 100)
	r := x.run(v, args, alice)
	if r.Status != http.StatusForbidden || r.Error.Code != api.ExecutionReasonCredentialRequired || r.Error.ConnectURL != x.public+"/connect/bank" {
		t.Fatalf("before connecting: %d %q %q", r.Status, r.Error.Code, r.Error.ConnectURL)
	}
	// A wait for alice's account, as the gateway makes once she accepted to open the page,
	// ends when she has connected it; bob's, without waiting, says he has not.
	waited := make(chan readReply, 1)
	go func() { waited <- x.get("/v1/connections/bank?wait=1m", alice) }()
	if r := x.get("/v1/connections/bank", bob); r.Status != http.StatusOK || r.Body != `{"server":"bank","connected":false}`+"\n" {
		t.Fatalf("bob's connection: %d %q", r.Status, r.Body)
	}
	if p := x.connect(aliceUser); p.Status != http.StatusOK || !bytes.Contains(p.Body, []byte("Account connected")) {
		t.Fatalf("connect: ended at %s %d:\n%s", p.URL, p.Status, p.Body)
	}
	if !strings.Contains(x.log.String(), `"msg":"account connected"`) || strings.Contains(x.log.String(), `"grant_id":""`) {
		t.Errorf("the connection is not logged with its grant's id")
	}
	if r := <-waited; r.Status != http.StatusOK || r.Body != `{"server":"bank","connected":true}`+"\n" {
		t.Fatalf("the wait for alice's connection: %d %q", r.Status, r.Body)
	}
	if r := x.run(v, args, alice); r.Status != http.StatusOK || r.Execution["credential"] != api.CredentialUserGrant {
		t.Fatalf("alice's transfer: %d %q %s %v", r.Status, r.Error.Code, r.Error.Message, r.Result)
	}

	// Bob has not connected: his verdict is refused, whoever's account it names.
	vb, argsb := x.transfer(bobID, aliceAccount, 50)
	if r := x.run(vb, argsb, bob); r.Status != http.StatusForbidden || r.Error.Code != api.ExecutionReasonCredentialRequired {
		t.Fatalf("bob before connecting: %d %q", r.Status, r.Error.Code)
	}
	x.connect(bobUser)
	// Now bob's verdict for a transfer from alice's account reaches the bank with bob's grant,
	// and the bank refuses it: bob does not own the account.
	r = x.run(vb, argsb, bob)
	if r.Status == http.StatusOK && r.Result["isError"] != true {
		t.Fatalf("bob moved money from alice's account: %+v", r.Result)
	}
	vb, argsb = x.transfer(bobID, bobAccount, 50)
	if r := x.run(vb, argsb, bob); r.Status != http.StatusOK || r.Result["isError"] == true {
		t.Fatalf("bob's transfer: %d %q %v", r.Status, r.Error.Code, r.Result)
	}
	// Reads run with the reader's own grant: each sees their own transactions only.
	for _, rd := range []struct{ tok, own, other string }{{alice, aliceAccount, bobAccount}, {bob, bobAccount, aliceAccount}} {
		r := x.read("list_transactions", `{}`, rd.tok)
		if r.Status != http.StatusOK || !strings.Contains(r.Body, rd.own) || strings.Contains(r.Body, rd.other) {
			t.Fatalf("a read lists another's transactions, or fails: %d %s", r.Status, r.Body)
		}
	}
	for _, tt := range []struct {
		tool, tok string
		status    int
		code      string
	}{
		{"list_transactions", "", http.StatusForbidden, api.ExecutionReasonCredentialRequired}, // a read needs the reader's token
		{"transfer", alice, http.StatusForbidden, api.ReadReasonNotPassThrough},                // a gated tool runs on a verdict alone
		{"no_such_tool", alice, http.StatusForbidden, api.ReadReasonNotPassThrough},
	} {
		if r := x.read(tt.tool, `{"from_account":"`+aliceAccount+`","to_account":"110-222-333","amount":1}`, tt.tok); r.Status != tt.status || !strings.Contains(r.Body, `"code":"`+tt.code+`"`) {
			t.Errorf("read %s: %d %s, want %d %s", tt.tool, r.Status, r.Body, tt.status, tt.code)
		}
	}

	actors := map[string]string{}
	for _, tx := range x.ledger() {
		if a, _ := tx["actor"].(string); a != "" {
			actors[fmt.Sprint(tx["from_account"])] += a + " "
		}
	}
	if actors[aliceAccount] != aliceSub+" " || actors[bobAccount] != bobSub+" " {
		t.Fatalf("ledger actors by account %v, want alice's transfer by %s and bob's by %s", actors, aliceSub, bobSub)
	}

	// Alice's grant revoked at the authorization server: once her access token has expired,
	// the refresh is refused, the grant removed, and she is asked to connect again.
	ctx := context.Background()
	gr, err := x.svc.vault.Get(ctx, aliceID, "bank")
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"token": {gr.RefreshToken}, "token_type_hint": {"refresh_token"}, "client_id": {cmp.Or(gr.ClientID, x.svc.cfg.Credentials["bank"].ClientID)}}
	resp, err := http.PostForm(x.as.Issuer+"/revoke", form)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %v %v", err, resp)
	}
	resp.Body.Close()
	// Her access token as the executor holds it expires now: the next call refreshes first.
	gr.Expiry = x.clock().Add(-time.Second)
	if err := x.svc.vault.Put(ctx, gr); err != nil {
		t.Fatal(err)
	}
	x.svc.tokens.drop(aliceID, "bank")
	v, args = x.transfer(aliceID, aliceAccount, 10)
	r = x.run(v, args, alice)
	if r.Status != http.StatusForbidden || r.Error.Code != api.ExecutionReasonCredentialRequired || !strings.Contains(r.Error.Message, "revoked") {
		t.Fatalf("after revocation: %d %q %s\n%s", r.Status, r.Error.Code, r.Error.Message, x.log)
	}
	if _, err := x.svc.vault.Get(ctx, aliceID, "bank"); err == nil {
		t.Error("the revoked grant is still in the vault")
	}

	// The catalog says whose authority the bank's calls carry.
	creq, _ := http.NewRequest(http.MethodGet, x.srv.URL+"/v1/catalog", nil)
	creq.Header.Set("Authorization", "Bearer "+adminToken)
	if resp, err := http.DefaultClient.Do(creq); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"credential":"user_grant"`) {
			t.Errorf("the catalog does not name the bank's credential mode: %s", b)
		}
	}
	// Bob's grant, listed and revoked through the admin API: at the authorization server too,
	// and his next call is asked to connect again.
	admin, err := client.New(x.srv.URL, client.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	gs, err := admin.Grants(ctx, bobID)
	if err != nil || len(gs) != 1 || gs[0].Server != "bank" || gs[0].Kind != api.CredentialUserGrant || !gs[0].HasRefreshToken || gs[0].Issuer != x.as.Issuer {
		t.Fatalf("bob's grants: %v %+v", err, gs)
	}
	bobGrant, err := x.svc.vault.Get(ctx, bobID, "bank")
	if err != nil {
		t.Fatal(err)
	}
	out, err := admin.RevokeGrant(ctx, bobID, "bank")
	if err != nil || out.Upstream != api.GrantUpstreamRevoked || out.Grant.ID != gs[0].ID {
		t.Fatalf("revoke: %v %+v", err, out)
	}
	vb, argsb = x.transfer(bobID, bobAccount, 5)
	if r := x.run(vb, argsb, bob); r.Status != http.StatusForbidden || r.Error.Code != api.ExecutionReasonCredentialRequired {
		t.Fatalf("bob after revocation: %d %q", r.Status, r.Error.Code)
	}
	if _, err := admin.RevokeGrant(ctx, bobID, "bank"); err == nil {
		t.Error("a second revocation found a grant")
	}

	for _, g := range []vault.Grant{gr, bobGrant} {
		for _, secret := range []string{g.AccessToken, g.RefreshToken, g.ClientSecret} {
			if secret != "" && strings.Contains(x.log.String(), secret) {
				t.Errorf("a grant's secret is in the log")
			}
		}
	}
}
