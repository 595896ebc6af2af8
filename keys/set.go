package keys

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	jose "github.com/go-jose/go-jose/v4"
)

// The two signature algorithms a key may have. Any other algorithm is refused everywhere.
const (
	EdDSA = jose.EdDSA
	ES256 = jose.ES256
)

// A Source resolves a key id to a verification key. Implementations are safe for concurrent use.
// Key may block on I/O (a [Remote] refetches its set on an unknown kid) within ctx.
type Source interface {
	Key(ctx context.Context, kid string) (PublicKey, bool)
}

// A Cache is a Source that can also answer from the keys it already holds, without I/O. A
// verifier asks every trusted issuer's cache first, so that an issuer whose key server is slow
// never delays a token whose key another issuer already holds.
type Cache interface {
	Source
	Lookup(kid string) (PublicKey, bool)
}

// A PublicKey is a verification key with its key id and the one algorithm it verifies. The zero
// PublicKey is invalid; build one with [NewPublicKey] or get one from a [Set].
type PublicKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.PublicKey // ed25519.PublicKey or *ecdsa.PublicKey on P-256
}

// NewPublicKey wraps an ed25519.PublicKey (algorithm EdDSA) or a P-256 *ecdsa.PublicKey
// (algorithm ES256) and computes its key id.
func NewPublicKey(key crypto.PublicKey) (PublicKey, error) {
	alg, err := algorithmOf(key)
	if err != nil {
		return PublicKey{}, err
	}
	kid, err := thumbprint(key)
	if err != nil {
		return PublicKey{}, err
	}
	return PublicKey{kid: kid, alg: alg, key: key}, nil
}

// KeyID returns the key's RFC 7638 thumbprint.
func (k PublicKey) KeyID() string { return k.kid }

// Algorithm returns the only algorithm the key verifies: EdDSA for Ed25519, ES256 for P-256.
func (k PublicKey) Algorithm() jose.SignatureAlgorithm { return k.alg }

// Key returns the key itself: an ed25519.PublicKey or a *ecdsa.PublicKey.
func (k PublicKey) Key() crypto.PublicKey { return k.key }

// Equal reports whether k and o are the same key.
func (k PublicKey) Equal(o PublicKey) bool {
	return k.kid == o.kid && k.alg == o.alg && k.kid != ""
}

func (k PublicKey) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.key, KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

// algorithmOf returns the algorithm a public or private key is used with.
func algorithmOf(key any) (jose.SignatureAlgorithm, error) {
	switch k := key.(type) {
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return "", errors.New("keys: bad Ed25519 public key size")
		}
		return EdDSA, nil
	case ed25519.PrivateKey:
		if len(k) != ed25519.PrivateKeySize {
			return "", errors.New("keys: bad Ed25519 private key size")
		}
		return EdDSA, nil
	case *ecdsa.PublicKey:
		if k == nil || k.Curve != elliptic.P256() {
			return "", errors.New("keys: ECDSA key is not on P-256")
		}
		return ES256, nil
	case *ecdsa.PrivateKey:
		if k == nil || k.Curve != elliptic.P256() {
			return "", errors.New("keys: ECDSA key is not on P-256")
		}
		return ES256, nil
	default:
		return "", fmt.Errorf("keys: unsupported key type %T (want Ed25519 or P-256)", key)
	}
}

// thumbprint returns the RFC 7638 SHA-256 thumbprint of a public key, base64url-encoded.
func thumbprint(pub crypto.PublicKey) (string, error) {
	jwk := jose.JSONWebKey{Key: pub}
	sum, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("keys: thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}

// A Set is an immutable set of public keys, at most one per key id. It is safe for concurrent
// use.
type Set struct {
	keys []PublicKey // in the order given
	byID map[string]PublicKey
}

// NewSet builds a set from keys. Two keys with the same kid are an error.
func NewSet(keys ...PublicKey) (*Set, error) {
	s := &Set{keys: make([]PublicKey, 0, len(keys)), byID: make(map[string]PublicKey, len(keys))}
	for _, k := range keys {
		if k.kid == "" || k.key == nil {
			return nil, errors.New("keys: invalid public key (zero value)")
		}
		if _, dup := s.byID[k.kid]; dup {
			return nil, fmt.Errorf("keys: duplicate kid %q", k.kid)
		}
		s.byID[k.kid] = k
		s.keys = append(s.keys, k)
	}
	return s, nil
}

// Key returns the key named kid. It never blocks.
func (s *Set) Key(_ context.Context, kid string) (PublicKey, bool) {
	return s.Lookup(kid)
}

// Lookup returns the key named kid.
func (s *Set) Lookup(kid string) (PublicKey, bool) {
	if s == nil {
		return PublicKey{}, false
	}
	k, ok := s.byID[kid]
	return k, ok
}

// Keys returns the keys in the order they were given.
func (s *Set) Keys() []PublicKey {
	if s == nil {
		return nil
	}
	return slices.Clone(s.keys)
}

// Len returns the number of keys.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// MarshalJSON encodes the set as a JWKS: {"keys": [...]}, each key with kid, alg and use "sig".
func (s *Set) MarshalJSON() ([]byte, error) {
	jwks := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, s.Len())}
	if s != nil {
		for _, k := range s.keys {
			jwks.Keys = append(jwks.Keys, k.jwk())
		}
	}
	return json.Marshal(jwks)
}

