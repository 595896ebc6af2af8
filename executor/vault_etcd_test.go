package executor

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/vault"
)

// withEtcd puts the nonce store, and with it the vault, in the etcd at endpoint.
func withEtcd(endpoint string) func(*Config) {
	return func(c *Config) {
		c.NonceStore = NonceStore{Kind: NonceStoreEtcd, Config: etcdx.Config{Endpoints: []string{endpoint}, Prefix: "/test/",
			RequestTimeout: confxDuration(500 * time.Millisecond)}}
	}
}

// replica starts another executor of x's deployment: x's config (its etcd, its vault key) with
// a data directory of its own. edit, if set, changes the service before it serves.
func (x *connectEnv) replica(edit func(*Service)) *connectEnv {
	x.t.Helper()
	ctx := context.Background()
	cfg := x.svc.cfg
	cfg.DataDir = filepath.Join(x.t.TempDir(), "data")
	svc, err := New(ctx, cfg, Options{Now: x.clock, Logger: x.logger})
	if err != nil {
		x.t.Fatal(err)
	}
	if err := svc.Refresh(ctx); err != nil {
		x.t.Fatal(err)
	}
	if edit != nil {
		edit(svc)
	}
	srv := httptest.NewServer(svc.Handler())
	x.t.Cleanup(func() {
		srv.Close()
		svc.Close(context.Background())
	})
	e := &env{t: x.t, dir: x.dir, svc: svc, srv: srv, issuer: x.issuer, logger: x.logger, clock: x.clock}
	return &connectEnv{env: e, idp: x.idp, as: x.as, bankURL: x.bankURL, public: x.public, log: x.log, bankFile: x.bankFile}
}

