package executor

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/vault"
)

// writeVaultKey writes a fresh age identity to dir/name as age-keygen does, mode 0600.
func writeVaultKey(t *testing.T, dir, name string) string {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("# public key: "+id.Recipient().String()+"\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// withUserGrant makes files a user_grant server, with the vault and connect sections.
func withUserGrant(keyFile string) func(*Config) {
	return func(c *Config) {
		issuer := c.Identity.Issuers[0].Issuer
		c.Credentials["files"] = Credential{Mode: api.CredentialUserGrant, Registration: RegistrationDynamic, SubjectIssuer: issuer,
			HeadersForUsers: []string{"x-client-version"}}
		c.Vault = &VaultConfig{KeyFiles: []string{keyFile}}
		c.Connect = &Connect{PublicURL: "https://executor.test/base/", SignIn: SignIn{Issuer: issuer, ClientID: "verdict-connect"}}
	}
}

// TestUserGrant: a user_grant server is called with the access token of the principal's own
// grant in the vault, and with nothing else: no grant, another principal's grant, or a grant
// whose stored record was changed is refused with the page to connect at, before anything is
// spent; the same verdict runs once the grant is there, with the user's token or without it
// (the user away); a token of another principal is refused.
func TestUserGrant(t *testing.T) {
	key := writeVaultKey(t, t.TempDir(), "vault.key")
	x := newExchangeEnv(t, withUserGrant(key))
	alice := x.op.AuthCode(t, "test-user@127.0.0.1") // sub id1
	bob := x.op.AuthCode(t, "test-user2")            // sub id2
	aliceID, bobID := identity.PrincipalID(x.op.Issuer, "id1"), identity.PrincipalID(x.op.Issuer, "id2")
	// The grant's access token: one the OP issues for the files server, whose subject (the
	// client's id) is what the tool answers with.
	grantToken := x.op.ClientCredentials(t, "lister", "lister-secret")
	const connect = "https://executor.test/base/connect/files"

	refused := func(t *testing.T, r reply, status int, reason, words string) {
		t.Helper()
		if r.Status != status || r.Error.Code != reason {
			t.Fatalf("%d %q (%s), want %d %q", r.Status, r.Error.Code, r.Error.Message, status, reason)
		}
		if !strings.Contains(r.Error.Message, words) || !strings.Contains(r.Error.Message, "nothing was spent") {
			t.Errorf("message %q, want it to say %q and that nothing was spent", r.Error.Message, words)
		}
		if got, _ := r.Execution["credential"].(string); got != api.CredentialUserGrant {
			t.Errorf("record's credential %q, want user_grant", got)
		}
		if want := connect; reason == api.ExecutionReasonCredentialRequired && strings.Contains(words, "connect") && r.Error.ConnectURL != want {
			t.Errorf("connect_url %q, want %q", r.Error.ConnectURL, want)
		}
	}
	calls := func() int { return len(x.rs.whoamis()) }

	v := x.verdict("files", aliceID)
	refused(t, x.run(v, alice), http.StatusForbidden, api.ExecutionReasonCredentialRequired, "connect one at "+connect)
	// Without the user's token (a call a schedule triggered): the grant alone decides.
	refused(t, x.run(v, ""), http.StatusForbidden, api.ExecutionReasonCredentialRequired, "connect one at "+connect)
	if n := calls(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}

	ctx := context.Background()
	if err := x.svc.vault.Put(ctx, vault.Grant{Principal: aliceID, Server: "files", Kind: vault.KindUserGrant,
		AccessToken: grantToken, TokenType: "Bearer"}); err != nil {
		t.Fatal(err)
	}
	r := x.run(v, alice)
	if r.Status != http.StatusOK || r.text() != "subject lister" {
		t.Fatalf("%d %q %q, want the call run with the grant's token", r.Status, r.Error.Code, r.text())
	}
	if got, _ := r.Execution["credential"].(string); got != api.CredentialUserGrant {
		t.Errorf("record's credential %q, want user_grant", got)
	}
	if got, _ := r.Execution["credential_grant"].(string); !strings.HasPrefix(got, "g_") || r.Execution["credential_subject"] != "id1" {
		t.Errorf("record's credential_grant %q, credential_subject %v", got, r.Execution["credential_subject"])
	}
	// The spent verdict again, with another's token or a token that does not verify: replayed,
	// before the credential is looked at, so the answer says nothing of the token.
	for _, tok := range []string{bob, "not-a-token", ""} {
		if r := x.run(v, tok); r.Status != http.StatusConflict || r.Error.Code != "replayed" {
			t.Fatalf("the spent verdict with token %.12q: %d %q, want 409 replayed", tok, r.Status, r.Error.Code)
		}
	}
	// The user away: the verdict alone releases the principal's own grant.
	if r := x.run(x.verdict("files", aliceID), ""); r.Status != http.StatusOK || r.text() != "subject lister" || r.Execution["credential_subject"] != nil {
		t.Fatalf("without the user's token: %d %q %q", r.Status, r.Error.Code, r.text())
	}

	// A grant whose token the server refuses (401) on a fresh connection: refused before the
	// nonce, and never tried with another credential (the service identity's, alice's).
	if err := x.svc.vault.Put(ctx, vault.Grant{Principal: bobID, Server: "files", Kind: vault.KindUserGrant,
		AccessToken: "a-token-the-server-refuses", TokenType: "Bearer"}); err != nil {
		t.Fatal(err)
	}
	before := calls()
	vb := x.verdict("files", bobID)
	if r := x.run(vb, bob); r.Status != http.StatusServiceUnavailable || r.Error.Code != api.ExecutionReasonCredentialUnavailable {
		t.Fatalf("a grant the server refuses: %d %q %s", r.Status, r.Error.Code, r.Error.Message)
	}
	if calls() != before {
		t.Fatal("the tool ran with a credential other than the refused grant")
	}
	if err := x.svc.vault.Revoke(ctx, bobID, "files"); err != nil {
		t.Fatal(err)
	}

	// Bob has no grant: alice's is not his, whoever's token comes with his verdict.
	refused(t, x.run(vb, bob), http.StatusForbidden, api.ExecutionReasonCredentialRequired, "connect one at "+connect)
	r = x.run(vb, alice)
	if r.Status != http.StatusForbidden || r.Error.Code != api.ExecutionReasonCredentialForeign {
		t.Fatalf("bob's verdict with alice's token: %d %q", r.Status, r.Error.Code)
	}

	// Alice's record copied to bob's key in the file: refused as another's, and reported.
	if err := x.svc.db.Update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("vault_grants"))
		return b.Put([]byte(bobID+"\x00files"), b.Get([]byte(aliceID+"\x00files")))
	}); err != nil {
		t.Fatal(err)
	}
	refused(t, x.run(vb, bob), http.StatusForbidden, api.ExecutionReasonCredentialRequired, "connect the account again at "+connect)
	// The admin API lists none of bob's grants rather than part, names the server whose grant
	// does not open and nothing of alice's; revoking it removes it.
	admin, err := client.New(x.srv.URL, client.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	var ce *client.Error
	if gs, err := admin.Grants(ctx, bobID); !errors.As(err, &ce) || ce.Status != http.StatusInternalServerError ||
		ce.Code != api.CodeGrantUnreadable || !strings.Contains(ce.Message, `"files"`) || strings.Contains(ce.Message, aliceID) {
		t.Fatalf("bob's grants with alice's record at his key: %+v, %v", gs, err)
	}
	if out, err := admin.RevokeGrant(ctx, bobID, "files"); err != nil || out.Grant.Server != "files" {
		t.Fatalf("revoke the grant that does not open: %+v, %v", out, err)
	}
	if gs, err := admin.Grants(ctx, bobID); err != nil || len(gs) != 0 {
		t.Fatalf("bob's grants after the revocation: %+v, %v", gs, err)
	}
	if !strings.Contains(x.log.String(), `"level":"ERROR","msg":"no token of the account for the server"`) {
		t.Errorf("the unusable grant was not reported:\n%s", x.log)
	}
	if n := calls(); n != 2 {
		t.Errorf("the tool ran %d times, want twice", n)
	}
	if strings.Contains(x.log.String(), grantToken) {
		t.Error("the grant's token is in the log")
	}
}

// TestUserGrantKeyMissing: without its vault key the executor does not start, and says which
// file is missing.
func TestUserGrantKeyMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "vault.key")
	x := newExchangeEnv(t)
	cfg := x.svc.cfg
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Credentials = maps.Clone(cfg.Credentials)
	withUserGrant(missing)(&cfg)
	_, err := New(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "vault.key_files[0]") || !strings.Contains(err.Error(), missing) {
		t.Fatalf("New: %v, want the missing key file named", err)
	}
}
