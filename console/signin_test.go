package console

import (
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testop"
)

// browserlessClient is an HTTP client that keeps cookies and follows no redirect, so that each
// step of a sign-in can be read.
func browserlessClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var authRequestID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// signInSteps signs in at the provider as user without a browser, starting from the console's
// sign-in address with return path ret, and returns the callback URL the provider sent the
// browser to (not yet visited).
func signInSteps(t *testing.T, h *harness, c *http.Client, user, ret string) *url.URL {
	t.Helper()
	resp, _ := get(t, c, h.srv.URL+"/login?"+url.Values{"return": {ret}}.Encode())
	auth, err := resp.Location()
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s %v", resp.Status, err)
	}
	q := auth.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" {
		t.Fatalf("the authorization request lacks PKCE S256, a nonce or a state: %s", auth)
	}
	// The provider's login form, as a browser follows it.
	loc := auth
	var body string
	for range 5 {
		resp, body = get(t, c, loc.String())
		if resp.StatusCode == http.StatusOK {
			break
		}
		if loc, err = resp.Location(); err != nil {
			t.Fatalf("%s: %s", loc, resp.Status)
		}
	}
	m := authRequestID.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no login form at %s:\n%s", loc, body)
	}
	form := url.Values{"id": {m[1]}, "username": {user}, "password": {testop.Password}}
	resp, err = c.PostForm(loc.ResolveReference(&url.URL{Path: "/login/username"}).String(), form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for range 5 {
		next, err := resp.Location()
		if err != nil {
			t.Fatalf("login form: %s", resp.Status)
		}
		if strings.HasPrefix(next.String(), h.srv.URL+"/callback") {
			return next
		}
		resp, _ = get(t, c, next.String())
	}
	t.Fatal("the provider never sent the browser back to the console")
	return nil
}

// TestSignInAtProvider signs in at the real provider without a browser: the session works and
// forwards the provider's access token; a callback is good once; a return path elsewhere lands
// home; a callback in another browser (without the sign-in cookie) is refused.
func TestSignInAtProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t))
	h := newHarness(t, op.Issuer, nil)
	h.stub.add(transfer(h, "apr_01"))

	c := browserlessClient(t)
	callback := signInSteps(t, h, c, "test-user2", "/approvals/apr_01")
	resp, body := get(t, c, callback.String())
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/approvals/apr_01" {
		t.Fatalf("callback: %s to %q\n%s", resp.Status, loc, body)
	}
	resp, body = get(t, c, h.srv.URL+"/approvals/apr_01")
	if resp.StatusCode != 200 || !strings.Contains(body, op.Issuer+"#id2") {
		t.Fatalf("the approval page after sign-in: %s\n%s", resp.Status, body)
	}
	_, gets := h.stub.sent()
	if who, ok := bearerSubject(gets[len(gets)-1]); !ok || who != op.Issuer+"#id2" {
		t.Errorf("verdictd was asked with a token of %q, want the provider's token of id2", who)
	}

	// The same callback again (a replay, or the back button) is refused: its state is spent.
	if resp, body := get(t, c, callback.String()); resp.StatusCode != 400 || !strings.Contains(body, codeSignInExpired) {
		t.Errorf("callback replayed: %s", resp.Status)
	}

	// A return path to another site lands on the console's home.
	c2 := browserlessClient(t)
	cb := signInSteps(t, h, c2, "test-user2", "//evil.example/steal")
	if resp, _ := get(t, c2, cb.String()); resp.Header.Get("Location") != "/" {
		t.Errorf("return to another site: redirected to %q", resp.Header.Get("Location"))
	}

	// A callback carried to another browser, which never started that sign-in, is refused
	// there and spends nothing of the one that did.
	c3 := browserlessClient(t)
	cb = signInSteps(t, h, c3, "test-user2", "/")
	if resp, body := get(t, browserlessClient(t), cb.String()); resp.StatusCode != 400 || !strings.Contains(body, codeSignInExpired) {
		t.Errorf("callback in another browser: %s", resp.Status)
	}
	if resp, _ := get(t, c3, cb.String()); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the browser that started the sign-in could not finish it: %s", resp.Status)
	}
}

