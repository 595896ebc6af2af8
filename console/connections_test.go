package console

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/vault"
)

// The secrets of the stub's grants: no page may hold any of them.
const (
	accessSecret  = "at-SECRET-7d1c"
	refreshSecret = "rt-SECRET-0a9e"
	clientSecret  = "cs-SECRET-44b2"
)

// grantOf is a grant of sub (at the harness's issuer) at server, with every secret.
func grantOf(h *harness, sub, server string, refresh bool) vault.Grant {
	now := h.clock.Now()
	g := vault.Grant{
		ID: "g_" + strings.Repeat("1", 32), Principal: h.issuer + "#" + sub, Server: server, Kind: vault.KindUserGrant,
		Subject: "acct-" + sub, Issuer: "https://auth." + server + ".example", ClientID: "verdict-" + server, ClientSecret: clientSecret,
		AccessToken: accessSecret, TokenType: "Bearer", Expiry: now.Add(time.Hour), Scopes: []string{"read", "write"},
		Created: now.Add(-48 * time.Hour), Updated: now.Add(-time.Hour),
	}
	if refresh {
		g.RefreshToken = refreshSecret
	}
	return g
}

// connectionsHarness is a console whose users id1 and id2 have accounts connected at the
// stub executor: id1 at bank (with a refresh token) and github (without one, no expiry, and
// scopes that are markup), id2 at bank.
func connectionsHarness(t *testing.T, mutate func(*Config)) *harness {
	h := newHarness(t, testIssuer, func(c *Config) {
		c.ConnectURL = "https://executor.example/base/"
		c.ConnectServers = []string{"bank", "linear"}
		if mutate != nil {
			mutate(c)
		}
	})
	h.stub.addGrant(grantOf(h, "id1", "bank", true))
	gh := grantOf(h, "id1", "github", false)
	gh.Expiry, gh.Scopes, gh.Issuer = time.Time{}, []string{"<script>alert(1)</script>"}, "https://auth.github.example/\u202eevil"
	h.stub.addGrant(gh)
	other := grantOf(h, "id2", "bank", true)
	other.Issuer = "https://auth.other.example"
	h.stub.addGrant(other)
	return h
}

// noSecret fails t if body holds a token or secret of the stub's grants.
func noSecret(t *testing.T, body string) {
	t.Helper()
	for _, secret := range []string{accessSecret, refreshSecret, clientSecret} {
		if strings.Contains(body, secret) {
			t.Errorf("the page holds the secret %s", secret)
		}
	}
}

// TestConnectionsPage: a user sees their own connected accounts, each with what may be shown
// of its grant and a form to revoke it, and the links to connect one; never another user's,
// never a token.
func TestConnectionsPage(t *testing.T) {
	h := connectionsHarness(t, nil)
	c := h.signIn("id1")
	r := h.do("GET", "/connections", c, nil, nil)
	if r.status != 200 {
		t.Fatalf("status %d\n%s", r.status, r.body)
	}
	noSecret(t, r.body)
	page := html.UnescapeString(r.body)
	bank, github := rowOf(r.body, "<code>bank</code>"), rowOf(r.body, "<code>github</code>")
	for _, tc := range []struct{ in, want string }{
		{r.body, `<a href="/connections">Connected accounts</a>`},
		{r.body, `<code id="principal">` + testIssuer + "#id1</code>"},
		{bank, `action="/connections/bank/revoke"`},
		{bank, `name="csrf_token" value="` + h.csrf(c) + `"`},
		{bank, "https://auth.bank.example"},
		{bank, "<code>read</code> <code>write</code>"},
		{bank, h.clock.Now().Add(time.Hour).Format("2006-01-02 15:04:05 UTC")},
		{bank, h.clock.Now().Add(-48 * time.Hour).Format("2006-01-02 15:04:05 UTC")},
		{bank, "yes: it is refreshed when it expires"},
		{bank, `href="https://executor.example/base/connect/bank">Connect again`},
		{github, `action="/connections/github/revoke"`},
		{github, "not said"},
		{github, "no: connect again once it expires"},
		{github, "&lt;script&gt;alert(1)&lt;/script&gt;"},
		{html.UnescapeString(github), "https://auth.github.example/⟦U+202E⟧evil"},
		{r.body, `href="https://executor.example/base/connect/linear">Connect your account at <code>linear</code></a></li>`},
		{r.body, `href="https://executor.example/base/connect/bank">Connect your account at <code>bank</code></a> <span class="note">(connected`},
	} {
		if !strings.Contains(tc.in, tc.want) {
			t.Errorf("the page does not show %q", tc.want)
		}
	}
	if strings.Contains(r.body, "<script>") || strings.Contains(r.body, "\u202e") {
		t.Error("a scope reached the page as markup, or a direction override as it is")
	}
	if strings.Contains(page, "auth.other.example") {
		t.Error("the page shows id2's grant")
	}
	if _, calls := h.stub.grantsOf(""); !slices.Equal(calls, []string{"GET " + testIssuer + "#id1"}) {
		t.Errorf("the executor was asked %q, want id1's grants alone", calls)
	}

	// Without grants, the page says so; without connect_url, it offers no link.
	h = newHarness(t, testIssuer, nil)
	r = h.do("GET", "/connections", h.signIn("id3"), nil, nil)
	if r.status != 200 || !strings.Contains(r.body, `id="none-connected"`) || strings.Contains(r.body, "/connect/") || strings.Contains(r.body, `id="connect-title"`) {
		t.Errorf("no grant, no connect_url: %d\n%s", r.status, r.body)
	}
}

