package keys

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// RFC 8037 appendix A: an Ed25519 key and its RFC 7638 thumbprint.
const (
	rfc8037D          = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
	rfc8037X          = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
	rfc8037Thumbprint = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
)

func TestKeyIDIsRFC7638Thumbprint(t *testing.T) {
	x, _ := base64.RawURLEncoding.DecodeString(rfc8037X)
	k, err := NewPublicKey(ed25519.PublicKey(x))
	if err != nil {
		t.Fatal(err)
	}
	if k.KeyID() != rfc8037Thumbprint || k.Algorithm() != EdDSA {
		t.Fatalf("kid %q alg %s, want %q EdDSA", k.KeyID(), k.Algorithm(), rfc8037Thumbprint)
	}
	s, err := parseSigner([]byte(`{"kty":"OKP","crv":"Ed25519","d":"`+rfc8037D+`","x":"`+rfc8037X+`"}`), "the data")
	if err != nil {
		t.Fatal(err)
	}
	if s.KeyID() != rfc8037Thumbprint {
		t.Fatalf("signer kid %q", s.KeyID())
	}
}

func TestGenerate(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{EdDSA, ES256} {
		s, err := Generate(alg)
		if err != nil {
			t.Fatal(err)
		}
		if s.Algorithm() != alg || s.Public().Algorithm() != alg {
			t.Errorf("%s: got alg %s", alg, s.Algorithm())
		}
		want, err := thumbprint(s.Public().Key())
		if err != nil || s.KeyID() != want || len(s.KeyID()) != 43 {
			t.Errorf("%s: kid %q, thumbprint %q (%v)", alg, s.KeyID(), want, err)
		}
		// The private JWK parses back to the same key.
		data, err := s.MarshalPrivateJWK()
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseSigner(data, "the data")
		if err != nil || back.KeyID() != s.KeyID() || back.Algorithm() != alg {
			t.Errorf("%s: round trip: %v %v", alg, back, err)
		}
	}
	for _, alg := range []jose.SignatureAlgorithm{"none", jose.HS256, jose.RS256, jose.ES384, ""} {
		if _, err := Generate(alg); err == nil {
			t.Errorf("Generate(%q) succeeded", alg)
		}
	}
}

func TestSignCompactHeader(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{EdDSA, ES256} {
		s, _ := Generate(alg)
		tok, err := s.SignCompact([]byte(`{"a":1}`), "verdict+jwt")
		if err != nil {
			t.Fatal(err)
		}
		h, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
		var got map[string]any
		if err := json.Unmarshal(h, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"alg": string(alg), "kid": s.KeyID(), "typ": "verdict+jwt"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s header = %v, want exactly %v", alg, got, want)
		}
		obj, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{alg})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := obj.Verify(s.Public().Key()); err != nil {
			t.Errorf("%s: does not verify: %v", alg, err)
		}
	}
}

func TestSignerNeverPrintsPrivateKey(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{EdDSA, ES256} {
		s, _ := Generate(alg)
		jwk, _ := s.MarshalPrivateJWK()
		var raw struct{ D string }
		json.Unmarshal(jwk, &raw)
		dBytes, _ := base64.RawURLEncoding.DecodeString(raw.D)

		var outs []string
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
			outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, *s))
		}
		outs = append(outs, fmt.Sprint(s), fmt.Sprintf("%v", []any{s}), fmt.Sprintf("%v", struct{ S *Signer }{s}))
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("key", "signer", s, "value", *s)
		slog.New(slog.NewTextHandler(&buf, nil)).Info("key", "signer", s)
		outs = append(outs, buf.String())
		for _, out := range outs {
			for _, secret := range []string{raw.D, fmt.Sprintf("%x", dBytes), fmt.Sprintf("%d", dBytes[:4]), fmt.Sprint(dBytes[:4])} {
				if strings.Contains(out, secret) {
					t.Fatalf("%s: output %q leaks the private key", alg, out)
				}
			}
		}
		if got := fmt.Sprintf("%d", s); got != "kid="+s.KeyID()+" alg="+string(alg) {
			t.Errorf("%%d printed %q", got)
		}
		if !strings.Contains(buf.String(), s.KeyID()) {
			t.Errorf("log lacks the kid: %s", buf.String())
		}
	}
}

