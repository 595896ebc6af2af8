package testop

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testbin"
)

var opCmd = testbin.New(Package)

func TestMain(m *testing.M) {
	code := m.Run()
	opCmd.Remove()
	os.Exit(code)
}

// claims decodes a JWT's payload without verifying it: these tests check what the provider
// issues, not whether it is genuine (the identity package's tests do that).
func claims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want a JWS", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a command")
	}
	const resource = "https://gateway.test/mcp"
	o := Start(t, opCmd.Path(t), "-resource", resource, "-client", "agent:agent-secret", "-client", "other:other-secret=https://other.test/mcp")
	if o.Metadata.Issuer != o.Issuer {
		t.Fatalf("discovery issuer %q, want %q", o.Metadata.Issuer, o.Issuer)
	}
	for _, tc := range []struct {
		name, token, sub, aud, scope string
	}{
		{"client credentials", o.ClientCredentials(t, "agent", "agent-secret", "tools:read"), "agent", resource, "tools:read"},
		{"other resource", o.ClientCredentials(t, "other", "other-secret"), "other", "https://other.test/mcp", ""},
		{"auth code with PKCE", o.AuthCode(t, "test-user2", "tools:call"), "id2", resource, "openid tools:call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := claims(t, tc.token)
			if c["iss"] != o.Issuer || c["sub"] != tc.sub {
				t.Errorf("iss, sub = %v, %v, want %s, %s", c["iss"], c["sub"], o.Issuer, tc.sub)
			}
			aud, _ := c["aud"].([]any)
			found := false
			for _, a := range aud {
				found = found || a == tc.aud
			}
			if !found {
				t.Errorf("aud = %v, want it to contain %s", c["aud"], tc.aud)
			}
			if got, _ := c["scope"].(string); got != tc.scope {
				t.Errorf("scope = %q, want %q", got, tc.scope)
			}
		})
	}
}

// TestTokenExchange: an -exchange-client trades a user's access token for one of the same sub
// at an audience it was given, and nothing else (RFC 8693).
func TestTokenExchange(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a command")
	}
	const (
		resource = "https://gateway.test/mcp"
		files    = "https://files.test/mcp"
	)
	o := Start(t, opCmd.Path(t), "-resource", resource, "-client", "agent:agent-secret", "-introspector", "rs:rs-secret",
		"-exchange-client", "executor:executor-secret="+files+",https://other.test/mcp")
	user := o.AuthCode(t, "test-user2")
	exchange := func(client, secret, subject string, form url.Values) (int, map[string]any) {
		t.Helper()
		f := url.Values{
			"grant_type":           {"urn:ietf:params:oauth:grant-type:token-exchange"},
			"subject_token":        {subject},
			"subject_token_type":   {"urn:ietf:params:oauth:token-type:access_token"},
			"requested_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		}
		for k, v := range form {
			f[k] = v
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, o.Metadata.TokenEndpoint, strings.NewReader(f.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(client, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}

	status, body := exchange("executor", "executor-secret", user, url.Values{"audience": {files}, "resource": {files}})
	if status != http.StatusOK {
		t.Fatalf("exchange: %d %v\nstderr:\n%s", status, body, o.Stderr())
	}
	if body["issued_token_type"] != "urn:ietf:params:oauth:token-type:access_token" || body["token_type"] != "Bearer" {
		t.Errorf("answer %v: want an access token of type Bearer", body)
	}
	if n, _ := body["expires_in"].(float64); n <= 0 {
		t.Errorf("expires_in %v", body["expires_in"])
	}
	tok, _ := body["access_token"].(string)
	c := claims(t, tok)
	aud, _ := c["aud"].([]any)
	if c["sub"] != "id2" || c["iss"] != o.Issuer || len(aud) != 1 || aud[0] != files || c["client_id"] != "executor" {
		t.Errorf("exchanged token's claims %v: want sub id2, aud [%s], client_id executor", c, files)
	}

	for _, tc := range []struct {
		name, client, secret, subject string
		form                          url.Values
		status                        int
		code                          string
	}{
		{"an audience not the client's", "executor", "executor-secret", user, url.Values{"audience": {resource}}, 400, "invalid_target"},
		{"a resource not the client's", "executor", "executor-secret", user, url.Values{"audience": {files}, "resource": {resource}}, 400, "invalid_target"},
		{"no audience", "executor", "executor-secret", user, url.Values{"resource": {files}}, 400, "invalid_request"},
		{"a refresh token asked for", "executor", "executor-secret", user,
			url.Values{"audience": {files}, "requested_token_type": {"urn:ietf:params:oauth:token-type:refresh_token"}}, 400, "invalid_request"},
		{"not a token of the provider", "executor", "executor-secret", "e30.e30.c2ln", url.Values{"audience": {files}}, 400, "invalid_request"},
		{"a wrong secret", "executor", "nope", user, url.Values{"audience": {files}}, 401, "invalid_client"},
		{"a client that may not exchange", "rs", "rs-secret", user, url.Values{"audience": {files}}, 400, "unauthorized_client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := exchange(tc.client, tc.secret, tc.subject, tc.form)
			if status != tc.status || body["error"] != tc.code {
				t.Errorf("%d %v, want %d %s", status, body, tc.status, tc.code)
			}
		})
	}
}

// postForm posts form to u, with HTTP Basic when user is not empty, and returns the status and
// the JSON answer.
func postForm(t *testing.T, u string, form url.Values, user, secret string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(user, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("POST %s: %s: %q is not JSON", u, resp.Status, body)
		}
	}
	return resp.StatusCode, m
}

// authorize runs an authorization request of clientID through test-user2's browser and
// returns the provider's answer at redirectURI and the PKCE verifier sent.
func authorize(t *testing.T, o *OP, clientID, redirectURI string, extra url.Values, scopes ...string) (url.Values, string) {
	t.Helper()
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"client_id": {clientID}, "redirect_uri": {redirectURI}, "response_type": {"code"},
		"scope": {strings.Join(append([]string{"openid"}, scopes...), " ")}, "state": {"st"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
	}
	for k, v := range extra {
		q[k] = v
	}
	back, err := o.Browser("test-user2").Authorize(t.Context(), o.Metadata.AuthorizationEndpoint+"?"+q.Encode(), redirectURI)
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, o.Stderr())
	}
	if back.Get("state") != "st" {
		t.Fatalf("the provider sent back %v, without the state", back)
	}
	return back, verifier
}

