package verdict

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/keys"
)

var b64 = base64.RawURLEncoding

const (
	issuerA  = "verdictd-a"
	issuerB  = "verdictd-b"
	audience = "executor-bank"
)

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// fixture is one valid verdict and everything needed to verify or forge variants of it.
type fixture struct {
	t        *testing.T
	now      time.Time
	a, b, ec *keys.Signer // issuer A (EdDSA), issuer B (EdDSA), issuer A's ES256 key
	claims   Claims
	token    string
	tools    map[string]string // "srv/tool" -> current digest
	want     Expectation
}

func newFixture(t testing.TB) *fixture {
	tt, _ := t.(*testing.T)
	f := &fixture{t: tt, now: time.Unix(1_900_000_000, 0)}
	var err error
	if f.a, err = keys.Generate(keys.EdDSA); err != nil {
		t.Fatal(err)
	}
	if f.b, err = keys.Generate(keys.EdDSA); err != nil {
		t.Fatal(err)
	}
	if f.ec, err = keys.Generate(keys.ES256); err != nil {
		t.Fatal(err)
	}
	setA, _ := keys.NewSet(f.a.Public(), f.ec.Public())
	setB, _ := keys.NewSet(f.b.Public())
	f.tools = map[string]string{
		"bank/transfer": digestOf("transfer v1"),
		"bank/refund":   digestOf("refund v1"),
	}
	id, err := NewID()
	if err != nil {
		t.Fatal(err)
	}
	src := "instruction"
	f.claims = Claims{
		Issuer: issuerA, Subject: "u_01", Audience: []string{"executor-other", audience},
		IssuedAt: f.now.Unix(), NotBefore: f.now.Unix(), Expiry: f.now.Unix() + 60,
		ID: id, Server: "bank", Tool: "transfer", ToolDigest: f.tools["bank/transfer"],
		Policy: "2026-11-30.1", Arguments: digestOf(`{"amount":500000}`),
		Slots:     []Slot{{ID: "amount", Status: "known", Source: &src}, {ID: "memo", Status: "null", Source: nil}},
		ActionKey: "u_01:send money:bank/transfer", Phase: "at_trigger", Record: "rec_01",
	}
	f.want = Expectation{
		Issuers:  []TrustedIssuer{{ID: issuerA, Keys: setA}, {ID: issuerB, Keys: setB}},
		Audience: audience,
		Now:      func() time.Time { return f.now },
		Skew:     5 * time.Second,
		MaxTTL:   2 * time.Minute,
		ToolDigest: func(srv, tool string) (string, bool) {
			d, ok := f.tools[srv+"/"+tool]
			return d, ok
		},
		ArgumentsDigest: digestOf(`{"amount":500000}`),
	}
	if f.token, err = Sign(f.a, f.claims); err != nil {
		t.Fatal(err)
	}
	return f
}

// claimsMap returns the valid claims as a generic map, for tampering.
func (f *fixture) claimsMap() map[string]any {
	b, _ := json.Marshal(f.claims)
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		panic(err)
	}
	return m
}

func (f *fixture) header(s *keys.Signer) map[string]any {
	return map[string]any{"alg": string(s.Algorithm()), "kid": s.KeyID(), "typ": TypeVerdict}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// forge builds a compact JWS from a raw header and payload, signed with key under alg exactly as
// a real signer would (raw ed25519, ECDSA R||S, or HMAC with key bytes).
func forge(key any, header, payload string) string {
	input := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(payload))
	var sig []byte
	switch k := key.(type) {
	case nil:
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, []byte(input))
	case *ecdsa.PrivateKey:
		h := sha256.Sum256([]byte(input))
		r, s, err := ecdsa.Sign(rand.Reader, k, h[:])
		if err != nil {
			panic(err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	case []byte:
		m := hmac.New(sha256.New, k)
		m.Write([]byte(input))
		sig = m.Sum(nil)
	default:
		panic("forge: unsupported key")
	}
	return input + "." + b64.EncodeToString(sig)
}

// privateKey extracts a signer's private key for forging, through its private JWK.
func privateKey(t testing.TB, s *keys.Signer) crypto.Signer {
	data, err := s.MarshalPrivateJWK()
	if err != nil {
		t.Fatal(err)
	}
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return jwk.Key.(crypto.Signer)
}

// resign signs an arbitrary header and claims map with s, as the rightful key would.
func (f *fixture) resign(s *keys.Signer, header map[string]any, claims any) string {
	payload, ok := claims.(string)
	if !ok {
		payload = mustJSON(claims)
	}
	return forge(privateKey(f.t, s), mustJSON(header), payload)
}

// parts splits a compact token.
func parts(tok string) (h, p, s string) {
	x := strings.Split(tok, ".")
	return x[0], x[1], x[2]
}

// The members of the claims and of a receipt, each required.
var (
	claimMembers   = []string{"iss", "sub", "aud", "iat", "nbf", "exp", "jti", "srv", "tool", "tsd", "pol", "args", "slots", "akey", "phase", "rec"}
	receiptMembers = []string{"iss", "jti", "akey", "args", "decision", "iat"}
)