func TestKeygen(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{EdDSA, ES256} {
		dir := filepath.Join(t.TempDir(), "k")
		kid, err := Keygen(dir, alg)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, PrivateKeyFile))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: signing.jwk mode %v (%v), want 0600", alg, fi.Mode(), err)
		}
		s, err := LoadSigner(filepath.Join(dir, PrivateKeyFile))
		if err != nil || s.KeyID() != kid || s.Algorithm() != alg {
			t.Fatalf("%s: LoadSigner = %v, %v; want kid %s", alg, s, err, kid)
		}
		set, err := LoadJWKS(context.Background(), filepath.Join(dir, JWKSFile), FetchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if k, ok := set.Lookup(kid); !ok || set.Len() != 1 || k.Algorithm() != alg {
			t.Fatalf("%s: jwks.json does not hold exactly the new key", alg)
		}
		pub, _ := os.ReadFile(filepath.Join(dir, JWKSFile))
		if bytes.Contains(pub, []byte(`"d"`)) {
			t.Fatalf("jwks.json holds private material: %s", pub)
		}
		before, _ := os.ReadFile(filepath.Join(dir, PrivateKeyFile))
		if _, err := Keygen(dir, alg); err == nil {
			t.Fatalf("%s: second Keygen into the same directory succeeded", alg)
		}
		after, _ := os.ReadFile(filepath.Join(dir, PrivateKeyFile))
		if !bytes.Equal(before, after) {
			t.Fatal("second Keygen changed signing.jwk")
		}
		// Only jwks.json present still refuses, and writes nothing.
		os.Remove(filepath.Join(dir, PrivateKeyFile))
		if _, err := Keygen(dir, alg); err == nil {
			t.Fatal("Keygen overwrote jwks.json")
		}
		if _, err := os.Stat(filepath.Join(dir, PrivateKeyFile)); err == nil {
			t.Fatal("refused Keygen still wrote signing.jwk")
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("temporary files left behind: %v", entries)
		}
	}
	if _, err := Keygen(t.TempDir(), jose.HS256); err == nil {
		t.Fatal("Keygen HS256 succeeded")
	}
}