// TestRefreshAndRevocation: a code flow with offline_access gets a refresh token, which the
// refresh_token grant rotates (the one sent is spent) and the revocation endpoint revokes.
func TestRefreshAndRevocation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a command")
	}
	const resource = "https://gateway.test/mcp"
	o := Start(t, opCmd.Path(t), "-resource", resource)
	tok := o.AuthCodeTokens(t, "test-user2", nil, "offline_access")
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token for offline_access")
	}
	refresh := func(rt string) (int, map[string]any) {
		return postForm(t, o.Metadata.TokenEndpoint, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {NativeClientID}}, "", "")
	}
	status, body := refresh(tok.RefreshToken)
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v\nstderr:\n%s", status, body, o.Stderr())
	}
	rotated, _ := body["refresh_token"].(string)
	access, _ := body["access_token"].(string)
	if rotated == "" || rotated == tok.RefreshToken {
		t.Errorf("refresh answered refresh_token %q, want a new one", rotated)
	}
	c := claims(t, access)
	if aud, _ := c["aud"].([]any); c["sub"] != "id2" || !slices.Contains(aud, any(resource)) {
		t.Errorf("refreshed token's claims %v: want sub id2, aud with %s", c, resource)
	}
	if status, body := refresh(tok.RefreshToken); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("the spent refresh token again: %d %v, want invalid_grant", status, body)
	}

	status, body = postForm(t, o.Metadata.RevocationEndpoint, url.Values{"token": {rotated}, "client_id": {NativeClientID}}, "", "")
	if status != http.StatusOK {
		t.Fatalf("revoke: %d %v", status, body)
	}
	if status, body := refresh(rotated); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("the revoked refresh token: %d %v, want invalid_grant", status, body)
	}
}