// TestConnectionsProblems: when the executor's list cannot be had, the page shows why and no
// list, never an empty one; the links to connect stay.
func TestConnectionsProblems(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	tests := []struct {
		name    string
		mutate  func(*Config)
		edit    func(*stubVerdictd)
		status  int
		code    string
		details string
	}{
		{name: "a stored grant does not open", edit: func(s *stubVerdictd) { s.unreadable = map[string]string{testIssuer + "#id1": "github"} },
			status: 502, code: api.CodeGrantUnreadable, details: `"github" does not open`},
		{name: "the executor keeps no grants", edit: func(s *stubVerdictd) { s.noVault = true },
			status: 502, code: codeExecutorRefused, details: "this executor keeps no grants"},
		{name: "the executor is down", mutate: func(c *Config) { c.Executor.URL = down.URL },
			status: 502, code: codeExecutorUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := connectionsHarness(t, tc.mutate)
			if tc.edit != nil {
				h.stub.mu.Lock()
				tc.edit(h.stub)
				h.stub.mu.Unlock()
			}
			r := h.do("GET", "/connections", h.signIn("id1"), nil, nil)
			page := html.UnescapeString(r.body)
			if r.status != tc.status || !strings.Contains(r.body, `<code id="problem-code">`+tc.code+`</code>`) || !strings.Contains(page, tc.details) {
				t.Errorf("status %d, want %d with %s and %q\n%s", r.status, tc.status, tc.code, tc.details, r.body)
			}
			if strings.Contains(r.body, `id="connections"`) || strings.Contains(r.body, `id="none-connected"`) {
				t.Error("a list is shown beside the problem")
			}
			if !strings.Contains(r.body, `href="https://executor.example/base/connect/linear"`) {
				t.Error("the links to connect are gone")
			}
			r = h.do("GET", "/metrics", nil, nil, nil)
			if !strings.Contains(r.body, `console_connections_views_total{result="`+tc.code+`"} 1`) {
				t.Errorf("/metrics does not count %s", tc.code)
			}
		})
	}
}

