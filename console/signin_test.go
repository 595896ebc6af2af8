package console

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testop"
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
