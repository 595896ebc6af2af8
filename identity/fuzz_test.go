package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// offline is a transport for verifiers that must not reach anything.
type offline struct{}

func (offline) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("offline")
}

// FuzzVerify feeds the token-parsing path arbitrary tokens, next to one genuine token: none
// may panic, every refusal must be an *Error with a reason, and what verifies must be the
// genuine token's claims.
func FuzzVerify(f *testing.F) {
	const iss, aud = "https://idp.test", "https://gateway.test/mcp"
	now := time.Unix(1_800_000_000, 0)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	jws, err := signer.Sign([]byte(`{"iss":"` + iss + `","aud":"` + aud + `","sub":"alice","exp":1800000300,"iat":1800000000,"scope":"a b"}`))
	if err != nil {
		f.Fatal(err)
	}
	genuine, err := jws.CompactSerialize()
	if err != nil {
		f.Fatal(err)
	}

	v, err := NewVerifier(Config{Issuers: []Issuer{{Issuer: iss, Audience: aud}}},
		WithClock(func() time.Time { return now }), WithHTTPClient(&http.Client{Transport: offline{}}))
	if err != nil {
		f.Fatal(err)
	}
	ks := v.issuers[iss].keys
	ks.keys = []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}
	ks.fetched = now
	ks.tried = now // no refetch for unknown kids: the fuzzer is offline

	parts := strings.Split(genuine, ".")
	for _, seed := range []string{
		genuine, "", ".", "..", "...", "a.b.c", parts[0] + "." + parts[1] + ".",
		parts[0] + ".e30." + parts[2], "eyJhbGciOiJub25lIn0." + parts[1] + ".",
		"eyJhbGciOiJIUzI1NiJ9." + parts[1] + "." + parts[2], "eyJ9.eyJ9.eyJ9", "bnVsbA.bnVsbA.",
		genuine + ".x.y", strings.Repeat("A", 1000),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		p, err := v.Verify(context.Background(), token)
		if err != nil {
			if p != nil || ReasonOf(err) == "" {
				t.Fatalf("Verify(%q) = %v, %v: a refusal must be an *Error and nothing else", token, p, err)
			}
			return
		}
		if p.ID != iss+"#alice" || strings.Join(p.Scopes, " ") != "a b" || !p.Expiry.Equal(time.Unix(1800000300, 0)) {
			t.Fatalf("Verify(%q) verified as %+v", token, *p)
		}
	})
}
