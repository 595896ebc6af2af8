package keys

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// SignCompact writes the token itself from the header go-jose signed: with Ed25519, whose
// signatures are deterministic, the token must be byte for byte what go-jose's own
// CompactSerialize writes, whatever the payload's length.
func TestSignCompactMatchesGoJose(t *testing.T) {
	s, err := Generate(EdDSA)
	if err != nil {
		t.Fatal(err)
	}
	payloads := []string{"", "{}", `{"a":1}`, strings.Repeat("x", 143), strings.Repeat("y", 144),
		strings.Repeat("z", 145), strings.Repeat("w", 1000), "\x00\xff<>&\u2028"}
	for _, typ := range []string{"verdict+jwt", "execution-receipt+jwt"} {
		js, err := jose.NewSigner(
			jose.SigningKey{Algorithm: EdDSA, Key: jose.JSONWebKey{Key: s.priv, KeyID: s.KeyID()}},
			(&jose.SignerOptions{}).WithType(jose.ContentType(typ)),
		)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range payloads {
			got, err := s.SignCompact([]byte(p), typ)
			if err != nil {
				t.Fatalf("%s %q: %v", typ, p, err)
			}
			obj, err := js.Sign([]byte(p))
			if err != nil {
				t.Fatal(err)
			}
			want, err := obj.CompactSerialize()
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s, payload of %d bytes:\n got %s\nwant %s", typ, len(p), got, want)
			}
		}
	}
}

// An ES256 token made from the cached header verifies and carries exactly that header.
func TestSignCompactES256Verifies(t *testing.T) {
	s, err := Generate(ES256)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 2, 3, 144, 500} {
		p := []byte(strings.Repeat("p", n))
		tok, err := s.SignCompact(p, "verdict+jwt")
		if err != nil {
			t.Fatal(err)
		}
		obj, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{ES256})
		if err != nil {
			t.Fatal(err)
		}
		got, err := obj.Verify(s.Public().Key())
		if err != nil || string(got) != string(p) {
			t.Errorf("%d bytes: %q, %v", n, got, err)
		}
		if h := obj.Signatures[0].Protected; h.KeyID != s.KeyID() || h.Algorithm != string(ES256) ||
			h.ExtraHeaders[jose.HeaderType] != "verdict+jwt" {
			t.Errorf("%d bytes: header %+v", n, h)
		}
	}
}

var benchPayload = []byte(`{"iss":"executor-bank","jti":"q1w2e3r4t5y6u7i8o9p0aa","akey":"u_01:send money:bank/transfer",` +
	`"args":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","decision":"executed","iat":1900000000}`)

// BenchmarkSignCompactEdDSA and BenchmarkRawEd25519SignInput sign the same bytes: the
// difference is what go-jose and SignCompact add around the signature.
func BenchmarkSignCompactEdDSA(b *testing.B) {
	s, err := Generate(EdDSA)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.SignCompact(benchPayload, "execution-receipt+jwt"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawEd25519SignInput(b *testing.B) {
	s, err := Generate(EdDSA)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := s.SignCompact(benchPayload, "execution-receipt+jwt")
	if err != nil {
		b.Fatal(err)
	}
	input := []byte(tok[:strings.LastIndex(tok, ".")])
	priv := s.priv.(ed25519.PrivateKey)
	b.ReportAllocs()
	for b.Loop() {
		ed25519.Sign(priv, input)
	}
}

// BenchmarkSignCompactOverRaw interleaves SignCompact with a raw ed25519.Sign of the same signing
// input and reports the ratio of their times, steadier than two benchmarks on a shared machine.
func BenchmarkSignCompactOverRaw(b *testing.B) {
	s, err := Generate(EdDSA)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := s.SignCompact(benchPayload, "execution-receipt+jwt")
	if err != nil {
		b.Fatal(err)
	}
	input := []byte(tok[:strings.LastIndex(tok, ".")])
	priv := s.priv.(ed25519.PrivateKey)
	var full, raw time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := s.SignCompact(benchPayload, "execution-receipt+jwt"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		ed25519.Sign(priv, input)
		raw += time.Since(t1)
		full += t1.Sub(t0)
	}
	b.ReportMetric(float64(full)/float64(raw), "x-raw")
}