// TestRequireResource: with -require-resource the authorization request, the code exchange and
// the refresh must each name the resource (RFC 8707); a refused exchange spends no code.
func TestRequireResource(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a command")
	}
	const resource = "https://gateway.test/mcp"
	o := Start(t, opCmd.Path(t), "-resource", resource, "-require-resource")
	named := url.Values{"resource": {resource}}

	for _, tc := range []struct {
		name  string
		extra url.Values
	}{
		{"no resource", nil},
		{"another resource", url.Values{"resource": {"https://other.test/mcp"}}},
		{"the resource and another", url.Values{"resource": {resource, "https://other.test/mcp"}}},
	} {
		t.Run("authorize/"+tc.name, func(t *testing.T) {
			back, _ := authorize(t, o, NativeClientID, NativeRedirectURI, tc.extra)
			if back.Get("error") != "invalid_target" || back.Get("code") != "" {
				t.Errorf("the provider sent back %v, want error invalid_target", back)
			}
		})
	}

	back, verifier := authorize(t, o, NativeClientID, NativeRedirectURI, named, "offline_access")
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {back.Get("code")}, "redirect_uri": {NativeRedirectURI},
		"client_id": {NativeClientID}, "code_verifier": {verifier}}
	for _, tc := range []struct {
		name     string
		resource []string
	}{
		{"no resource", nil},
		{"another resource", []string{"https://other.test/mcp"}},
	} {
		t.Run("exchange/"+tc.name, func(t *testing.T) {
			f := maps.Clone(exchange)
			f["resource"] = tc.resource
			if status, body := postForm(t, o.Metadata.TokenEndpoint, f, "", ""); status != http.StatusBadRequest || body["error"] != "invalid_target" {
				t.Errorf("%d %v, want invalid_target", status, body)
			}
		})
	}
	exchange["resource"] = named["resource"]
	status, body := postForm(t, o.Metadata.TokenEndpoint, exchange, "", "")
	if status != http.StatusOK {
		t.Fatalf("exchange naming the resource, after the refusals: %d %v\nstderr:\n%s", status, body, o.Stderr())
	}
	rt, _ := body["refresh_token"].(string)
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {NativeClientID}}
	if status, body := postForm(t, o.Metadata.TokenEndpoint, refresh, "", ""); status != http.StatusBadRequest || body["error"] != "invalid_target" {
		t.Errorf("refresh without the resource: %d %v, want invalid_target", status, body)
	}
	refresh["resource"] = named["resource"]
	if status, body := postForm(t, o.Metadata.TokenEndpoint, refresh, "", ""); status != http.StatusOK {
		t.Errorf("refresh naming the resource: %d %v", status, body)
	}
}

// postJSON posts v as JSON to u and returns the status and the JSON answer.
func postJSON(t *testing.T, u string, v any) (int, map[string]any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(u, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("POST %s: %s: not JSON: %v", u, resp.Status, err)
	}
	return resp.StatusCode, m
}