// clientFrom is an HTTP client whose connections come from the loopback address ip, so that
// the console sees another client address than 127.0.0.1's. It follows no redirect and keeps
// no cookie: each request starts a sign-in of its own, as a flood's do.
func clientFrom(t *testing.T, h *harness, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	probe, err := d.DialContext(t.Context(), "tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Skipf("cannot connect from %s (a loopback network without it): %v", ip, err)
	}
	probe.Close()
	return &http.Client{
		Transport:     &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 8},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// flood sends n GET /login from c, eight at once, and counts the answers by status and reason
// code ("303", "429 sign_in_client_limit", ...).
func flood(t *testing.T, h *harness, c *http.Client, n int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range jobs {
				resp, err := c.Get(h.srv.URL + "/login?return=/")
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				key := strconv.Itoa(resp.StatusCode)
				if m := problemCode.FindStringSubmatch(string(b)); m != nil {
					key += " " + m[1]
				}
				mu.Lock()
				counts[key]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return counts
}

var problemCode = regexp.MustCompile(`<code id="problem-code">([^<]*)</code>`)

// TestSignInHoldsUnderFlood floods GET /login over HTTP from other addresses while approvers
// sign in at the real provider from 127.0.0.1: the flood is refused past its address's bound,
// then past the console's, and neither pushes out a sign-in already started, nor keeps an
// approver at another address from signing in while the console has room.
func TestSignInHoldsUnderFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t))
	const max, perClient = 200, 64
	h := newHarness(t, op.Issuer, func(c *Config) { c.SignIn = SignIn{MaxInProgress: max, MaxPerClient: perClient} })
	h.stub.add(transfer(h, "apr_01"))

	// An approver starts signing in, and is at the provider when the flood begins.
	early := browserlessClient(t)
	earlyCallback := signInSteps(t, h, early, "test-user2", "/approvals/apr_01")

	// Thousands of sign-ins from one address: its first perClient start, the rest are refused.
	got := flood(t, h, clientFrom(t, h, "127.0.0.2"), 2000)
	if want := map[string]int{"303": perClient, "429 " + codeSignInClientLimit: 2000 - perClient}; !maps.Equal(got, want) {
		t.Fatalf("a flood from one address: %v, want %v", got, want)
	}

	// Another approver, at another address, signs in from start to end meanwhile.
	late := browserlessClient(t)
	cb := signInSteps(t, h, late, "test-user2", "/")
	if resp, body := get(t, late, cb.String()); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("a sign-in during the flood: %s\n%s", resp.Status, body)
	}

	// Floods from further addresses fill the console: past max, every newcomer is refused,
	// whatever its address; the sign-in in progress stays.
	total := 1 + perClient
	for _, ip := range []string{"127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		got := flood(t, h, clientFrom(t, h, ip), 200)
		ok := min(perClient, max-total)
		want := map[string]int{"303": ok}
		if ok < perClient {
			want["429 "+codeSignInLimit] = 200 - ok
		} else {
			want["429 "+codeSignInClientLimit] = 200 - ok
		}
		maps.DeleteFunc(want, func(_ string, n int) bool { return n == 0 })
		if !maps.Equal(got, want) {
			t.Fatalf("a flood from %s with %d held: %v, want %v", ip, total, got, want)
		}
		total += ok
	}
	if total != max || h.console.logins.Len() != max {
		t.Fatalf("%d sign-ins held (%d counted), want the console full at %d", h.console.logins.Len(), total, max)
	}
	resp, body := get(t, browserlessClient(t), h.srv.URL+"/login")
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, codeSignInLimit) {
		t.Fatalf("a sign-in when the console is full: %s\n%s", resp.Status, body)
	}

	// The approver who started before the flood comes back from the provider and is signed in.
	resp, body = get(t, early, earlyCallback.String())
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/approvals/apr_01" {
		t.Fatalf("the callback of the sign-in started before the flood: %s to %q\n%s", resp.Status, loc, body)
	}
	resp, body = get(t, early, h.srv.URL+"/approvals/apr_01")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, op.Issuer+"#id2") {
		t.Fatalf("the approval page after sign-in: %s\n%s", resp.Status, body)
	}
}

