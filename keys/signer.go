package keys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	jose "github.com/go-jose/go-jose/v4"
)

// A Signer holds a private signing key. Its String, GoString, Format and LogValue methods print
// only the kid and the algorithm, so a Signer that reaches a log line or an error message never
// leaks the key. A Signer is safe for concurrent use.
type Signer struct {
	pub  PublicKey
	priv crypto.Signer // ed25519.PrivateKey or *ecdsa.PrivateKey on P-256
	// josers caches one *typSigner per typ (go-jose signers are safe for concurrent use);
	// a pointer, so the value-receiver printing methods copy no lock.
	josers *sync.Map
}

// A typSigner signs with one typ: the go-jose signer and the encoded protected header it writes.
type typSigner struct {
	jose jose.Signer
	// header is the first part of every token the signer makes: the base64url of the protected
	// header go-jose serialized and signed. It depends only on alg, kid and typ (go-jose writes
	// the members sorted), so it is taken once from a probe signature rather than re-encoded
	// from go-jose's header map for each token.
	header string
}

// Generate creates a new key for alg (EdDSA or ES256) from crypto/rand.
func Generate(alg jose.SignatureAlgorithm) (*Signer, error) {
	var priv crypto.Signer
	switch alg {
	case EdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("keys: generate Ed25519 key: %w", err)
		}
		priv = k
	case ES256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("keys: generate P-256 key: %w", err)
		}
		priv = k
	default:
		return nil, fmt.Errorf("keys: unsupported algorithm %q (want EdDSA or ES256)", alg)
	}
	return NewSigner(priv)
}

// NewSigner wraps an ed25519.PrivateKey or a P-256 *ecdsa.PrivateKey.
func NewSigner(priv crypto.Signer) (*Signer, error) {
	if _, err := algorithmOf(priv); err != nil {
		return nil, err
	}
	pub, err := NewPublicKey(priv.Public())
	if err != nil {
		return nil, err
	}
	return &Signer{pub: pub, priv: priv, josers: new(sync.Map)}, nil
}

// parseSigner parses a private JWK; subject names the data in an error ("this file"). The key
// must be an Ed25519 or P-256 private key; a kid, if present, must be the key's thumbprint; an
// alg, if present, must match the key type. Public keys (the jwks.json keygen writes beside the
// private key, or one public JWK) are an error matching ErrPublicKey. No error quotes the data.
func parseSigner(data []byte, subject string) (*Signer, error) {
	var set struct {
		Keys []struct {
			D json.RawMessage `json:"d"`
		} `json:"keys"`
	}
	if json.Unmarshal(data, &set) == nil && set.Keys != nil {
		// A set is never the signing key. Whether its keys are public decides what the operator
		// is told, and whether a file others can read is the wrong file or a leaked secret.
		for _, k := range set.Keys {
			if k.D != nil {
				return nil, fmt.Errorf("%s is a key set holding a private key, not one private key: give the %s that keygen writes",
					subject, PrivateKeyFile)
			}
		}
		return nil, fmt.Errorf("%s %w (a JWKS), not a private key: give the %s that keygen writes beside %s",
			subject, ErrPublicKey, PrivateKeyFile, JWKSFile)
	}
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(data); err != nil {
		// The decoder's message may quote input: keep it out of the error.
		return nil, errors.New("not a valid JWK")
	}
	if !jwk.Valid() {
		return nil, errors.New("not a private key")
	}
	if jwk.IsPublic() {
		return nil, fmt.Errorf("%s %w (a public JWK), not a private key: give the %s that keygen writes beside %s",
			subject, ErrPublicKey, PrivateKeyFile, JWKSFile)
	}
	priv, ok := jwk.Key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", jwk.Key)
	}
	s, err := NewSigner(priv)
	if err != nil {
		return nil, err
	}
	if jwk.KeyID == "" {
		jwk.KeyID = s.pub.kid
	}
	if err := checkJWKMembers(jwk, s.pub.kid, s.pub.alg); err != nil {
		return nil, err
	}
	return s, nil
}

// LoadSigner reads a private JWK file written by [Keygen] or [Signer.WritePrivateJWK]. A file
// others could read or write is refused with a *PermissionError (see [CheckPrivate]); a file
// that is not there is an error matching fs.ErrNotExist that says where a relative path led
// (callers add the keygen command that makes it: [KeygenHint]).
func LoadSigner(path string) (*Signer, error) {
	data, err := ReadPrivate(path, maxJWKBytes)
	if pe, ok := errors.AsType[*PermissionError](err); ok {
		// A public key set is readable by all by design: one given here is the wrong file,
		// and "chmod 600" the wrong advice. Its content, public, may be read to say so.
		if data, rerr := readFile(path, maxJWKBytes, false); rerr == nil {
			if _, perr := parseSigner(data, "this file"); errors.Is(perr, ErrPublicKey) {
				return nil, fmt.Errorf("keys: load signing key %s: %w", path, perr)
			}
		}
		return nil, pe
	}
	if err != nil {
		return nil, fmt.Errorf("keys: load signing key: %w", err)
	}
	s, err := parseSigner(data, "this file")
	if err != nil {
		return nil, fmt.Errorf("keys: load signing key %s: %w", path, err)
	}
	return s, nil
}

