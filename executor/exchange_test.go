package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/upstream"
)

// TestTokenCacheBounds: a token is served until it expires, and a full cache drops the token
// that expires first.
func TestTokenCacheBounds(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	c := newTokenCache(2)
	a, b, d := credKey{principal: "a", server: "s"}, credKey{principal: "b", server: "s"}, credKey{principal: "d", server: "s"}
	put := func(k credKey, tok string, exp time.Time) { c.put(heldToken{key: k, token: tok, exp: exp}, t0) }
	put(a, "ta", t0.Add(time.Minute))
	put(b, "tb", t0.Add(2*time.Minute))
	if h, ok := c.get(a, t0.Add(59*time.Second)); !ok || h.token != "ta" {
		t.Fatalf("a before its expiry: %q %v", h.token, ok)
	}
	if _, ok := c.get(a, t0.Add(time.Minute)); ok {
		t.Fatal("a served at its expiry")
	}
	put(d, "td", t0.Add(3*time.Minute))
	if _, ok := c.get(a, t0); ok || c.len() != 2 {
		t.Fatalf("full cache kept the token expiring first (%d held)", c.len())
	}
	put(b, "tb2", t0.Add(4*time.Minute)) // a replacement takes no room
	if h, _ := c.get(b, t0); h.token != "tb2" || c.len() != 2 {
		t.Fatalf("b is %q, %d held", h.token, c.len())
	}
	c.drop("b", "s")
	if _, ok := c.get(b, t0); ok || c.len() != 1 {
		t.Fatalf("b held after its drop (%d held)", c.len())
	}
}

// TestUserConnsBounds: a principal's connection is its own and is reused; past the bound the
// least recently used idle one is closed, a call finding all in use is refused, and an idle
// one is closed once idle long enough. Times are the pool's clock, moved by hand.
func TestUserConnsBounds(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "probe", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "probe", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()
	dials := 0
	dial := func(ctx context.Context) (*upstream.Client, error) {
		dials++
		return upstream.Dial(ctx, "probe", upstream.Config{URL: hs.URL}, upstream.Options{})
	}
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	p := newUserConns(2, time.Minute)
	defer p.close()
	ctx := t.Context()
	a, b, c := credKey{principal: "a", server: "s"}, credKey{principal: "b", server: "s"}, credKey{principal: "c", server: "s"}

	ca, releaseA, err := p.acquire(ctx, a, clock, dial)
	if err != nil {
		t.Fatal(err)
	}
	releaseA()
	again, releaseA, err := p.acquire(ctx, a, clock, dial)
	if err != nil || again != ca || dials != 1 {
		t.Fatalf("a's second call: %v, same connection %v, %d dials", err, again == ca, dials)
	}
	_, releaseB, err := p.acquire(ctx, b, clock, dial) // a and b in use: the pool is full
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.acquire(ctx, c, clock, dial); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a third principal while both are in use: %v", err)
	}
	now = now.Add(time.Second)
	releaseA()
	now = now.Add(time.Second)
	releaseB()
	_, releaseC, err := p.acquire(ctx, c, clock, dial) // a was let go first: it makes room
	if err != nil {
		t.Fatal(err)
	}
	releaseC()
	if _, _, err := ca.Call(ctx, upstream.ToolCall{Tool: "probe", Args: json.RawMessage(`{}`)}); !errors.Is(err, upstream.ErrClosed) && !errors.Is(err, upstream.ErrUnavailable) {
		t.Errorf("a's connection still calls: %v", err)
	}
	if p.open() != 2 {
		t.Fatalf("%d open, want b and c", p.open())
	}
	p.sweep(now.Add(59 * time.Second))
	if p.open() != 2 {
		t.Fatalf("%d open before the idle time, want 2", p.open())
	}
	p.sweep(now.Add(time.Minute))
	if p.open() != 0 {
		t.Fatalf("%d open after the idle time, want 0", p.open())
	}
}