func TestParseSignerRejects(t *testing.T) {
	s, _ := Generate(EdDSA)
	good, _ := s.MarshalPrivateJWK()
	pubJWK, _ := json.Marshal(s.Public().jwk())
	var m map[string]any
	json.Unmarshal(good, &m)
	with := func(k string, v any) []byte {
		c := map[string]any{}
		for kk, vv := range m {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		b, _ := json.Marshal(c)
		return b
	}
	for name, data := range map[string][]byte{
		"public key":    pubJWK,
		"wrong kid":     with("kid", rfc8037Thumbprint),
		"wrong alg":     with("alg", "ES256"),
		"enc use":       with("use", "enc"),
		"not json":      []byte("{"),
		"hmac key":      []byte(`{"kty":"oct","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}`),
		"empty":         nil,
		"trailing junk": append(bytes.Clone(good), '}'),
	} {
		if _, err := parseSigner(data, "the data"); err == nil {
			t.Errorf("%s: parseSigner succeeded", name)
		} else if strings.Contains(err.Error(), m["d"].(string)) {
			t.Errorf("%s: error leaks the key: %v", name, err)
		}
	}
	if _, err := parseSigner(with("kid", nil), "the data"); err != nil {
		t.Errorf("a private JWK without kid should load (kid is derived): %v", err)
	}
}

func TestParseJWKS(t *testing.T) {
	ed, _ := Generate(EdDSA)
	ec, _ := Generate(ES256)
	jwk := func(s *Signer, edit func(map[string]any)) string {
		b, _ := json.Marshal(s.Public().jwk())
		var m map[string]any
		json.Unmarshal(b, &m)
		if edit != nil {
			edit(m)
		}
		b, _ = json.Marshal(m)
		return string(b)
	}
	priv, _ := ed.MarshalPrivateJWK()
	tests := []struct {
		name string
		data string
		ok   bool
	}{
		{"two keys", `{"keys":[` + jwk(ed, nil) + `,` + jwk(ec, nil) + `]}`, true},
		{"no alg or use", `{"keys":[` + jwk(ed, func(m map[string]any) { delete(m, "alg"); delete(m, "use") }) + `]}`, true},
		{"empty set", `{"keys":[]}`, false},
		{"no keys member", `{}`, false},
		{"not json", `{"keys":[`, false},
		{"trailing data", `{"keys":[` + jwk(ed, nil) + `]} {}`, false},
		{"private key", `{"keys":[` + string(priv) + `]}`, false},
		{"duplicate kid", `{"keys":[` + jwk(ed, nil) + `,` + jwk(ed, nil) + `]}`, false},
		{"missing kid", `{"keys":[` + jwk(ed, func(m map[string]any) { delete(m, "kid") }) + `]}`, false},
		{"kid not thumbprint", `{"keys":[` + jwk(ed, func(m map[string]any) { m["kid"] = "k1" }) + `]}`, false},
		{"kid of another key", `{"keys":[` + jwk(ed, func(m map[string]any) { m["kid"] = ec.KeyID() }) + `]}`, false},
		{"alg mismatch", `{"keys":[` + jwk(ed, func(m map[string]any) { m["alg"] = "ES256" }) + `]}`, false},
		{"alg HS256", `{"keys":[` + jwk(ed, func(m map[string]any) { m["alg"] = "HS256" }) + `]}`, false},
		{"use enc", `{"keys":[` + jwk(ed, func(m map[string]any) { m["use"] = "enc" }) + `]}`, false},
		{"oct key", `{"keys":[{"kty":"oct","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}]}`, false},
		{"P-384 key", `{"keys":[{"kty":"EC","crv":"P-384","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","y":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}`, false},
		{"unknown kty", `{"keys":[{"kty":"XYZ"}]}`, false},
		{"keys not array", `{"keys":{}}`, false},
	}
	for _, tt := range tests {
		set, err := ParseJWKS([]byte(tt.data))
		if (err == nil) != tt.ok {
			t.Errorf("%s: ParseJWKS err = %v, want ok=%v", tt.name, err, tt.ok)
			continue
		}
		if err != nil && strings.Contains(err.Error(), `"d"`) {
			t.Errorf("%s: error quotes key material: %v", tt.name, err)
		}
		if tt.ok {
			// A parsed set marshals back to a set that parses to the same keys.
			out, _ := json.Marshal(set)
			again, err := ParseJWKS(out)
			if err != nil || again.Len() != set.Len() {
				t.Errorf("%s: round trip: %v", tt.name, err)
			}
		}
	}
}

func TestRing(t *testing.T) {
	ctx := context.Background()
	old, _ := Generate(EdDSA)
	next, _ := Generate(ES256)
	r, err := NewRing(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Rotate(next); err != nil {
		t.Fatal(err)
	}
	if r.Current() != next {
		t.Fatal("Rotate did not make next current")
	}
	for _, kid := range []string{old.KeyID(), next.KeyID()} {
		if _, ok := r.Key(ctx, kid); !ok {
			t.Fatalf("kid %s not listed after rotation", kid)
		}
	}
	if got := r.Set().Keys(); got[0].KeyID() != next.KeyID() {
		t.Fatal("current key is not listed first")
	}
	if err := r.Retire(next.KeyID()); err == nil {
		t.Fatal("retired the current key")
	}
	if err := r.Retire(old.KeyID()); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Key(ctx, old.KeyID()); ok {
		t.Fatal("retired key still listed")
	}
	if err := r.Retire(old.KeyID()); err == nil {
		t.Fatal("retiring twice succeeded")
	}
	// Rotating back to a previous key moves it to current without listing it twice.
	r.Rotate(old)
	r.Rotate(next)
	if r.Set().Len() != 2 {
		t.Fatalf("set has %d keys, want 2", r.Set().Len())
	}
}

func FuzzParseJWKS(f *testing.F) {
	ed, _ := Generate(EdDSA)
	ec, _ := Generate(ES256)
	set, _ := NewSet(ed.Public(), ec.Public())
	good, _ := json.Marshal(set)
	priv, _ := ed.MarshalPrivateJWK()
	f.Add(good)
	f.Add([]byte(`{"keys":[` + string(priv) + `]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","kid":"` + rfc8037Thumbprint + `"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"AAAA"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := ParseJWKS(data)
		if err != nil {
			return
		}
		if set.Len() == 0 {
			t.Fatal("parsed an empty set")
		}
		for _, k := range set.Keys() {
			want, err := thumbprint(k.Key())
			if err != nil || want != k.KeyID() {
				t.Fatalf("kid %q is not the thumbprint %q", k.KeyID(), want)
			}
			if k.Algorithm() != EdDSA && k.Algorithm() != ES256 {
				t.Fatalf("accepted algorithm %q", k.Algorithm())
			}
		}
		out, err := json.Marshal(set)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(out, []byte(`"d":`)) {
			t.Fatal("a parsed set carries private material")
		}
		if _, err := ParseJWKS(out); err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
	})
}

func TestSignConcurrently(t *testing.T) {
	s, _ := Generate(EdDSA)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			typ := []string{"verdict+jwt", "execution-receipt+jwt"}[i%2]
			for range 20 {
				tok, err := s.SignCompact([]byte(`{}`), typ)
				if err != nil {
					t.Error(err)
					return
				}
				obj, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{EdDSA})
				if err != nil || obj.Signatures[0].Header.ExtraHeaders[jose.HeaderType] != typ {
					t.Errorf("typ mixed up between concurrent signers: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
