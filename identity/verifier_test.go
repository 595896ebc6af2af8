package identity_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

var opCmd = testbin.New(testop.Package)

func TestMain(m *testing.M) {
	code := m.Run()
	opCmd.Remove()
	os.Exit(code)
}

const (
	resource      = "https://gateway.test/mcp"
	otherResource = "https://other.test/mcp"
)

// startOP starts a provider issuing tokens for resource to agent, for otherResource to
// other, and for both at once to both.
func startOP(t *testing.T) *testop.OP {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the example OpenID Provider")
	}
	return testop.Start(t, opCmd.Path(t), "-resource", resource, "-client", "agent:agent-secret",
		"-client", "other:other-secret="+otherResource, "-client", "both:both-secret="+resource+","+otherResource)
}

// clock is the verifier's time, set by the test: expiry is tested by moving it, never by
// waiting.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time)     { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }
func (c *clock) add(d time.Duration) { c.set(c.now().Add(d)) }

// counter counts the requests a verifier makes, by path.
type counter struct {
	mu    sync.Mutex
	paths map[string]int
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.paths == nil {
		c.paths = map[string]int{}
	}
	c.paths[r.URL.Path]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *counter) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[path]
}

func verifier(t *testing.T, is identity.Issuer, opts ...identity.Option) *identity.Verifier {
	t.Helper()
	v, err := identity.NewVerifier(identity.Config{Issuers: []identity.Issuer{is}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// payload decodes a token's claims without verifying them, for the test to know what the
// provider issued.
type payload struct {
	Iss   string   `json:"iss"`
	Sub   string   `json:"sub"`
	Aud   []string `json:"aud"`
	Exp   int64    `json:"exp"`
	Nbf   int64    `json:"nbf"`
	Iat   int64    `json:"iat"`
	Jti   string   `json:"jti"`
	Scope string   `json:"scope"`
}

func decode(t *testing.T, token string) (header map[string]any, p payload, raw []byte) {
	t.Helper()
	parts := strings.Split(token, ".")
	h, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(h, &header); err != nil {
		t.Fatal(err)
	}
	raw, err = base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return header, p, raw
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signRS256 signs claims with key under kid: a token the provider did not issue.
func signRS256(t *testing.T, key *rsa.PrivateKey, kid string, claims []byte) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// publicKeyPEM returns the provider's published RSA key as PEM, which a verifier that let
// the token choose the algorithm would take as an HMAC secret.
func publicKeyPEM(t *testing.T, o *testop.OP, kid string) []byte {
	t.Helper()
	resp, err := http.Get(o.Metadata.JWKSURI)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	keys := set.Key(kid)
	if len(keys) == 0 {
		t.Fatalf("the provider publishes no key %q", kid)
	}
	der, err := x509.MarshalPKIXPublicKey(keys[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestVerify(t *testing.T) {
	op := startOP(t)
	other := startOP(t) // a provider that is not a configured issuer
	ctx := t.Context()

	token := op.ClientCredentials(t, "agent", "agent-secret", "tools:read")
	header, claims, rawClaims := decode(t, token)
	kid, _ := header["kid"].(string)
	issued := time.Unix(claims.Iat, 0)
	expiry := time.Unix(claims.Exp, 0)
	userToken := op.AuthCode(t, "test-user2", "tools:call")
	both := op.ClientCredentials(t, "both", "both-secret")
	if _, p, _ := decode(t, both); strings.Join(p.Aud, " ") != resource+" "+otherResource {
		t.Fatalf("the provider issued aud %q, want both resources", p.Aud)
	}

	attacker, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Split(token, ".")
	tampered[1] = b64([]byte(strings.Replace(string(rawClaims), `"sub":"agent"`, `"sub":"admin"`, 1)))
	hsHeader := b64(mustJSON(t, map[string]string{"alg": "HS256", "kid": kid, "typ": "JWT"}))
	mac := hmac.New(sha256.New, publicKeyPEM(t, op, kid))
	mac.Write([]byte(hsHeader + "." + tampered[1]))
	hs256 := hsHeader + "." + tampered[1] + "." + b64(mac.Sum(nil))
	none := b64(mustJSON(t, map[string]string{"alg": "none", "typ": "JWT"})) + "." + b64(rawClaims) + "."

	jtiHash := sha256.Sum256([]byte("jti\x00" + op.Issuer + "\x00" + claims.Jti))
	base := identity.Issuer{Issuer: op.Issuer, Audience: resource}
	with := func(edit func(*identity.Issuer)) identity.Issuer {
		is := base
		edit(&is)
		return is
	}

	for _, tc := range []struct {
		name   string
		issuer identity.Issuer
		token  string
		now    time.Time // the verifier's clock; issued+1s if zero
		want   identity.Reason
		check  func(t *testing.T, p *identity.Principal)
	}{
		{name: "client credentials", issuer: base, token: token, check: func(t *testing.T, p *identity.Principal) {
			want := identity.Principal{
				ID: op.Issuer + "#agent", Subject: "agent", Issuer: op.Issuer, Scopes: []string{"tools:read"},
				Method: identity.MethodJWT, Expiry: expiry, TokenHash: "sha256:" + hex.EncodeToString(jtiHash[:]),
			}
			if p.ID != want.ID || p.Subject != want.Subject || p.Issuer != want.Issuer || strings.Join(p.Scopes, " ") != "tools:read" ||
				p.Method != want.Method || !p.Expiry.Equal(want.Expiry) || p.TokenHash != want.TokenHash {
				t.Errorf("principal %+v\nwant %+v", *p, want)
			}
			if strings.Contains(p.TokenHash, claims.Jti) || strings.Contains(p.TokenHash, token) {
				t.Error("the principal carries the token or its jti")
			}
		}},
		{name: "authorization code with PKCE", issuer: base, token: userToken, check: func(t *testing.T, p *identity.Principal) {
			if p.ID != op.Issuer+"#id2" || !p.HasScope("tools:call") {
				t.Errorf("principal %+v, want %s#id2 with tools:call", *p, op.Issuer)
			}
		}},
		{name: "principal claim", issuer: with(func(is *identity.Issuer) { is.PrincipalClaim = "client_id" }), token: token,
			check: func(t *testing.T, p *identity.Principal) {
				if p.ID != op.Issuer+"#agent" {
					t.Errorf("ID %s", p.ID)
				}
			}},
		{name: "required scope granted", issuer: with(func(is *identity.Issuer) { is.Scopes = []string{"tools:read"} }), token: token},
		{name: "last moment of the skew", issuer: base, token: token, now: expiry.Add(identity.DefaultMaxSkew - time.Second)},
		{name: "lifetime at max_token_lifetime", issuer: with(func(is *identity.Issuer) { is.MaxTokenLifetime = confx.Duration(expiry.Sub(issued)) }), token: token},
		{name: "lifetime beyond max_token_lifetime", issuer: with(func(is *identity.Issuer) { is.MaxTokenLifetime = confx.Duration(expiry.Sub(issued) - time.Second) }),
			token: token, want: identity.LifetimeTooLong},

		{name: "no token", issuer: base, token: "", want: identity.TokenMissing},
		{name: "not a JWT", issuer: base, token: "opaque-token", want: identity.TokenMalformed},
		{name: "garbage segments", issuer: base, token: "a.b.c", want: identity.TokenMalformed},
		{name: "expired", issuer: base, token: token, now: expiry.Add(identity.DefaultMaxSkew), want: identity.TokenExpired},
		{name: "expired with a smaller skew", issuer: with(func(is *identity.Issuer) { is.MaxSkew = confx.Duration(time.Second) }), token: token, now: expiry.Add(time.Second), want: identity.TokenExpired},
		{name: "not yet valid", issuer: base, token: token, now: issued.Add(-identity.DefaultMaxSkew - time.Second), want: identity.TokenNotYetValid},
		{name: "wrong audience", issuer: with(func(is *identity.Issuer) { is.Audience = "https://gateway.test/other" }), token: token, want: identity.WrongAudience},
		{name: "token for another resource", issuer: base, token: op.ClientCredentials(t, "other", "other-secret"), want: identity.WrongAudience},
		// A token for two resources serves neither where the other is excluded.
		{name: "token for both, the other not excluded", issuer: base, token: both},
		{name: "token for both, the other excluded", issuer: with(func(is *identity.Issuer) { is.ExcludedAudiences = []string{otherResource} }),
			token: both, want: identity.WrongAudience},
		{name: "token for both, seen from the other", issuer: identity.Config{Issuers: []identity.Issuer{with(func(is *identity.Issuer) { is.Audience = otherResource })}}.Excluding(resource).Issuers[0],
			token: both, want: identity.WrongAudience},
		{name: "token for one, another excluded", issuer: with(func(is *identity.Issuer) { is.ExcludedAudiences = []string{otherResource} }), token: token},
		{name: "wrong issuer", issuer: base, token: other.ClientCredentials(t, "agent", "agent-secret"), want: identity.WrongIssuer},
		{name: "alg none", issuer: base, token: none, want: identity.AlgNotAllowed},
		{name: "HS256 keyed with the public key", issuer: base, token: hs256, want: identity.AlgNotAllowed},
		{name: "alg not on the issuer's list", issuer: with(func(is *identity.Issuer) { is.Algorithms = []string{"ES256"} }), token: token, want: identity.AlgNotAllowed},
		{name: "kid never published", issuer: base, token: signRS256(t, attacker, "never-published", rawClaims), want: identity.UnknownKey},
		{name: "published kid, other key", issuer: base, token: signRS256(t, attacker, kid, rawClaims), want: identity.BadSignature},
		{name: "claims altered", issuer: base, token: strings.Join(tampered, "."), want: identity.BadSignature},
		{name: "insufficient scope", issuer: with(func(is *identity.Issuer) { is.Scopes = []string{"tools:call"} }), token: token, want: identity.InsufficientScope},
		{name: "principal claim absent", issuer: with(func(is *identity.Issuer) { is.PrincipalClaim = "email" }), token: token, want: identity.ClaimMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = issued.Add(time.Second)
			}
			v := verifier(t, tc.issuer, identity.WithClock(func() time.Time { return now }))
			p, err := v.Verify(ctx, tc.token)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if tc.check != nil {
					tc.check(t, p)
				}
				return
			}
			if p != nil || !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, %v; want a %s refusal", p, err, tc.want)
			}
			var e *identity.Error
			if !errors.As(err, &e) || e.Reason != tc.want {
				t.Fatalf("error %v is not an *Error with reason %s", err, tc.want)
			}
		})
	}
}

// TestIdPDown: a verifier whose issuer cannot be reached refuses every token, and says why.
func TestIdPDown(t *testing.T) {
	op := startOP(t)
	token := op.ClientCredentials(t, "agent", "agent-secret")
	_, claims, _ := decode(t, token)
	op.Stop()
	v := verifier(t, identity.Issuer{Issuer: op.Issuer, Audience: resource},
		identity.WithClock(func() time.Time { return time.Unix(claims.Iat, 0) }))
	p, err := v.Verify(t.Context(), token)
	if p != nil || !errors.Is(err, identity.IdPUnavailable) {
		t.Fatalf("Verify = %v, %v; want idp_unavailable", p, err)
	}
}

// TestKeyCache: keys are fetched once and reused; an unknown kid refetches them at most once
// per RefetchInterval; keys older than KeyMaxAge are used only after a successful refetch, so
// that an issuer gone down fails closed.
func TestKeyCache(t *testing.T) {
	op := startOP(t)
	token := op.ClientCredentials(t, "agent", "agent-secret")
	_, claims, raw := decode(t, token)
	jwks := strings.TrimPrefix(op.Metadata.JWKSURI, op.Issuer)
	attacker, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	unknown := signRS256(t, attacker, "never-published", raw)

	c := &clock{t: time.Unix(claims.Iat, 0)}
	var n counter
	v := verifier(t, identity.Issuer{Issuer: op.Issuer, Audience: resource},
		identity.WithClock(c.now), identity.WithHTTPClient(&http.Client{Transport: &n}))
	ctx := t.Context()
	verify := func(token string, want identity.Reason, fetches int) {
		t.Helper()
		_, err := v.Verify(ctx, token)
		if identity.ReasonOf(err) != want || (want == "") != (err == nil) {
			t.Fatalf("Verify: %v, want %q", err, want)
		}
		if got := n.count(jwks); got != fetches {
			t.Fatalf("%d key set fetches, want %d", got, fetches)
		}
	}
	verify(token, "", 1)
	verify(token, "", 1)
	verify(unknown, identity.UnknownKey, 1) // the keys were fetched within RefetchInterval
	c.add(identity.RefetchInterval)
	verify(unknown, identity.UnknownKey, 2)
	verify(unknown, identity.UnknownKey, 2)
	verify(token, "", 2)
	if got := n.count("/.well-known/openid-configuration"); got != 1 {
		t.Errorf("%d discovery fetches, want 1", got)
	}

	// Keys past KeyMaxAge are refetched; the token expired by then, which is checked after.
	c.add(identity.KeyMaxAge)
	verify(token, identity.TokenExpired, 3)
	op.Stop()
	c.add(identity.KeyMaxAge)
	verify(token, identity.IdPUnavailable, 4)
	verify(token, identity.IdPUnavailable, 4) // a failed fetch is not retried at once either
	c.add(identity.RefetchInterval)
	verify(token, identity.IdPUnavailable, 5)
}

// TestConcurrentVerify runs verifications in parallel for the race detector.
func TestConcurrentVerify(t *testing.T) {
	op := startOP(t)
	token := op.ClientCredentials(t, "agent", "agent-secret")
	_, claims, _ := decode(t, token)
	v := verifier(t, identity.Issuer{Issuer: op.Issuer, Audience: resource},
		identity.WithClock(func() time.Time { return time.Unix(claims.Iat, 0) }))
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 8 {
		wg.Go(func() {
			if _, err := v.Verify(context.Background(), token); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of 8 concurrent verifications failed", failed.Load())
	}
}

// selfIssuer serves an issuer of the test's own: discovery and one RS256 key, with which sign
// signs any claims, so that a token can say what no provider would issue (a long life, no iat).
func selfIssuer(t *testing.T) (issuer string, sign func(claims map[string]any) string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": srv.URL, "jwks_uri": srv.URL + "/keys"})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	return srv.URL, func(claims map[string]any) string {
		claims["iss"], claims["aud"], claims["sub"] = srv.URL, resource, "u1"
		return signRS256(t, key, "k1", mustJSON(t, claims))
	}
}

// TestTokenLifetime: a token that lives longer than max_token_lifetime is refused, reckoned
// from iat to exp, or, without iat, from now to exp allowing the skew.
func TestTokenLifetime(t *testing.T) {
	issuer, sign := selfIssuer(t)
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	day, skew := identity.DefaultMaxTokenLifetime, identity.DefaultMaxSkew
	for _, tc := range []struct {
		name   string
		max    time.Duration // max_token_lifetime; the default if zero
		claims map[string]any
		want   identity.Reason
	}{
		{"an hour", 0, map[string]any{"iat": at(-time.Hour), "exp": at(time.Hour)}, ""},
		{"a day to the second", 0, map[string]any{"iat": at(-time.Hour), "exp": at(day - time.Hour)}, ""},
		{"a day and a second", 0, map[string]any{"iat": at(-time.Hour), "exp": at(day - time.Hour + time.Second)}, identity.LifetimeTooLong},
		{"a year", 0, map[string]any{"iat": at(-time.Hour), "exp": at(365 * day)}, identity.LifetimeTooLong},
		{"within a configured hour", time.Hour, map[string]any{"iat": at(-10 * time.Minute), "exp": at(50 * time.Minute)}, ""},
		{"beyond a configured hour", time.Hour, map[string]any{"iat": at(-10 * time.Minute), "exp": at(51 * time.Minute)}, identity.LifetimeTooLong},
		{"no iat, a day left", 0, map[string]any{"exp": at(day)}, ""},
		{"no iat, a day and the skew left", 0, map[string]any{"exp": at(day + skew)}, ""},
		{"no iat, more left", 0, map[string]any{"exp": at(day + skew + time.Second)}, identity.LifetimeTooLong},
		{"no iat, beyond a configured hour", time.Hour, map[string]any{"exp": at(2 * time.Hour)}, identity.LifetimeTooLong},
		// Expiry is checked before the lifetime: an expired token is expired, however long it lived.
		{"expired after a year", 0, map[string]any{"iat": at(-366 * day), "exp": at(-day)}, identity.TokenExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := verifier(t, identity.Issuer{Issuer: issuer, Audience: resource, MaxTokenLifetime: confx.Duration(tc.max)},
				identity.WithClock(func() time.Time { return now }))
			p, err := v.Verify(t.Context(), sign(tc.claims))
			if tc.want == "" {
				if err != nil || p.ID != issuer+"#u1" {
					t.Fatalf("Verify = %v, %v", p, err)
				}
				return
			}
			if p != nil || identity.ReasonOf(err) != tc.want {
				t.Fatalf("Verify = %v, %v; want %s", p, err, tc.want)
			}
		})
	}
}