// TestExchangeAnswers: an exchange answer is taken only as a bearer access token a header can
// carry, and a failure is described without the answer's body.
func TestExchangeAnswers(t *testing.T) {
	good := oidc.TokenExchangeResponse{AccessToken: "eyJ.eyJ.sig", TokenType: "Bearer", IssuedTokenType: oidc.AccessTokenType, ExpiresIn: 300}
	for _, tc := range []struct {
		name string
		edit func(*oidc.TokenExchangeResponse)
		ok   bool
	}{
		{"bearer access token", func(*oidc.TokenExchangeResponse) {}, true},
		{"bearer in lower case, a jwt", func(r *oidc.TokenExchangeResponse) { r.TokenType, r.IssuedTokenType = "bearer", oidc.JWTTokenType }, true},
		{"no access token", func(r *oidc.TokenExchangeResponse) { r.AccessToken = "" }, false},
		{"N_A", func(r *oidc.TokenExchangeResponse) { r.TokenType = "N_A" }, false},
		{"DPoP", func(r *oidc.TokenExchangeResponse) { r.TokenType = "DPoP" }, false},
		{"a refresh token", func(r *oidc.TokenExchangeResponse) { r.IssuedTokenType = oidc.RefreshTokenType }, false},
		{"a line break", func(r *oidc.TokenExchangeResponse) { r.AccessToken = "abc\r\nX-Evil: 1" }, false},
		{"too long", func(r *oidc.TokenExchangeResponse) { r.AccessToken = strings.Repeat("a", 16<<10+1) }, false},
	} {
		r := good
		tc.edit(&r)
		err := checkExchanged(&r)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && strings.Contains(err.Error(), r.AccessToken) && r.AccessToken != "" {
			t.Errorf("%s: the error quotes the token: %v", tc.name, err)
		}
	}

	for _, tc := range []struct {
		name   string
		err    error
		status int
		want   string
	}{
		{"refused", &oidc.Error{ErrorType: oidc.InvalidTarget, Description: "not for you"}, 403, `token endpoint refused: "invalid_target": "not for you"`},
		{"quoting the subject token", &oidc.Error{ErrorType: oidc.InvalidRequest, Description: "bad subject-tok"}, 403, `token endpoint refused: "invalid_request": "bad [redacted]"`},
		{"the executor's client", &oidc.Error{ErrorType: oidc.InvalidClient}, 503, `token endpoint refused: "invalid_client": ""`},
		{"down", &oidc.Error{ErrorType: oidc.ServerError}, 503, `token endpoint refused: "server_error": ""`},
		// The provider's words are quoted and cut short: a code with a line break or of any
		// length writes one bounded value into the log line, never a line of its own.
		{"a code that is no code", &oidc.Error{ErrorType: "x\nlevel=ERROR msg=forged " + "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"}, 403,
			`token endpoint refused: "x\nlevel=ERROR msg=forged yyyyyyyyyyyyyyy": ""`},
		{"not an answer", errors.New(`failed to unmarshal response: bad {"access_token":"secret"}`), 503, "the token endpoint's answer is not a token response"},
	} {
		e := describeExchangeError(tc.err, "subject-tok")
		if e.status != tc.status || e.msg != tc.want {
			t.Errorf("%s: %d %q, want %d %q", tc.name, e.status, e.msg, tc.status, tc.want)
		}
	}
}

// TestExchangeSecretFile: a token_exchange server's client secret is read at start, and a
// missing or empty file stops the executor, naming the key and the file.
func TestExchangeSecretFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := keys.Keygen(filepath.Join(dir, "receipt"), jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The secret is read as a private key is: a file others may read is refused, and so is
	// one no secret is as long as.
	shared := filepath.Join(dir, "shared")
	if err := os.WriteFile(shared, []byte("exchange-secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	large := filepath.Join(dir, "large")
	if err := os.WriteFile(large, bytes.Repeat([]byte("s"), 4<<10+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		empty:                         "credentials.remote.client_secret_file " + empty + " is empty",
		filepath.Join(dir, "missing"): "credentials.remote.client_secret_file: ",
		shared:                        "credentials.remote.client_secret_file: keys: private key " + shared + " has mode 0644: it must be readable by its owner alone",
		large:                         "credentials.remote.client_secret_file: " + large + ": larger than 4096 bytes",
	} {
		cfg := Config{
			Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), ExecutorID: execID,
			TrustedIssuers: []TrustedIssuer{{Issuer: issuerID, JWKS: filepath.Join(dir, "jwks.json")}},
			ReceiptKey:     filepath.Join(dir, "receipt", keys.PrivateKeyFile),
			Servers:        map[string]upstream.Config{"remote": {URL: "https://remote.test/mcp"}},
			Credentials: map[string]Credential{"remote": {Mode: api.CredentialTokenExchange, TokenEndpoint: "https://idp.test/token",
				ClientID: "executor", ClientSecretFile: file, Audience: "https://remote.test/mcp", SubjectIssuer: "https://idp.test"}},
			Identity: &identity.Config{Issuers: []identity.Issuer{{Issuer: "https://idp.test", Audience: "https://gw.test/mcp"}}},
			Callers:  []Caller{{Name: "gate", TokenSHA256: httpx.HashToken(callerToken)}},
		}
		_, err := New(t.Context(), cfg, Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("secret file %s: %v, want %q", file, err, want)
		}
	}
}
