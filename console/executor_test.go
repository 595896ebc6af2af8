package console

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	jose "github.com/go-jose/go-jose/v4"
	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testop"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/vault"
)

// executorAdminToken is the real executor's admin token, the console's read token for it.
const executorAdminToken = "console-test-executor-admin"

// realExecutor writes an executor config whose server ledger is called with user grants, puts
// grants in its vault file, starts the executor as a process, and returns its base URL once it
// answers /healthz. The ledger's own address answers nothing useful: the grants API needs
// neither its tools nor its metadata, and a grant names the authorization server it was issued
// by, which the executor asks to revoke it.
func realExecutor(t *testing.T, op *testop.OP, grants []vault.Grant, edit func(*store.DB)) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"issuer", "receipt"} {
		if _, err := keys.Keygen(filepath.Join(dir, d), jose.EdDSA); err != nil {
			t.Fatal(err)
		}
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "vault.key")
	if err := os.WriteFile(keyFile, []byte("# public key: "+id.Recipient().String()+"\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	key, err := vault.LoadKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := store.Open(filepath.Join(dataDir, "executor.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(db, []*vault.Key{key}, vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range grants {
		if err := v.Put(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if edit != nil {
		edit(db)
	}
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}

	ledger := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(ledger.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := map[string]any{
		"listen":          addr,
		"data_dir":        dataDir,
		"executor_id":     "executor-console-test",
		"trusted_issuers": []map[string]string{{"issuer": "verdictd-console-test", "jwks": filepath.Join(dir, "issuer", keys.JWKSFile)}},
		"receipt_key":     filepath.Join(dir, "receipt", keys.PrivateKeyFile),
		"servers":         map[string]any{"ledger": map[string]any{"url": ledger.URL + "/mcp"}},
		"credentials":     map[string]any{"ledger": map[string]any{"mode": "user_grant", "registration": "dynamic", "subject_issuer": op.Issuer}},
		"identity":        map[string]any{"issuers": []map[string]string{{"issuer": op.Issuer, "audience": "http://gateway.test/mcp"}}},
		"vault":           map[string]any{"key_files": []string{keyFile}},
		"connect": map[string]any{"public_url": "http://127.0.0.1:9/exec",
			"sign_in": map[string]string{"issuer": op.Issuer, "client_id": "verdict-connect"}},
		"callers":            []map[string]string{{"name": "gate", "token_sha256": httpx.HashToken("console-test-caller")}},
		"admin_token_sha256": httpx.HashToken(executorAdminToken),
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "executor.yaml")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "executor.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(executorCmd.Path(t), "serve", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logFile.Close() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	base := "http://" + addr
	poll := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logPath)
			t.Fatalf("the executor exited (%v):\n%s", err, log)
		default:
		}
		if resp, err := poll.Get(base + "/healthz"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
	}
	log, _ := os.ReadFile(logPath)
	t.Fatalf("the executor never answered /healthz:\n%s", log)
	return ""
}

// refreshes reports whether the provider still takes refresh token rt of its native client.
func refreshes(t *testing.T, op *testop.OP, rt string) bool {
	t.Helper()
	resp, err := http.PostForm(op.Metadata.TokenEndpoint, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {testop.NativeClientID}})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestConnectionsAtTheExecutor runs the connections page against a real executor process and
// a real authorization server (the example provider), whose grants were got by the code flow:
// a user lists their own grant, and revokes it, at the authorization server too; the form
// cannot reach another user's; a user whose stored grant does not open is shown the problem
// naming its server, and revoking it clears it; no page holds a token.
func TestConnectionsAtTheExecutor(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the executor and the OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t))
	alice, bob, carol := op.Issuer+"#id1", op.Issuer+"#id2", op.Issuer+"#id3"
	aliceTok := op.AuthCodeTokens(t, "test-user@127.0.0.1", nil, "offline_access")
	bobTok := op.AuthCodeTokens(t, "test-user2", nil, "offline_access")
	grant := func(principal string, tok testop.Tokens, scopes ...string) vault.Grant {
		return vault.Grant{Principal: principal, Server: "ledger", Kind: vault.KindUserGrant, Issuer: op.Issuer,
			ClientID: testop.NativeClientID, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: "Bearer",
			Expiry: time.Now().Add(5 * time.Minute), Scopes: scopes}
	}
	// carol's key holds a copy of alice's record: it opens, but is alice's, so it is refused.
	base := realExecutor(t, op, []vault.Grant{grant(alice, aliceTok, "openid", "offline_access"), grant(bob, bobTok, "bob-only")},
		func(db *store.DB) {
			if err := db.Update(context.Background(), func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("vault_grants"))
				return b.Put([]byte(carol+"\x00ledger"), b.Get([]byte(alice+"\x00ledger")))
			}); err != nil {
				t.Fatal(err)
			}
		})
	tokenFile := filepath.Join(t.TempDir(), "executor.token")
	if err := os.WriteFile(tokenFile, []byte(executorAdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, op.Issuer, func(c *Config) {
		c.Executor = Upstream{URL: base, ReadTokenFile: tokenFile}
		c.ConnectURL = "http://127.0.0.1:9/exec"
	})
	admin, err := client.New(base, client.WithAdminToken(executorAdminToken))
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{aliceTok.AccessToken, aliceTok.RefreshToken, bobTok.AccessToken, bobTok.RefreshToken}
	check := func(r response) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(r.body, s) {
				t.Fatal("a page holds a token")
			}
		}
	}

	a := h.signIn("id1")
	r := h.do("GET", "/connections", a, nil, nil)
	check(r)
	row := rowOf(r.body, "<code>ledger</code>")
	if r.status != 200 || !strings.Contains(row, "<code>openid</code> <code>offline_access</code>") || !strings.Contains(row, "yes: it is refreshed") ||
		!strings.Contains(row, `action="/connections/ledger/revoke"`) || !strings.Contains(row, `href="http://127.0.0.1:9/exec/connect/ledger"`) || strings.Contains(r.body, "bob-only") {
		t.Fatalf("alice's connections: %d\n%s", r.status, r.body)
	}

	c := h.signIn("id3")
	r = h.do("GET", "/connections", c, nil, nil)
	check(r)
	if r.status != 502 || !strings.Contains(r.body, `<code id="problem-code">`+api.CodeGrantUnreadable+`</code>`) ||
		!strings.Contains(html.UnescapeString(r.body), `"ledger"`) || strings.Contains(r.body, alice) || strings.Contains(r.body, `id="connections"`) {
		t.Fatalf("carol's connections, whose record is alice's: %d\n%s", r.status, r.body)
	}

	if r := h.do("POST", "/connections/ledger/revoke", a, url.Values{"principal": {bob}}, nil); r.status != 403 {
		t.Fatalf("a revocation without the form token: %d", r.status)
	}
	if gs, err := admin.Grants(t.Context(), alice); err != nil || len(gs) != 1 {
		t.Fatalf("alice's grants after a refused form: %+v %v", gs, err)
	}
	// The form names bob: alice's grant is revoked, at the provider too, and bob's stays.
	r = h.do("POST", "/connections/ledger/revoke", a, url.Values{"csrf_token": {h.csrf(a)}, "principal": {bob}}, nil)
	check(r)
	if r.status != 200 || !strings.Contains(r.body, `<code id="revoked-upstream">revoked</code>`) || !strings.Contains(r.body, `id="none-connected"`) {
		t.Fatalf("alice's revocation: %d\n%s", r.status, r.body)
	}
	if refreshes(t, op, aliceTok.RefreshToken) {
		t.Error("the provider still takes alice's refresh token")
	}
	if gs, err := admin.Grants(t.Context(), bob); err != nil || len(gs) != 1 || !refreshes(t, op, bobTok.RefreshToken) {
		t.Errorf("bob's grant after alice's revocation: %+v %v", gs, err)
	}
	r = h.do("POST", "/connections/ledger/revoke", a, url.Values{"csrf_token": {h.csrf(a)}}, nil)
	if r.status != 404 || !strings.Contains(r.body, `<code id="problem-code">`+codeConnectionNotFound+`</code>`) {
		t.Errorf("alice's second revocation: %d\n%s", r.status, r.body)
	}

	// carol revokes the record that is not hers: it goes, and her list reads again.
	r = h.do("POST", "/connections/ledger/revoke", c, url.Values{"csrf_token": {h.csrf(c)}}, nil)
	if r.status != 200 || !strings.Contains(r.body, `id="revoked"`) || !strings.Contains(r.body, `id="none-connected"`) {
		t.Errorf("carol's revocation: %d\n%s", r.status, r.body)
	}
}