// TestRevoke: a user revokes their own grant, and the page says what the authorization server
// answered; the principal is the session's whatever the form says; a form that is not the
// console's own, or a server that is no server id, reaches no one.
func TestRevoke(t *testing.T) {
	for _, tc := range []struct{ upstream, words string }{
		{api.GrantUpstreamRevoked, "authorization server revoked the grant"},
		{api.GrantUpstreamUnsupported, "offers no revocation"},
		{api.GrantUpstreamFailed, "could not be told"},
		{"maybe", "did not say whether"},
	} {
		t.Run(tc.upstream, func(t *testing.T) {
			h := connectionsHarness(t, nil)
			h.stub.mu.Lock()
			h.stub.upstream = map[string]string{"bank": tc.upstream}
			h.stub.mu.Unlock()
			c := h.signIn("id1")
			r := h.do("POST", "/connections/bank/revoke", c, url.Values{"csrf_token": {h.csrf(c)}}, nil)
			if r.status != 200 || !strings.Contains(r.body, `id="revoked"`) || !strings.Contains(html.UnescapeString(r.body), tc.words) {
				t.Fatalf("status %d, want the note %q\n%s", r.status, tc.words, r.body)
			}
			noSecret(t, r.body)
			if strings.Contains(r.body, `action="/connections/bank/revoke"`) || !strings.Contains(r.body, `action="/connections/github/revoke"`) {
				t.Error("the list after the revocation is not the executor's")
			}
			if left, _ := h.stub.grantsOf(testIssuer + "#id1"); !slices.Equal(left, []string{"github"}) {
				t.Errorf("id1's grants left: %v", left)
			}
			result := tc.upstream
			if result == "maybe" {
				result = "other"
			}
			if r := h.do("GET", "/metrics", nil, nil, nil); !strings.Contains(r.body, `console_revocations_total{result="`+result+`"} 1`) {
				t.Errorf("/metrics does not count the revocation as %s", result)
			}
		})
	}

	h := connectionsHarness(t, nil)
	c := h.signIn("id1")
	id2 := testIssuer + "#id2"
	good := func() url.Values { return url.Values{"csrf_token": {h.csrf(c)}} }
	edited := good()
	edited.Set("principal", id2)
	edited.Set("server", "bank")
	tests := []struct {
		name    string
		path    string
		form    url.Values
		headers map[string]string
		cookie  *http.Cookie
		status  int
		code    string
	}{
		{"no form token", "/connections/bank/revoke", url.Values{}, nil, c, 403, codeCSRF},
		{"another session's form token", "/connections/bank/revoke", url.Values{"csrf_token": {h.csrf(h.signIn("id2"))}}, nil, c, 403, codeCSRF},
		{"another origin", "/connections/bank/revoke", good(), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, c, 403, codeOrigin},
		{"no session", "/connections/bank/revoke", good(), nil, nil, 401, codeSessionEnded},
		{"not a server id", "/connections/bank.x/revoke", good(), nil, c, 400, codeBadForm},
	}
	for _, tc := range tests {
		r := h.do("POST", tc.path, tc.cookie, tc.form, tc.headers)
		if r.status != tc.status || !strings.Contains(r.body, `<code id="problem-code">`+tc.code+`</code>`) {
			t.Errorf("%s: status %d, want %d with %s\n%s", tc.name, r.status, tc.status, tc.code, r.body)
		}
	}
	if _, calls := h.stub.grantsOf(""); len(calls) != 0 {
		t.Fatalf("the executor was asked %q", calls)
	}

	// The form names id2 as the principal: the session's principal is revoked, id2's grant stays.
	if r := h.do("POST", "/connections/bank/revoke", c, edited, nil); r.status != 200 || !strings.Contains(r.body, `id="revoked"`) {
		t.Fatalf("revoke: %d\n%s", r.status, r.body)
	}
	// Again: id1 has no grant at bank any more, whatever the form says.
	r := h.do("POST", "/connections/bank/revoke", c, edited, nil)
	if r.status != 404 || !strings.Contains(r.body, `<code id="problem-code">`+codeConnectionNotFound+`</code>`) || !strings.Contains(r.body, `action="/connections/github/revoke"`) {
		t.Errorf("a second revocation: %d\n%s", r.status, r.body)
	}
	if left, calls := h.stub.grantsOf(id2); !slices.Equal(left, []string{"bank"}) || slices.ContainsFunc(calls, func(c string) bool { return strings.Contains(c, id2) }) {
		t.Errorf("id2's grants %v; the executor was asked %q", left, calls)
	}
}
