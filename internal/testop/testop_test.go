package testop

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testbin"
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
