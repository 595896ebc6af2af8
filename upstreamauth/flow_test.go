package upstreamauth

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"golang.org/x/oauth2"

	"github.com/verdictgate/verdict/internal/testing/testop"
)

// discoverFlow finds the authorization server of the MCP server m the way the executor will:
// the 401's challenge, the resource's metadata it names, the server's metadata; and returns
// the native client's flow there.
func discoverFlow(t *testing.T, m *mcpServer, scopes ...string) *Flow {
	t.Helper()
	ctx := t.Context()
	resp, err := http.Get(m.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	metaURL, scope, err := ResourceMetadataURL(strings.Join(resp.Header.Values("WWW-Authenticate"), ", "))
	if err != nil || resp.StatusCode != http.StatusUnauthorized || scope != "files:read" {
		t.Fatalf("the server's %d challenge: %q, %q, %v", resp.StatusCode, metaURL, scope, err)
	}
	res, err := FetchResource(ctx, nil, m.URL, metaURL)
	if err != nil {
		t.Fatal(err)
	}
	as, err := DiscoverServer(ctx, nil, res.AuthorizationServers[0])
	if err != nil {
		t.Fatal(err)
	}
	f := &Flow{Server: as, Client: Client{ID: testop.NativeClientID}, Resource: m.URL, RedirectURL: testop.NativeRedirectURI, Scopes: scopes}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCodeFlow runs the whole of a user's grant against the example provider, which holds the
// flow to RFC 8707's resource on every request: discovery from the MCP server's 401, consent
// through the login form, the code exchange, a refresh that rotates the refresh token, and
// revocation.
func TestCodeFlow(t *testing.T) {
	m := newMCPServer(t)
	o := startOP(t, "-resource", m.URL, "-require-resource")
	m.setIssuer(o.Issuer)
	ctx := t.Context()
	f := discoverFlow(t, m, "openid", "offline_access", "files:read")
	if f.Server.TokenEndpoint != o.Metadata.TokenEndpoint || f.Server.RevocationEndpoint != o.Metadata.RevocationEndpoint {
		t.Errorf("discovered %+v, want the provider's endpoints", f.Server)
	}

	authURL, p := f.Start()
	q := mustParse(t, authURL).Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") != oauth2.S256ChallengeFromVerifier(p.Verifier) ||
		q.Get("state") != p.State || q.Get("resource") != m.URL || q.Get("client_id") != testop.NativeClientID {
		t.Fatalf("authorization request %s: want the S256 challenge, the state, the resource and the client", authURL)
	}
	if _, p2 := f.Start(); p2.State == p.State || p2.Verifier == p.Verifier {
		t.Error("two Starts share a state or a verifier")
	}
	back, err := o.Browser("test-user2").Authorize(ctx, authURL, f.RedirectURL)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.Exchange(ctx, nil, p, back)
	if err != nil {
		t.Fatalf("Exchange: %v\nstderr:\n%s", err, o.Stderr())
	}
	c := claims(t, tok.AccessToken)
	if c["sub"] != "id2" || !slices.Contains(audience(c), m.URL) || tok.RefreshToken == "" || tok.Expiry.IsZero() {
		t.Fatalf("token: claims %v, refresh token %t, expiry %v: want sub id2, aud with %s, a refresh token, an expiry", c, tok.RefreshToken != "", tok.Expiry, m.URL)
	}
	if got := f.GrantedScopes(tok); !slices.Equal(got, []string{"openid", "offline_access", "files:read"}) {
		t.Errorf("GrantedScopes = %v", got)
	}
	// The code is spent.
	if _, err := f.Exchange(ctx, nil, p, back); !isOAuth(err, EndpointToken, "invalid_grant") {
		t.Errorf("the callback again: %v, want the token endpoint's invalid_grant", err)
	}

	refreshed, err := f.Refresh(ctx, nil, tok.RefreshToken)
	if err != nil {
		t.Fatalf("Refresh: %v\nstderr:\n%s", err, o.Stderr())
	}
	if refreshed.AccessToken == tok.AccessToken || refreshed.RefreshToken == "" || refreshed.RefreshToken == tok.RefreshToken {
		t.Errorf("a refresh gave the same access token or no rotated refresh token")
	}
	if c := claims(t, refreshed.AccessToken); c["sub"] != "id2" || !slices.Contains(audience(c), m.URL) {
		t.Errorf("refreshed token's claims %v", c)
	}
	// The provider rotates: the refresh token sent is spent.
	if _, err := f.Refresh(ctx, nil, tok.RefreshToken); !errors.Is(err, ErrRevoked) || !isOAuth(err, EndpointToken, "invalid_grant") {
		t.Errorf("the spent refresh token: %v, want ErrRevoked with invalid_grant", err)
	}

	if err := f.Revoke(ctx, nil, refreshed.RefreshToken); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if _, err := f.Refresh(ctx, nil, refreshed.RefreshToken); !errors.Is(err, ErrRevoked) {
		t.Errorf("the revoked refresh token: %v, want ErrRevoked", err)
	}
	// RFC 7009 §2.2: a token the server does not know is revoked all the same.
	if err := f.Revoke(ctx, nil, refreshed.RefreshToken); err != nil {
		t.Errorf("Revoke again: %v", err)
	}
}

// TestExchangeRefusals: a callback that is not the pending flow's, that names another issuer,
// or that carries an error is refused before anything is sent (a good callback after the
// refusals still redeems its code), and a refused code exchange is the token endpoint's *Error.
func TestExchangeRefusals(t *testing.T) {
	m := newMCPServer(t)
	o := startOP(t, "-resource", m.URL, "-require-resource")
	m.setIssuer(o.Issuer)
	ctx := t.Context()
	f := discoverFlow(t, m, "openid")
	authURL, p := f.Start()
	back, err := o.Browser("test-user2").Authorize(ctx, authURL, f.RedirectURL)
	if err != nil {
		t.Fatal(err)
	}
	with := func(change func(url.Values)) url.Values {
		v := url.Values{}
		for k, vs := range back {
			v[k] = slices.Clone(vs)
		}
		change(v)
		return v
	}
	announcing := *f
	announcing.Server = new(*f.Server)
	announcing.Server.AuthorizationResponseIssParameterSupported = true

	for _, tc := range []struct {
		name     string
		flow     *Flow
		pending  Pending
		callback url.Values
		want     error
		code     string // the OAuth error code, for an *Error
	}{
		{"another state", f, p, with(func(v url.Values) { v.Set("state", "other") }), ErrStateMismatch, ""},
		{"no state", f, p, with(func(v url.Values) { v.Del("state") }), ErrStateMismatch, ""},
		{"another pending flow", f, Pending{State: "other", Verifier: p.Verifier}, back, ErrStateMismatch, ""},
		{"an empty pending flow", f, Pending{}, with(func(v url.Values) { v.Set("state", "") }), ErrStateMismatch, ""},
		{"two states", f, p, with(func(v url.Values) { v.Add("state", p.State) }), ErrCallback, ""},
		{"two codes", f, p, with(func(v url.Values) { v.Add("code", "x") }), ErrCallback, ""},
		{"no code", f, p, with(func(v url.Values) { v.Del("code") }), ErrCallback, ""},
		{"another issuer", f, p, with(func(v url.Values) { v.Set("iss", "https://as.example.com") }), ErrIssuerMismatch, ""},
		{"no issuer from a server that sends it", &announcing, p, back, ErrIssuerMismatch, ""},
		{"an error", f, p, with(func(v url.Values) { v.Set("error", "access_denied") }), nil, "access_denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := tc.flow.Exchange(ctx, nil, tc.pending, tc.callback)
			switch {
			case tok != nil:
				t.Errorf("Exchange gave a token")
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("Exchange: %v, want %v", err, tc.want)
			case tc.code != "" && !isOAuth(err, EndpointAuthorization, tc.code):
				t.Errorf("Exchange: %v, want the authorization endpoint's %s", err, tc.code)
			}
		})
	}
	// The announcing server's own iss passes.
	if _, err := announcing.Exchange(ctx, nil, Pending{State: p.State, Verifier: "wrong-verifier-" + p.Verifier}, with(func(v url.Values) { v.Set("iss", o.Issuer) })); !isOAuth(err, EndpointToken, "invalid_grant") {
		// A wrong verifier fails PKCE at the token endpoint; the code is not spent by it.
		t.Errorf("a wrong verifier: %v, want the token endpoint's invalid_grant", err)
	}
	if tok, err := f.Exchange(ctx, nil, p, back); err != nil || tok.AccessToken == "" {
		t.Errorf("the good callback after the refusals: %v", err)
	}

	// The provider's own error callback: a flow for a resource it does not serve.
	other := *f
	other.Resource = "https://other.test/mcp"
	authURL, p = other.Start()
	back, err = o.Browser("test-user2").Authorize(ctx, authURL, other.RedirectURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exchange(ctx, nil, p, back); !isOAuth(err, EndpointAuthorization, "invalid_target") {
		t.Errorf("the provider's refusal of the resource: %v, want the authorization endpoint's invalid_target", err)
	}
}

// TestRegisterThenFlow registers a client at the provider's registration endpoint (RFC 7591),
// public or with a secret, and runs the flow, a refresh and a revocation with it.
func TestRegisterThenFlow(t *testing.T) {
	m := newMCPServer(t)
	o := startOP(t, "-resource", m.URL, "-require-resource", "-registration")
	m.setIssuer(o.Issuer)
	ctx := t.Context()
	base := discoverFlow(t, m, "openid", "offline_access")
	if base.Server.RegistrationEndpoint != o.Metadata.RegistrationEndpoint || base.Server.RegistrationEndpoint == "" {
		t.Fatalf("registration_endpoint %q, want the provider's", base.Server.RegistrationEndpoint)
	}
	for _, tc := range []struct {
		method string
		style  oauth2.AuthStyle
	}{
		{"", oauth2.AuthStyleInParams},
		{AuthMethodNone, oauth2.AuthStyleInParams},
		{AuthMethodBasic, oauth2.AuthStyleInHeader},
	} {
		t.Run("method "+cmp.Or(tc.method, "default"), func(t *testing.T) {
			client, err := Register(ctx, nil, base.Server, RegistrationRequest{
				ClientName: "verdict executor", RedirectURIs: []string{"http://127.0.0.1:9/callback"}, TokenEndpointAuthMethod: tc.method,
			})
			if err != nil {
				t.Fatalf("Register: %v\nstderr:\n%s", err, o.Stderr())
			}
			if client.ID == "" || client.AuthStyle != tc.style || (client.Secret != "") != (tc.method == AuthMethodBasic) {
				t.Fatalf("registered %v, want auth style %d and a secret only for client_secret_basic", client, tc.style)
			}
			f := *base
			f.Client, f.RedirectURL = client, "http://127.0.0.1:9/callback"
			authURL, p := f.Start()
			back, err := o.Browser("test-user2").Authorize(ctx, authURL, f.RedirectURL)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := f.Exchange(ctx, nil, p, back)
			if err != nil {
				t.Fatalf("Exchange: %v\nstderr:\n%s", err, o.Stderr())
			}
			if c := claims(t, tok.AccessToken); c["client_id"] != client.ID || c["sub"] != "id2" {
				t.Errorf("token's claims %v: want the registered client and sub id2", c)
			}
			tok, err = f.Refresh(ctx, nil, tok.RefreshToken)
			if err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			if err := f.Revoke(ctx, nil, tok.RefreshToken); err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			if _, err := f.Refresh(ctx, nil, tok.RefreshToken); !errors.Is(err, ErrRevoked) {
				t.Errorf("after Revoke: %v, want ErrRevoked", err)
			}
		})
	}
	t.Run("a wrong secret", func(t *testing.T) {
		client, err := Register(ctx, nil, base.Server, RegistrationRequest{RedirectURIs: []string{"http://127.0.0.1:9/callback"}, TokenEndpointAuthMethod: AuthMethodBasic})
		if err != nil {
			t.Fatal(err)
		}
		f := *base
		client.Secret = "wrong"
		f.Client, f.RedirectURL = client, "http://127.0.0.1:9/callback"
		authURL, p := f.Start()
		back, err := o.Browser("test-user2").Authorize(ctx, authURL, f.RedirectURL)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Exchange(ctx, nil, p, back); !isOAuth(err, EndpointToken, "invalid_client") {
			t.Errorf("Exchange: %v, want the token endpoint's invalid_client", err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		_, err := Register(ctx, nil, base.Server, RegistrationRequest{RedirectURIs: []string{"http://127.0.0.1:9/callback"}, TokenEndpointAuthMethod: AuthMethodPost})
		if !isOAuth(err, EndpointRegistration, "invalid_client_metadata") {
			t.Errorf("client_secret_post, which the provider does not register: %v, want invalid_client_metadata", err)
		}
	})
	t.Run("no registration endpoint", func(t *testing.T) {
		plain := startOP(t)
		as, err := DiscoverServer(ctx, nil, plain.Issuer)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Register(ctx, nil, as, RegistrationRequest{RedirectURIs: []string{"http://127.0.0.1:9/callback"}}); !errors.Is(err, ErrNoRegistration) {
			t.Errorf("Register: %v, want ErrNoRegistration", err)
		}
	})
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestPendingPrinting: a Pending's state and verifier, and the secret of a Flow's client,
// print as [redacted] under every verb and in log/slog.
func TestPendingPrinting(t *testing.T) {
	const secret, state, verifier = "client-secret-4f1e", "state-9a7b", "verifier-2c3d"
	p := Pending{State: state, Verifier: verifier}
	f := &Flow{Client: Client{ID: "c1", Secret: secret}, Resource: "https://files.example.com/mcp"}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		out = append(out, fmt.Sprintf(verb, p), fmt.Sprintf(verb, &p), fmt.Sprintf(verb, f), fmt.Sprintf(verb, *f))
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "pending", p, "flow", f)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "pending", p, "flow", f)
	out = append(out, logged.String())
	for _, v := range []any{p, f} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		y, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b), string(y))
	}
	for _, s := range out {
		for _, secret := range []string{secret, state, verifier} {
			if strings.Contains(s, secret) {
				t.Errorf("%q holds a secret", s)
			}
		}
	}
}