// TestSharedGrants: executors sharing an etcd nonce store share the users' grants: an account
// connected at one serves a call at the other; a grant revoked at one is refused at the other
// from its next call on, although that one held its token from an earlier call; and with etcd
// down a call is refused credential_unavailable before its nonce, so the same verdict runs
// once etcd is back.
func TestSharedGrants(t *testing.T) {
	srv := etcdtest.NewServer(t)
	a := newConnectEnv(t, RegistrationDynamic, withEtcd(srv.Endpoint))
	if a.svc.cfg.vaultStore() != NonceStoreEtcd {
		t.Fatal("the vault is not in the nonce store's etcd")
	}
	b := a.replica(nil)
	alice := a.idp.AuthCode(t, aliceUser)
	aliceID := identity.PrincipalID(a.idp.Issuer, aliceSub)
	ok := func(x *connectEnv, amount int) {
		t.Helper()
		v, args := x.transfer(aliceID, aliceAccount, amount)
		if r := x.run(v, args, alice); r.Status != http.StatusOK || r.Result["isError"] == true {
			t.Fatalf("transfer of %d: %d %q %s %v", amount, r.Status, r.Error.Code, r.Error.Message, r.Result)
		}
	}

	if p := a.connect(aliceUser); p.Status != http.StatusOK {
		t.Fatalf("connect: %d\n%s", p.Status, p.Body)
	}
	ok(b, 100)
	ok(a, 101)

	admin, err := client.New(b.srv.URL, client.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := admin.RevokeGrant(ctx, aliceID, "bank"); err != nil {
		t.Fatal(err)
	}
	v, args := a.transfer(aliceID, aliceAccount, 102)
	if r := a.run(v, args, alice); r.Status != http.StatusForbidden || r.Error.Code != api.ExecutionReasonCredentialRequired {
		t.Fatalf("at a, after the grant was revoked at b: %d %q %s", r.Status, r.Error.Code, r.Error.Message)
	}

	a.connect(aliceUser)
	v, args = b.transfer(aliceID, aliceAccount, 103)
	srv.Kill()
	r := b.run(v, args, alice)
	if r.Status != http.StatusServiceUnavailable || r.Error.Code != api.ExecutionReasonCredentialUnavailable || !strings.Contains(r.Error.Message, "nothing was spent") {
		t.Fatalf("with etcd down: %d %q %s", r.Status, r.Error.Code, r.Error.Message)
	}
	if !strings.Contains(a.log.String(), vault.ErrUnavailable.Error()) {
		t.Errorf("the log does not say the vault was unavailable:\n%s", a.log)
	}
	srv.Restart()
	// The clients reconnect on their own; until they have, the answer stays a refusal.
	for range 50 {
		if r = b.run(v, args, alice); r.Status != http.StatusServiceUnavailable {
			break
		}
	}
	if r.Status != http.StatusOK || r.Result["isError"] == true {
		t.Fatalf("the same verdict after etcd returned: %d %q %s", r.Status, r.Error.Code, r.Error.Message)
	}
	var amounts []string
	for _, tx := range a.ledger() {
		if tx["actor"] == aliceSub {
			amounts = append(amounts, fmt.Sprint(tx["amount"]))
		}
	}
	if got := strings.Join(amounts, " "); got != "100 101 103" {
		t.Fatalf("alice's transfers at the bank: %s, want 100 101 103", got)
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// isRefresh reports whether r is a refresh at a token endpoint, reading a copy of its body.
func isRefresh(r *http.Request) bool {
	if r.Method != http.MethodPost || r.GetBody == nil {
		return false
	}
	body, err := r.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return false
	}
	form, err := url.ParseQuery(string(b))
	return err == nil && form.Get("grant_type") == "refresh_token"
}

// TestSharedGrantRefreshRace: two executors refresh one expired grant at once. The first
// stores its refresh; the second's refresh token, rotated by the first, is refused by the
// authorization server, and the second takes the grant the first stored rather than removing
// it: both calls run, with the same refreshed grant.
func TestSharedGrantRefreshRace(t *testing.T) {
	a := newConnectEnv(t, RegistrationDynamic, withEtcd(etcdtest.Start(t)))
	alice := a.idp.AuthCode(t, aliceUser)
	aliceID := identity.PrincipalID(a.idp.Issuer, aliceSub)
	if p := a.connect(aliceUser); p.Status != http.StatusOK {
		t.Fatalf("connect: %d\n%s", p.Status, p.Body)
	}
	ctx := context.Background()
	before, err := a.svc.vault.Get(ctx, aliceID, "bank")
	if err != nil {
		t.Fatal(err)
	}
	// Its access token as the executors hold it expires now: the next call refreshes first.
	before.Expiry = a.clock().Add(-time.Second)
	if err := a.svc.vault.Put(ctx, before); err != nil {
		t.Fatal(err)
	}
	if before, err = a.svc.vault.Get(ctx, aliceID, "bank"); err != nil {
		t.Fatal(err)
	}

	// a's call is made while b's refresh is on its way to the authorization server: a
	// refreshes and stores first. (Plain requests: the hook runs off the test's goroutine.)
	va, argsa := a.transfer(aliceID, aliceAccount, 10)
	var refreshes atomic.Int32
	var first struct {
		status int
		err    error
	}
	b := a.replica(func(s *Service) {
		g := s.users["bank"].source.(*granter)
		g.client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if isRefresh(r) && refreshes.Add(1) == 1 {
				req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/v1/execute", strings.NewReader(fmt.Sprintf(`{"verdict": %q, "arguments": %s}`, va, argsa)))
				req.Header.Set("Authorization", "Bearer "+callerToken)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(identity.SubjectTokenHeader, alice)
				if resp, err := http.DefaultClient.Do(req); err != nil {
					first.err = err
				} else {
					first.status = resp.StatusCode
					resp.Body.Close()
				}
			}
			return http.DefaultTransport.RoundTrip(r)
		})
	})
	vb, argsb := b.transfer(aliceID, aliceAccount, 20)
	r := b.run(vb, argsb, alice)
	if first.err != nil || first.status != http.StatusOK {
		t.Fatalf("a's call during b's refresh: %d %v", first.status, first.err)
	}
	if r.Status != http.StatusOK || r.Result["isError"] == true {
		t.Fatalf("b's call, refreshed second: %d %q %s\n%s", r.Status, r.Error.Code, r.Error.Message, a.log)
	}
	if n := refreshes.Load(); n != 1 {
		t.Fatalf("b asked for %d refreshes, want 1", n)
	}
	after, err := b.svc.vault.Get(ctx, aliceID, "bank")
	if err != nil {
		t.Fatalf("the grant after both refreshes: %v", err)
	}
	if after.ID != before.ID || after.RefreshToken == before.RefreshToken || !a.clock().Before(after.Expiry) {
		t.Fatalf("the stored grant is not a's refresh of the one before: %v\nbefore %v", after, before)
	}
	var amounts []string
	for _, tx := range a.ledger() {
		if tx["actor"] == aliceSub {
			amounts = append(amounts, fmt.Sprint(tx["amount"]))
		}
	}
	if got := strings.Join(amounts, " "); got != "10 20" {
		t.Fatalf("alice's transfers at the bank: %s, want 10 20", got)
	}
}