// ParseJWKS parses a public JWK Set. It is strict, because a JWKS decides which tokens are
// trusted: every key must be a public Ed25519 or P-256 key; its kid must be present and equal to
// the key's RFC 7638 thumbprint; an "alg" member, if present, must be the key's algorithm; a
// "use" member, if present, must be "sig"; kids must be distinct; the set must not be empty.
// A private key anywhere in the set is an error matching ErrPrivateKey: a published private key
// is an incident, not a key to skip. So is a private JWK given instead of a set (the signing.jwk
// that keygen writes beside jwks.json). No error quotes key material.
func ParseJWKS(data []byte) (*Set, error) {
	s, err := parseJWKS(data, "the data")
	if err != nil {
		return nil, fmt.Errorf("keys: parse JWKS: %w", err)
	}
	return s, nil
}

// Errors of a key of the wrong kind where a key file was expected. Their messages say which
// file keygen writes for that place.
var (
	// ErrPrivateKey is matched by the error of a key set that holds a private key.
	ErrPrivateKey = errors.New("holds a private key")
	// ErrPublicKey is matched by the error of a private key file that holds public keys only.
	ErrPublicKey = errors.New("holds public keys only")
)

// parseJWKS is ParseJWKS; subject names the data in an error ("this file").
func parseJWKS(data []byte, subject string) (*Set, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
		// A single JWK given where the set belongs has these instead of keys.
		Kty string          `json:"kty"`
		D   json.RawMessage `json:"d"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the set")
	}
	if len(raw.Keys) == 0 && raw.Kty != "" {
		if raw.D != nil {
			return nil, fmt.Errorf("%s %w, not a public key set: give the public JWKS that keygen writes as %s beside %s",
				subject, ErrPrivateKey, JWKSFile, PrivateKeyFile)
		}
		return nil, fmt.Errorf("%s holds a single JWK, not a key set {\"keys\": [...]}: give the JWKS that keygen writes as %s", subject, JWKSFile)
	}
	if len(raw.Keys) == 0 {
		return nil, errors.New("no keys")
	}
	list := make([]PublicKey, 0, len(raw.Keys))
	for i, rk := range raw.Keys {
		var member struct {
			D json.RawMessage `json:"d"`
		}
		if json.Unmarshal(rk, &member) == nil && member.D != nil {
			return nil, fmt.Errorf("key %d: %s %w: a key set holds public keys only; give the public JWKS that keygen writes as %s "+
				"(a private key that was published is compromised: make a new one)", i, subject, ErrPrivateKey, JWKSFile)
		}
		k, err := parsePublicJWK(rk)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		list = append(list, k)
	}
	return NewSet(list...)
}

func parsePublicJWK(data []byte) (PublicKey, error) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(data); err != nil {
		return PublicKey{}, err
	}
	if !jwk.Valid() || !jwk.IsPublic() {
		return PublicKey{}, errors.New("not a valid public key (private key material present?)")
	}
	k, err := NewPublicKey(jwk.Key)
	if err != nil {
		return PublicKey{}, err
	}
	if err := checkJWKMembers(jwk, k.kid, k.alg); err != nil {
		return PublicKey{}, err
	}
	return k, nil
}

// checkJWKMembers checks the kid, alg and use members of a parsed JWK against the key itself.
func checkJWKMembers(jwk jose.JSONWebKey, kid string, alg jose.SignatureAlgorithm) error {
	if jwk.KeyID == "" {
		return errors.New("missing kid")
	}
	if jwk.KeyID != kid {
		return fmt.Errorf("kid %q is not the key's RFC 7638 thumbprint %q", jwk.KeyID, kid)
	}
	if jwk.Algorithm != "" && jwk.Algorithm != string(alg) {
		return fmt.Errorf("alg %q does not match the key type (want %s)", jwk.Algorithm, alg)
	}
	if jwk.Use != "" && jwk.Use != "sig" {
		return fmt.Errorf("use %q is not \"sig\"", jwk.Use)
	}
	return nil
}
