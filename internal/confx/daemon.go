package confx

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/internal/httpx"
)

// The checks of the keys the daemons' configs have in common, each placed at its key.

// Required reports each key whose value is empty, as "key is required", given as pairs: key,
// value, key, value... A key that is not set has no place in the file, so the problem has none.
func Required(pairs ...string) []error {
	var errs []error
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			errs = append(errs, fmt.Errorf("%s is required", pairs[i]))
		}
	}
	return errs
}

// Issuer names an issuer whose signatures a daemon verifies, and where its public keys are.
type Issuer struct {
	Issuer string `json:"issuer"`
	JWKS   string `json:"jwks"` // file path or http(s) URL
}

// Issuers checks the list of issuers at key: each names itself and its key set.
func Issuers(key string, issuers []Issuer) []error {
	var errs []error
	for i, is := range issuers {
		if is.Issuer == "" || is.JWKS == "" {
			errs = append(errs, Place(Index(key, i), fmt.Errorf("%s[%d]: issuer and jwks are required", key, i)))
		}
	}
	return errs
}

// Algorithms checks the list of signature algorithms at key: each is EdDSA or ES256.
func Algorithms(key string, algs []string) []error {
	var errs []error
	for i, a := range algs {
		if a != string(jose.EdDSA) && a != string(jose.ES256) {
			errs = append(errs, Place(Index(key, i), fmt.Errorf("%s[%d]: %q is not allowed (EdDSA or ES256)", key, i, a)))
		}
	}
	return errs
}

// SignatureAlgorithms is a list of algorithms that Algorithms accepted, EdDSA alone when empty.
func SignatureAlgorithms(algs []string) []jose.SignatureAlgorithm {
	if len(algs) == 0 {
		return []jose.SignatureAlgorithm{jose.EdDSA}
	}
	out := make([]jose.SignatureAlgorithm, len(algs))
	for i, a := range algs {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}

// CheckDuration reports the first problem of the duration setting key, whose value is d: it
// is negative, past ceiling, or (when subSecond says why that matters) set under one second. Each
// message follows the key and the value.
func CheckDuration(key string, d, ceiling time.Duration, negative, over, subSecond string) error {
	msg := negative
	switch {
	case d < 0:
	case d > ceiling:
		msg = over
	case subSecond != "" && d != 0 && d < time.Second:
		msg = subSecond
	default:
		return nil
	}
	return Place(key, fmt.Errorf("%s %s %s", key, d, msg))
}

// Callers checks a daemon's callers list: it names one caller at least, and each entry whose
// token hash is not one is reported at its place in the file, in the words httpx.NewTokens uses,
// which refuses exactly these.
func Callers(callers []httpx.Token) []error {
	if len(callers) == 0 {
		return []error{errors.New("callers: at least one caller is required")}
	}
	var errs []error
	for i, t := range callers {
		if _, err := httpx.ParseSHA256(t.TokenSHA256); err != nil {
			errs = append(errs, Place(Index("callers", i), fmt.Errorf("callers[%d] (%s): %w", i, t.Name, err)))
		}
	}
	return errs
}

// AdminToken checks admin_token_sha256: unset (no admin), or a SHA-256 in hex.
func AdminToken(hash string) []error {
	if hash == "" {
		return nil
	}
	if _, err := httpx.ParseSHA256(hash); err != nil {
		return []error{Place("admin_token_sha256", fmt.Errorf("admin_token_sha256: %w", err))}
	}
	return nil
}

// DebugListen checks debug_listen: unset (no profiles served), or a loopback address.
func DebugListen(addr string) []error {
	if addr == "" {
		return nil
	}
	if err := httpx.CheckLoopback(addr); err != nil {
		return []error{Place("debug_listen", err)}
	}
	return nil
}
