package console

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

// withEtcdSessions keeps the harness's sessions in the etcd at endpoint.
func withEtcdSessions(endpoint string) func(*Config) {
	return func(c *Config) {
		c.Session.Store = SessionStore{Kind: SessionStoreEtcd, Config: etcdx.Config{Endpoints: []string{endpoint},
			RequestTimeout: confx.Duration(2 * time.Second)}}
	}
}

// wantSignedIn asks GET / with cookie c and checks that it is answered as subject's page (in)
// or sent to sign in (out).
func wantSignedIn(t *testing.T, h *harness, c *http.Cookie, subject string, in bool) {
	t.Helper()
	r := h.do("GET", "/", c, nil, nil)
	switch {
	case in && (r.status != http.StatusOK || !strings.Contains(r.body, subject)):
		t.Errorf("GET / as %s: %d, want the page\n%s", subject, r.status, r.body)
	case !in && (r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login?")):
		t.Errorf("GET / as %s: %d (Location %q), want the sign-in", subject, r.status, r.header.Get("Location"))
	}
}

// TestSessionsAcrossReplicas: a session made on one replica is used on another; signing out
// everywhere on the second ends every session of that approver on the first, and no one
// else's; a console started afresh on the same etcd keeps the sessions.
func TestSessionsAcrossReplicas(t *testing.T) {
	h := newHarness(t, testIssuer, withEtcdSessions(etcdtest.Start(t)))
	one, two := h.console, h.replica()
	mine, other, theirs := h.signIn("id2"), h.signIn("id2"), h.signIn("id1") // made on one
	me, them := testIssuer+"#id2", testIssuer+"#id1"

	h.serve(two)
	for _, c := range []*http.Cookie{mine, other} {
		wantSignedIn(t, h, c, me, true)
	}
	wantSignedIn(t, h, theirs, them, true)
	r := h.do("POST", "/logout", mine, url.Values{"csrf_token": {h.csrf(mine)}, "everywhere": {"1"}}, nil)
	if r.status != http.StatusOK || !strings.Contains(r.body, "in every browser") || !strings.Contains(r.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("sign out everywhere: %d, Set-Cookie %q\n%s", r.status, r.header.Get("Set-Cookie"), r.body)
	}

	h.serve(one)
	wantSignedIn(t, h, mine, me, false)
	wantSignedIn(t, h, other, me, false)
	wantSignedIn(t, h, theirs, them, true)
	if r := h.do("POST", "/approvals/apr_01", other, url.Values{"decision": {"approve"}}, nil); r.status != http.StatusUnauthorized ||
		!strings.Contains(r.body, codeSessionEnded) {
		t.Errorf("a form of a session ended on another replica: %d\n%s", r.status, r.body)
	}

	// A plain sign-out ends that session alone, on every replica.
	second := h.signIn("id1")
	if r := h.do("POST", "/logout", second, url.Values{"csrf_token": {h.csrf(second)}}, nil); r.status != http.StatusOK {
		t.Fatalf("sign out: %d", r.status)
	}
	h.serve(two)
	wantSignedIn(t, h, second, them, false)
	wantSignedIn(t, h, theirs, them, true)

	// A restart: the replicas go, a new console on the same etcd reads the session.
	one.Close(t.Context())
	two.Close(t.Context())
	h.serve(h.replica())
	wantSignedIn(t, h, theirs, them, true)
}

// TestSessionIdleAcrossReplicas: the idle timeout counts from the last use on any replica, on
// the harness's clock.
func TestSessionIdleAcrossReplicas(t *testing.T) {
	h := newHarness(t, testIssuer, withEtcdSessions(etcdtest.Start(t))) // idle_timeout 2h
	one, two := h.console, h.replica()
	c, me := h.signIn("id2"), testIssuer+"#id2"

	h.serve(two)
	h.clock.Add(90 * time.Minute)
	wantSignedIn(t, h, c, me, true)
	h.serve(one)
	h.clock.Add(90 * time.Minute) // 3h after sign-in, 1h30 after the use on two
	wantSignedIn(t, h, c, me, true)
	h.clock.Add(2 * time.Hour)
	wantSignedIn(t, h, c, me, false)
	h.serve(two)
	wantSignedIn(t, h, c, me, false)
}

// TestSessionStoreDown: with etcd gone, no session is accepted, no page or form is served and
// no sign-out is said to be done; /readyz names the store. Once etcd is back, the session is.
func TestSessionStoreDown(t *testing.T) {
	srv := etcdtest.NewServer(t)
	h := newHarness(t, testIssuer, withEtcdSessions(srv.Endpoint))
	h.stub.add(transfer(h, "apr_01"))
	c, me := h.signIn("id2"), testIssuer+"#id2"
	csrf := h.csrf(c)
	wantSignedIn(t, h, c, me, true)

	srv.Stop()
	unavailable := func(what string, r response) {
		t.Helper()
		if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `<code id="problem-code">`+codeSessionStoreUnavailable+`</code>`) {
			t.Errorf("%s with etcd down: %d, want 503 %s\n%s", what, r.status, codeSessionStoreUnavailable, r.body)
		}
	}
	unavailable("GET /", h.do("GET", "/", c, nil, nil))
	unavailable("GET /approvals/apr_01", h.do("GET", "/approvals/apr_01", c, nil, nil))
	unavailable("POST /approvals/apr_01", h.do("POST", "/approvals/apr_01", c,
		url.Values{"decision": {"approve"}, "arguments_digest": {digestA}, "csrf_token": {csrf}}, nil))
	r := h.do("POST", "/logout", c, url.Values{"csrf_token": {csrf}, "everywhere": {"1"}}, nil)
	unavailable("POST /logout", r)
	if r.header.Get("Set-Cookie") != "" {
		t.Errorf("a sign-out not done cleared the cookie: %q", r.header.Get("Set-Cookie"))
	}
	if posts, _ := h.stub.sent(); len(posts) != 0 {
		t.Errorf("verdictd was sent %+v", posts)
	}
	if r := h.do("GET", "/readyz", nil, nil, nil); r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "the session store does not answer") {
		t.Errorf("/readyz with etcd down: %d %s", r.status, r.body)
	}

	srv.Restart()
	deadline := time.Now().Add(30 * time.Second)
	for h.do("GET", "/", c, nil, nil).status == http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatal("the console did not reach etcd again")
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantSignedIn(t, h, c, me, true)
}