// TestPrincipalOf: with oidc.principal_claim the user is <issuer>#<that claim>, as the daemons
// name them under the same principal_claim; an ID token without it as a string signs no one
// in.
func TestPrincipalOf(t *testing.T) {
	claims := map[string]any{"sub": "id2", "email": "ann@example.org", "email_verified": true, "groups": []any{"a"}, "blank": ""}
	tests := []struct {
		claim, want string // want "" for a refusal
	}{
		{"sub", "https://idp.example#id2"},
		{"email", "https://idp.example#ann@example.org"},
		{"employee_id", ""},
		{"email_verified", ""},
		{"groups", ""},
		{"blank", ""},
	}
	for _, tc := range tests {
		got, err := principalOf("https://idp.example", "id2", claims, tc.claim)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("%s: %q, %v; want %q", tc.claim, got, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), tc.claim) {
			t.Errorf("%s: the error %q does not name the claim", tc.claim, err)
		}
	}
	if _, err := principalOf("https://idp.example", "", claims, "sub"); err == nil {
		t.Error("an empty sub names a user")
	}
}

// TestSignInPrincipalClaim: a sign-in at the provider whose ID token lacks the principal claim
// makes no session; with the default claim the user is <issuer>#<sub>.
func TestSignInPrincipalClaim(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t))
	for _, tc := range []struct{ claim, want string }{{"", op.Issuer + "#id2"}, {"employee_id", ""}} {
		h := newHarness(t, op.Issuer, func(c *Config) { c.OIDC.PrincipalClaim = tc.claim })
		c := browserlessClient(t)
		resp, body := get(t, c, signInSteps(t, h, c, "test-user2", "/").String())
		if tc.want == "" {
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, codeSignInFailed) || !strings.Contains(body, "employee_id") {
				t.Errorf("an ID token without %s: %s\n%s", tc.claim, resp.Status, body)
			}
			if h.console.sessions.store.len() != 0 {
				t.Error("a session was made")
			}
			continue
		}
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("callback: %s\n%s", resp.Status, body)
		}
		if _, body := get(t, c, h.srv.URL+"/"); !strings.Contains(body, "("+tc.want+")") {
			t.Errorf("the page does not name the user %s:\n%s", tc.want, body)
		}
	}
}

// TestReadiness: /readyz is 200 while verdictd is ready and the provider serves its discovery
// document, and 503 naming each that is not: verdictd not ready, the provider gone (after a
// sign-in discovered it, which must not leave the console ready), verdictd gone.
func TestReadiness(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t))
	h := newHarness(t, op.Issuer, nil)
	type answer struct {
		Status   string   `json:"status"`
		Problems []string `json:"problems"`
	}
	ready := func(wantStatus int, want ...string) {
		t.Helper()
		r := h.do("GET", "/readyz", nil, nil, nil)
		var a answer
		if err := json.Unmarshal([]byte(r.body), &a); err != nil || r.status != wantStatus {
			t.Fatalf("/readyz: %d %s, want %d", r.status, r.body, wantStatus)
		}
		if len(a.Problems) != len(want) {
			t.Fatalf("/readyz problems %q, want %d naming %q", a.Problems, len(want), want)
		}
		for i, w := range want {
			if !strings.Contains(a.Problems[i], w) {
				t.Errorf("/readyz problem %q, want it to say %q", a.Problems[i], w)
			}
		}
	}
	ready(http.StatusOK)

	h.stub.mu.Lock()
	h.stub.notReady = true
	h.stub.mu.Unlock()
	ready(http.StatusServiceUnavailable, "verdictd is not ready (HTTP 503)")
	h.stub.mu.Lock()
	h.stub.notReady = false
	h.stub.mu.Unlock()

	// A sign-in discovers the provider and keeps what it found; readiness asks again.
	if _, _, err := h.console.provider.Get(t.Context()); err != nil {
		t.Fatal(err)
	}
	op.Stop()
	ready(http.StatusServiceUnavailable, "the OpenID Provider "+op.Issuer+" does not serve its discovery document")

	h.verdictd.Close()
	ready(http.StatusServiceUnavailable, "verdictd is not reachable", "the OpenID Provider")
}
