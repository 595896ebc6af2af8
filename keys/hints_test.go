package keys

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/opfile"
)

// A key file given for the other kind of key says which file keygen writes for that place, and
// never quotes the private key it found.
func TestKeyFileOfTheWrongKind(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Generate(EdDSA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Keygen(dir, EdDSA); err != nil {
		t.Fatal(err)
	}
	priv, pub := filepath.Join(dir, PrivateKeyFile), filepath.Join(dir, JWKSFile)
	privJWK, _ := s.MarshalPrivateJWK()
	pubJWK := `{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `"}`
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	setWithPrivate := write("set-private.json", `{"keys":[`+string(privJWK)+`]}`, 0o644)
	singlePublic := write("one-public.jwk", pubJWK, 0o600)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(privJWK)
	}))
	defer srv.Close()

	secret, _ := os.ReadFile(priv)
	tests := []struct {
		name   string
		load   func() error
		is     error
		want   []string
		secret []byte // key material the message must not hold
	}{
		{"signing key as the verifying keys", func() error { _, err := LoadJWKS(ctx, priv, FetchOptions{}); return err },
			ErrPrivateKey, []string{priv, "this file holds a private key, not a public key set", "give the public JWKS that keygen writes as jwks.json beside signing.jwk"}, secret},
		{"a set holding a private key", func() error { _, err := LoadJWKS(ctx, setWithPrivate, FetchOptions{}); return err },
			ErrPrivateKey, []string{"key 0: this file holds a private key", "a key set holds public keys only", "jwks.json"}, privJWK},
		{"a key server answering with a private key", func() error { _, err := LoadJWKS(ctx, srv.URL+"/jwks.json", FetchOptions{}); return err },
			ErrPrivateKey, []string{srv.URL, "its answer holds a private key", "jwks.json"}, privJWK},
		{"the public set as the signing key", func() error { _, err := LoadSigner(pub); return err },
			ErrPublicKey, []string{"load signing key " + pub, "this file holds public keys only (a JWKS), not a private key", "give the signing.jwk that keygen writes beside jwks.json"}, nil},
		{"one public JWK as the signing key", func() error { _, err := LoadSigner(singlePublic); return err },
			ErrPublicKey, []string{"this file holds public keys only (a public JWK), not a private key", "signing.jwk"}, nil},
	}
	for _, tt := range tests {
		err := tt.load()
		if !errors.Is(err, tt.is) {
			t.Errorf("%s: err = %v, want one matching %v", tt.name, err, tt.is)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tt.name, err, w)
			}
		}
		if d := privateD(t, tt.secret); d != "" && strings.Contains(err.Error(), d) {
			t.Errorf("%s: error quotes the private key: %v", tt.name, err)
		}
	}
}

// A key set holding a private key given as the signing key is not called public: at 0600 it is
// the wrong file, and readable by others it is refused for its mode, as any private key is.
func TestPrivateSetAsSigningKey(t *testing.T) {
	s, err := Generate(EdDSA)
	if err != nil {
		t.Fatal(err)
	}
	privJWK, _ := s.MarshalPrivateJWK()
	for _, mode := range []os.FileMode{0o600, 0o644} {
		p := filepath.Join(t.TempDir(), "set.json")
		if err := os.WriteFile(p, []byte(`{"keys":[`+string(privJWK)+`]}`), mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadSigner(p)
		switch _, perm := errors.AsType[*PermissionError](err); {
		case err == nil || errors.Is(err, ErrPublicKey):
			t.Errorf("mode %o: err = %v, want a refusal that does not call the keys public", mode, err)
		case mode == 0o644 && !perm:
			t.Errorf("mode %o: err = %v, want a *PermissionError", mode, err)
		case mode == 0o600 && !strings.Contains(err.Error(), "a key set holding a private key, not one private key"):
			t.Errorf("mode %o: err = %v", mode, err)
		}
		if err != nil && strings.Contains(err.Error(), privateD(t, privJWK)) {
			t.Errorf("mode %o: error quotes the private key: %v", mode, err)
		}
	}
}

// privateD is the "d" member of a private JWK, "" for nil.
func privateD(t *testing.T, jwk []byte) string {
	t.Helper()
	if jwk == nil {
		return ""
	}
	_, after, ok := strings.Cut(string(jwk), `"d":"`)
	d, _, _ := strings.Cut(after, `"`)
	if !ok || d == "" {
		t.Fatalf("no d member in %d bytes", len(jwk))
	}
	return d
}

// A key file that is not there says where a relative path led and which keygen command makes
// it, and still matches fs.ErrNotExist.
func TestMissingKeyFileNamesKeygen(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	tests := []struct {
		name, path string
		load       func(string) error
		hint       string
		want       string
	}{
		{"signing key", "keys/signing.jwk", func(p string) error { _, err := LoadSigner(p); return err },
			KeygenHint("verdictd", "keys/signing.jwk"),
			"keys: load signing key: open keys/signing.jwk (resolved against " + dir + " as " + filepath.Join(dir, "keys/signing.jwk") +
				`): no such file or directory; make it with "verdictd keygen --out keys" (it writes keys/signing.jwk and, beside it, the public jwks.json)`},
		{"receipt key of another name", "/etc/verdict/receipt.jwk", func(p string) error { _, err := LoadSigner(p); return err },
			KeygenHint("executor", "/etc/verdict/receipt.jwk"),
			`keys: load signing key: open /etc/verdict/receipt.jwk: no such file or directory; make one with "executor keygen --out /etc/verdict" ` +
				"and point this key at /etc/verdict/signing.jwk, the name keygen gives it"},
		{"verifying keys", "verdictd/jwks.json", func(p string) error { _, err := LoadJWKS(context.Background(), p, FetchOptions{}); return err },
			JWKSHint("verdictd"),
			"keys: read JWKS: open verdictd/jwks.json (resolved against " + dir + " as " + filepath.Join(dir, "verdictd/jwks.json") +
				`): no such file or directory; it is the jwks.json that "verdictd keygen --out DIR" writes beside signing.jwk; copy it here, or give its URL`},
	}
	for _, tt := range tests {
		err := opfile.IfMissing(tt.load(tt.path), tt.hint)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: error = %v\nwant %s", tt.name, err, tt.want)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: errors.Is(err, fs.ErrNotExist) is false", tt.name)
		}
	}
}