// TestRegistration: with -registration the provider advertises its registration endpoint
// (RFC 7591), and the public and confidential clients it registers run the code flow.
func TestRegistration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a command")
	}
	const resource = "https://gateway.test/mcp"
	o := Start(t, opCmd.Path(t), "-resource", resource, "-registration")
	if o.Metadata.RegistrationEndpoint != o.Issuer+"/register" {
		t.Fatalf("registration_endpoint %q, want %s/register", o.Metadata.RegistrationEndpoint, o.Issuer)
	}
	if plain := Start(t, opCmd.Path(t)); plain.Metadata.RegistrationEndpoint != "" {
		t.Errorf("without -registration the provider advertises %q", plain.Metadata.RegistrationEndpoint)
	}

	for _, tc := range []struct {
		name string
		req  map[string]any
		code string
	}{
		{"no redirect_uris", map[string]any{"client_name": "x"}, "invalid_redirect_uri"},
		{"a relative redirect URI", map[string]any{"redirect_uris": []string{"/callback"}}, "invalid_redirect_uri"},
		{"the implicit grant", map[string]any{"redirect_uris": []string{NativeRedirectURI}, "grant_types": []string{"implicit"}}, "invalid_client_metadata"},
		{"a token response type", map[string]any{"redirect_uris": []string{NativeRedirectURI}, "response_types": []string{"token"}}, "invalid_client_metadata"},
		{"private_key_jwt", map[string]any{"redirect_uris": []string{NativeRedirectURI}, "token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"},
		{"not client metadata", map[string]any{"redirect_uris": "http://127.0.0.1/callback"}, "invalid_client_metadata"},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			if status, body := postJSON(t, o.Metadata.RegistrationEndpoint, tc.req); status != http.StatusBadRequest || body["error"] != tc.code {
				t.Errorf("%d %v, want 400 %s", status, body, tc.code)
			}
		})
	}

	for _, tc := range []struct {
		method   string
		redirect string
	}{
		{"none", "http://127.0.0.1/callback"},
		{"client_secret_basic", "http://127.0.0.1:1/callback"},
	} {
		t.Run("registered/"+tc.method, func(t *testing.T) {
			status, reg := postJSON(t, o.Metadata.RegistrationEndpoint, map[string]any{
				"client_name": "test", "redirect_uris": []string{tc.redirect}, "token_endpoint_auth_method": tc.method,
				"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
			})
			id, _ := reg["client_id"].(string)
			secret, _ := reg["client_secret"].(string)
			if status != http.StatusCreated || id == "" || reg["token_endpoint_auth_method"] != tc.method || (secret != "") != (tc.method != "none") {
				t.Fatalf("registration: %d %v", status, reg)
			}
			back, verifier := authorize(t, o, id, tc.redirect, nil, "offline_access")
			form := url.Values{"grant_type": {"authorization_code"}, "code": {back.Get("code")}, "redirect_uri": {tc.redirect}, "code_verifier": {verifier}}
			user := ""
			if secret == "" {
				form.Set("client_id", id)
			} else {
				user = id
				if status, body := postForm(t, o.Metadata.TokenEndpoint, form, id, "wrong"); status != http.StatusUnauthorized || body["error"] != "invalid_client" {
					t.Errorf("a wrong secret: %d %v, want 401 invalid_client", status, body)
				}
			}
			status, body := postForm(t, o.Metadata.TokenEndpoint, form, user, secret)
			if status != http.StatusOK || body["refresh_token"] == nil {
				t.Fatalf("code exchange: %d %v\nstderr:\n%s", status, body, o.Stderr())
			}
			if c := claims(t, body["access_token"].(string)); c["client_id"] != id || c["sub"] != "id2" {
				t.Errorf("token's claims %v: want client_id %s, sub id2", c, id)
			}
		})
	}
}

// TestBrowserSignIn: the browser signs its user in on the login form, and a sign-in the
// provider refuses is an error, not a page.
func TestBrowserSignIn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a command")
	}
	o := Start(t, opCmd.Path(t))
	auth := o.Metadata.AuthorizationEndpoint + "?" + url.Values{
		"client_id": {NativeClientID}, "redirect_uri": {NativeRedirectURI}, "response_type": {"code"}, "scope": {"openid"},
		"state": {"st"}, "code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"},
	}.Encode()
	var seen []Page
	back, err := o.Browser("test-user2").Watch(func(p Page) { seen = append(seen, p) }).Authorize(t.Context(), auth, NativeRedirectURI)
	if err != nil || back.Get("code") == "" || back.Get("state") != "st" {
		t.Errorf("Authorize = %v, %v; want a code and the state", back, err)
	}
	// Watch was handed every answer on the way: the login form among them, and last the
	// redirect to the redirect URI, which is not requested.
	form := slices.ContainsFunc(seen, func(p Page) bool { return p.Status == http.StatusOK && loginAction.Match(p.Body) })
	if n := len(seen); !form || n == 0 || !strings.HasPrefix(seen[n-1].Header.Get("Location"), NativeRedirectURI) {
		t.Errorf("Watch was handed %d answers, the login form among them %v; want the form, and last the redirect to %s", n, form, NativeRedirectURI)
	}
	if back, err := o.Browser("test-user2").WithPassword("wrong").Authorize(t.Context(), auth, NativeRedirectURI); err == nil || !strings.Contains(err.Error(), "refused the sign-in") {
		t.Errorf("a wrong password: Authorize = %v, %v; want the refused sign-in", back, err)
	}
	// Where the flow ends on a page, Visit returns it: the provider's answer to a request
	// from an unknown client, say.
	p, err := o.Browser("test-user2").Visit(t.Context(), o.Metadata.AuthorizationEndpoint+"?client_id=nobody&redirect_uri=x", "")
	if err != nil || p.Status != http.StatusBadRequest {
		t.Errorf("an unknown client: Visit = %+v, %v; want the provider's 400 page", p, err)
	}
}
