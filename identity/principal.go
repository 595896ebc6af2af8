package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"
)

// A Method is how a Principal was authenticated.
type Method string

// The methods.
const (
	MethodJWT           Method = "oidc_jwt"      // a JWT access token verified against the issuer's keys
	MethodIntrospection Method = "introspection" // an opaque token the issuer said is active (RFC 7662)
)

// A Principal is a caller authenticated by a bearer token. It holds nothing from which the
// token could be rebuilt or replayed.
type Principal struct {
	// ID is Issuer + "#" + Subject: unique across issuers, and split at its first "#".
	ID string
	// Subject is the value of the issuer's principal claim ("sub" by default).
	Subject string
	// Issuer is the issuer identifier, as configured and as the token's iss said.
	Issuer string
	// Scopes are the scopes the token grants (its scope or scp claim).
	Scopes []string
	// Groups are the groups the token's groups claim names, when the Verifier reads one
	// (WithGroupsClaim).
	Groups []string
	// Method is how the token was verified.
	Method Method
	// Expiry is the token's exp.
	Expiry time.Time
	// TokenHash is "sha256:" and the hex SHA-256 of "jti\x00" + issuer + "\x00" + jti, or of
	// "token\x00" + the token when it has no jti: enough to recognise a replayed token in
	// an audit record, never to present it.
	TokenHash string
}

// PrincipalID returns the principal ID of subject at issuer.
func PrincipalID(issuer, subject string) string { return issuer + "#" + subject }

// HasScope reports whether p's token grants scope.
func (p *Principal) HasScope(scope string) bool { return slices.Contains(p.Scopes, scope) }

func tokenHash(issuer, jti, token string) string {
	h := sha256.New()
	if jti != "" {
		h.Write([]byte("jti\x00" + issuer + "\x00" + jti))
	} else {
		h.Write([]byte("token\x00" + token))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