// TestSignInAcrossReplicas signs in at the real provider with the sign-in started on one
// replica and its callback answered by another; the callback replayed (with the browser's
// sign-in cookie) on the first, whose own table still holds the sign-in, is refused: the shared
// store spent it.
func TestSignInAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t))
	h := newHarness(t, op.Issuer, withEtcdSessions(etcdtest.Start(t)))
	h.stub.add(transfer(h, "apr_01"))
	one, two := h.console, h.replica()

	c := browserlessClient(t)
	callback := signInSteps(t, h, c, "test-user2", "/approvals/apr_01") // /login on one
	public, _ := url.Parse(h.srv.URL)
	started := c.Jar.Cookies(public)

	h.serve(two)
	resp, body := get(t, c, callback.String())
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/approvals/apr_01" {
		t.Fatalf("callback on the other replica: %s to %q\n%s", resp.Status, loc, body)
	}
	h.serve(one)
	if resp, body := get(t, c, h.srv.URL+"/approvals/apr_01"); resp.StatusCode != http.StatusOK || !strings.Contains(body, op.Issuer+"#id2") {
		t.Fatalf("the approval page on the first replica: %s\n%s", resp.Status, body)
	}

	jar, _ := cookiejar.New(nil)
	jar.SetCookies(public, started)
	replay := &http.Client{Jar: jar, CheckRedirect: c.CheckRedirect}
	if resp, body := get(t, replay, callback.String()); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, codeSignInExpired) {
		t.Errorf("callback replayed on the replica that started it: %s\n%s", resp.Status, body)
	}
}
