// Package testop runs the example OpenID Provider (examples/identity/op) as a separate
// process for tests, and gets tokens from it the way clients do: by the client-credentials
// grant, and by the authorization code grant with PKCE through its login form, which a
// Browser fills in as a person would.
package testop

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Package is the import path of the provider; build it once per test binary with
// testbin.New(testop.Package) and pass its Path to Start.
const Package = "github.com/verdictgate/verdict/examples/identity/op"

// The provider's authorization-code client and its users (see examples/identity/op).
const (
	NativeClientID    = "native"
	NativeRedirectURI = "http://127.0.0.1/callback"
	Password          = "verysecure"
)

// An OP is a running provider process.
type OP struct {
	Issuer string
	Port   int
	// Metadata is the provider's discovery document.
	Metadata struct {
		Issuer                string `json:"issuer"`
		AuthorizationEndpoint string `json:"authorization_endpoint"`
		TokenEndpoint         string `json:"token_endpoint"`
		IntrospectionEndpoint string `json:"introspection_endpoint"`
		RevocationEndpoint    string `json:"revocation_endpoint"`
		RegistrationEndpoint  string `json:"registration_endpoint"` // with -registration
		JWKSURI               string `json:"jwks_uri"`
	}

	cmd      *exec.Cmd
	stderr   *syncBuffer
	stopOnce sync.Once
}

// Start starts the provider at path (a built examples/identity/op) with args, which should
// not include -listen, waits until it has said where it listens and served its discovery
// document, and stops it when t ends.
func Start(t testing.TB, path string, args ...string) *OP {
	t.Helper()
	o := &OP{stderr: &syncBuffer{}}
	o.cmd = exec.Command(path, append([]string{"-listen", "127.0.0.1:0"}, args...)...)
	o.cmd.Stderr = o.stderr
	stdout, err := o.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Stop)
	// The provider prints its line once it listens: reading it is the readiness signal, and
	// end of file means it died first.
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		o.Stop()
		t.Fatalf("op did not start: %v\nstderr:\n%s", err, o.stderr)
	}
	go io.Copy(io.Discard, stdout)
	var ready struct {
		Issuer string `json:"issuer"`
		Port   int    `json:"port"`
	}
	if err := json.Unmarshal(line, &ready); err != nil || ready.Issuer == "" {
		t.Fatalf("op printed %q: %v", line, err)
	}
	o.Issuer, o.Port = ready.Issuer, ready.Port
	if err := getJSON(t.Context(), o.Issuer+"/.well-known/openid-configuration", &o.Metadata); err != nil {
		t.Fatalf("op discovery: %v\nstderr:\n%s", err, o.stderr)
	}
	return o
}

// Stop ends the provider, if it still runs. It is safe to call more than once.
func (o *OP) Stop() {
	o.stopOnce.Do(func() {
		o.cmd.Process.Kill()
		o.cmd.Wait()
	})
}

// Stderr returns what the provider has written on its standard error.
func (o *OP) Stderr() string { return o.stderr.String() }

// ClientCredentials returns an access token for clientID by the client-credentials grant.
func (o *OP) ClientCredentials(t testing.TB, clientID, secret string, scopes ...string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	req := mustRequest(t, t.Context(), http.MethodPost, o.Metadata.TokenEndpoint, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	return o.tokens(t, req).AccessToken
}

// AuthCode returns an access token of the native client for the user username, by the
// authorization code grant with PKCE: it asks for a code, signs in on the provider's login
// form as a browser would, and redeems the code with its verifier.
func (o *OP) AuthCode(t testing.TB, username string, scopes ...string) string {
	t.Helper()
	return o.AuthCodeTokens(t, username, nil, scopes...).AccessToken
}

// Tokens is the token endpoint's answer to a code exchange.
type Tokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"` // with the scope offline_access
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
}

// AuthCodeTokens is AuthCode with the whole answer, and extra parameters sent with both the
// authorization request and the code exchange (a resource, say).
func (o *OP) AuthCodeTokens(t testing.TB, username string, extra url.Values, scopes ...string) Tokens {
	t.Helper()
	ctx := t.Context()
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	state := rand.Text()
	params := url.Values{
		"client_id":             {NativeClientID},
		"redirect_uri":          {NativeRedirectURI},
		"response_type":         {"code"},
		"scope":                 {strings.Join(append([]string{"openid"}, scopes...), " ")},
		"state":                 {state},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	maps.Copy(params, extra)
	back, err := o.Browser(username).Authorize(ctx, o.Metadata.AuthorizationEndpoint+"?"+params.Encode(), NativeRedirectURI)
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, o.stderr)
	}
	code := back.Get("code")
	if back.Get("state") != state || code == "" {
		t.Fatalf("the provider sent back %v, want a code and the state", back)
	}

	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {NativeRedirectURI},
		"client_id":     {NativeClientID},
		"code_verifier": {verifier},
	}
	maps.Copy(form, extra)
	req := mustRequest(t, ctx, http.MethodPost, o.Metadata.TokenEndpoint, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return o.tokens(t, req)
}

// tokens sends req to the token endpoint and returns its answer, which must carry an access
// token.
func (o *OP) tokens(t testing.TB, req *http.Request) Tokens {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var tok Tokens
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("token endpoint: %s\n%s\nstderr:\n%s", resp.Status, body, o.stderr)
	}
	return tok
}

func mustRequest(t testing.TB, ctx context.Context, method, u string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// syncBuffer is a bytes.Buffer the process writes while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