// maxJWKBytes bounds a private JWK file; a P-256 private JWK is about 250 bytes.
const maxJWKBytes = 16 << 10

// KeyID returns the kid of the key: its RFC 7638 thumbprint.
func (s *Signer) KeyID() string { return s.pub.kid }

// Algorithm returns the algorithm the key signs with.
func (s *Signer) Algorithm() jose.SignatureAlgorithm { return s.pub.alg }

// Public returns the public half of the key.
func (s *Signer) Public() PublicKey { return s.pub }

// SignCompact signs payload as a JWS in compact serialization whose protected header is exactly
// {"alg", "kid", "typ"}: no jwk, jku, x5u, crit or zip, so a verifier never has a reason to look
// anywhere but its own key set.
func (s *Signer) SignCompact(payload []byte, typ string) (string, error) {
	if typ == "" {
		return "", errors.New("keys: sign: empty typ")
	}
	ts, err := s.typSigner(typ)
	if err != nil {
		return "", fmt.Errorf("keys: sign with %s: %w", s, err)
	}
	obj, err := ts.jose.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("keys: sign with %s: %w", s, err)
	}
	if len(obj.Signatures) != 1 {
		return "", fmt.Errorf("keys: sign with %s: %d signatures, want 1", s, len(obj.Signatures))
	}
	return joinCompact(ts.header, payload, obj.Signatures[0].Signature), nil
}

// joinCompact writes header.base64url(payload).base64url(sig) in one allocation, which is what
// go-jose's CompactSerialize writes once it has encoded the header again.
func joinCompact(header string, payload, sig []byte) string {
	enc := base64.RawURLEncoding
	var b strings.Builder
	b.Grow(len(header) + 2 + enc.EncodedLen(len(payload)) + enc.EncodedLen(len(sig)))
	b.WriteString(header)
	b.WriteByte('.')
	appendBase64(&b, payload)
	b.WriteByte('.')
	appendBase64(&b, sig)
	return b.String()
}

// appendBase64 writes the base64url of p to b through a stack buffer, so that nothing but b's
// own buffer is allocated.
func appendBase64(b *strings.Builder, p []byte) {
	var buf [192]byte // encodes 144 input bytes at a time
	const chunk = len(buf) / 4 * 3
	for len(p) > 0 {
		n := min(len(p), chunk)
		m := base64.RawURLEncoding.EncodedLen(n)
		base64.RawURLEncoding.Encode(buf[:m], p[:n])
		b.Write(buf[:m])
		p = p[n:]
	}
}

func (s *Signer) typSigner(typ string) (*typSigner, error) {
	if ts, ok := s.josers.Load(typ); ok {
		return ts.(*typSigner), nil
	}
	js, err := jose.NewSigner(
		jose.SigningKey{Algorithm: s.pub.alg, Key: jose.JSONWebKey{Key: s.priv, KeyID: s.pub.kid}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)),
	)
	if err != nil {
		return nil, err
	}
	probe, err := js.Sign([]byte("{}"))
	if err != nil {
		return nil, err
	}
	tok, err := probe.CompactSerialize()
	if err != nil {
		return nil, err
	}
	header, _, _ := strings.Cut(tok, ".")
	actual, _ := s.josers.LoadOrStore(typ, &typSigner{jose: js, header: header})
	return actual.(*typSigner), nil
}

// MarshalPrivateJWK encodes the private key as a JWK with kid, alg and use "sig". The result is
// secret.
func (s *Signer) MarshalPrivateJWK() ([]byte, error) {
	jwk := jose.JSONWebKey{Key: s.priv, KeyID: s.pub.kid, Algorithm: string(s.pub.alg), Use: "sig"}
	return jwk.MarshalJSON()
}

// String returns "kid=<kid> alg=<alg>".
func (s Signer) String() string {
	return "kid=" + s.pub.kid + " alg=" + string(s.pub.alg)
}

// GoString keeps %#v from printing the private key.
func (s Signer) GoString() string { return "keys.Signer{" + s.String() + "}" }

// Format prints [Signer.String] for every verb: without it, verbs like %d or %x would print the
// struct's fields, the private key among them. The printing methods have value receivers so that
// a dereferenced Signer is covered too.
func (s Signer) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		io.WriteString(f, s.GoString())
		return
	}
	io.WriteString(f, s.String())
}

// LogValue prints only the kid and the algorithm in structured logs.
func (s Signer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kid", s.pub.kid), slog.String("alg", string(s.pub.alg)))
}
