package identity

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/loopback"
)

// Defaults and bounds of an Issuer.
const (
	DefaultPrincipalClaim = "sub"
	DefaultMaxSkew        = 60 * time.Second
	// MaxMaxSkew bounds max_skew: a larger allowance would stretch every token's lifetime by
	// as much, which is a configuration mistake rather than a clock problem.
	MaxMaxSkew = 5 * time.Minute
	// DefaultMaxTokenLifetime bounds how long a token accepted may live (exp - iat): a token
	// that lives longer is a credential the issuer cannot take back in time, and is refused.
	DefaultMaxTokenLifetime = 24 * time.Hour
)

// defaultAlgorithms are the signature algorithms accepted when an issuer lists none.
var defaultAlgorithms = []string{"RS256", "ES256", "EdDSA"}

// allowedAlgorithms are those an issuer may list: asymmetric signatures only. "none" proves
// nothing and an HMAC algorithm needs a secret shared with the issuer, which a resource server
// must not hold (and would let anyone who knows the issuer's public key mint tokens if the key
// were ever used as one).
var allowedAlgorithms = []string{
	"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "EdDSA",
}

// Config is the identity section of a daemon's configuration:
//
//	identity:
//	  issuers:
//	    - issuer: https://idp.example.com
//	      audience: https://gateway.example.com/mcp
type Config struct {
	Issuers []Issuer `json:"issuers"`
}

// An Issuer is one trusted authorization server and what its tokens must say.
type Issuer struct {
	// Issuer is the authorization server's issuer identifier, exactly as its tokens' iss claim
	// and its metadata's issuer member spell it.
	Issuer string `json:"issuer"`
	// Audience is this resource server's resource identifier (RFC 8707), which a token's aud
	// must contain.
	Audience string `json:"audience"`
	// ExcludedAudiences are audiences a token must not name beside Audience: a token whose aud
	// holds one of them is refused (WrongAudience) though it names Audience too, so that one
	// token never serves both this resource and another where it would decide something
	// (verdictd's approvals API beside the gateway). Excluding adds these to an issuer's own.
	ExcludedAudiences []string `json:"excluded_audiences,omitempty"`
	// PrincipalClaim names the claim whose string value identifies the caller; "sub" if empty.
	PrincipalClaim string `json:"principal_claim,omitempty"`
	// Algorithms is the allow-list of JWS algorithms; RS256, ES256 and EdDSA if empty.
	Algorithms []string `json:"algorithms,omitempty"`
	// MaxSkew is the clock difference tolerated on exp, nbf and iat; DefaultMaxSkew if zero,
	// at most MaxMaxSkew.
	MaxSkew confx.Duration `json:"max_skew,omitempty"`
	// MaxTokenLifetime is the longest lifetime of a token accepted: exp - iat, or, for a token
	// without iat, exp - now (what is left of it, the least it lives), then allowing the skew.
	// DefaultMaxTokenLifetime if zero.
	MaxTokenLifetime confx.Duration `json:"max_token_lifetime,omitempty"`
	// Scopes are the scopes every token must carry.
	Scopes []string `json:"scopes,omitempty"`
	// Introspection, when set, accepts opaque (non-JWT) tokens by RFC 7662 introspection.
	Introspection *Introspection `json:"introspection,omitempty"`
}

// Introspection is an RFC 7662 token introspection endpoint and the resource server's client
// credentials for it (client_secret_basic).
type Introspection struct {
	Endpoint string `json:"endpoint"`
	ClientID string `json:"client_id"`
	// ClientSecretFile holds the client secret (surrounding white space is ignored), so that
	// the secret is not written into the configuration.
	ClientSecretFile string `json:"client_secret_file"`
}

// principalClaim, algorithms and maxSkew return the issuer's settings with defaults applied.
func (is *Issuer) principalClaim() string { return cmp.Or(is.PrincipalClaim, DefaultPrincipalClaim) }

func (is *Issuer) algorithms() []string {
	if len(is.Algorithms) == 0 {
		return defaultAlgorithms
	}
	return is.Algorithms
}

func (is *Issuer) maxSkew() time.Duration { return is.MaxSkew.Or(DefaultMaxSkew) }

func (is *Issuer) maxTokenLifetime() time.Duration {
	return is.MaxTokenLifetime.Or(DefaultMaxTokenLifetime)
}

// Excluding returns a copy of c whose issuers also refuse tokens naming any of audiences beside
// their own audience (Issuer.ExcludedAudiences); an issuer's own audience is not excluded for it.
// A daemon that verifies tokens for two resources makes each section exclude the other's.
func (c Config) Excluding(audiences ...string) Config {
	out := Config{Issuers: slices.Clone(c.Issuers)}
	for i := range out.Issuers {
		is := &out.Issuers[i]
		ex := slices.Clone(is.ExcludedAudiences)
		for _, a := range audiences {
			if a != is.Audience && !slices.Contains(ex, a) {
				ex = append(ex, a)
			}
		}
		is.ExcludedAudiences = ex
	}
	return out
}

// Audiences returns the audiences of c's issuers, each once.
func (c Config) Audiences() []string {
	var out []string
	for _, is := range c.Issuers {
		if !slices.Contains(out, is.Audience) {
			out = append(out, is.Audience)
		}
	}
	return out
}

// Validate reports every problem of c, each naming its key (issuers[0].audience), joined.
// A Config that fails validation must not be used: there is no lenient reading of an
// authentication setting.
func (c *Config) Validate() error {
	var errs []error
	// Each problem is a confx.PathError, so that a daemon that reads this section from its
	// config file reports it at the key's line and column.
	bad := func(key, format string, args ...any) {
		errs = append(errs, confx.Errorf(key, format, args...))
	}
	if len(c.Issuers) == 0 {
		bad("issuers", "at least one issuer is required")
	}
	seen := map[string]bool{}
	introspecting := 0
	for i := range c.Issuers {
		is := &c.Issuers[i]
		key := fmt.Sprintf("issuers[%d]", i)
		if err := checkURL(is.Issuer); err != nil {
			bad(key+".issuer", "%v", err)
		} else if seen[is.Issuer] {
			bad(key+".issuer", "%s is listed twice", is.Issuer)
		}
		seen[is.Issuer] = true
		if is.Audience == "" {
			bad(key+".audience", "the resource identifier tokens must be issued for is required")
		} else if u, err := url.Parse(is.Audience); err != nil || u.Scheme == "" || u.Fragment != "" {
			bad(key+".audience", "%q is not an absolute URI without a fragment (RFC 8707)", is.Audience)
		}
		for j, a := range is.ExcludedAudiences {
			k := fmt.Sprintf("%s.excluded_audiences[%d]", key, j)
			switch {
			case a == "" || strings.TrimSpace(a) != a:
				bad(k, "%q is not an audience", a)
			case a == is.Audience:
				bad(k, "%q is the issuer's own audience: every token would be refused", a)
			}
		}
		if is.PrincipalClaim != "" && strings.TrimSpace(is.PrincipalClaim) != is.PrincipalClaim {
			bad(key+".principal_claim", "%q has surrounding white space", is.PrincipalClaim)
		}
		for j, alg := range is.Algorithms {
			if !slices.Contains(allowedAlgorithms, alg) {
				bad(fmt.Sprintf("%s.algorithms[%d]", key, j), "%q is not allowed (one of %s)", alg, strings.Join(allowedAlgorithms, ", "))
			}
		}
		if d := is.MaxSkew.D(); d < 0 || d > MaxMaxSkew {
			bad(key+".max_skew", "%v is outside 0..%v", d, MaxMaxSkew)
		}
		if d := is.MaxTokenLifetime.D(); d < 0 {
			bad(key+".max_token_lifetime", "%v is negative", d)
		}
		for j, s := range is.Scopes {
			if s == "" || strings.ContainsAny(s, " \"\\") {
				bad(fmt.Sprintf("%s.scopes[%d]", key, j), "%q is not a scope token (RFC 6749 §3.3)", s)
			}
		}
		if in := is.Introspection; in != nil {
			introspecting++
			if err := loopback.SecureURL(in.Endpoint); err != nil {
				bad(key+".introspection.endpoint", "%v", err)
			}
			if in.ClientID == "" {
				bad(key+".introspection.client_id", "is required")
			}
			if in.ClientSecretFile == "" {
				bad(key+".introspection.client_secret_file", "is required")
			}
		}
	}
	if introspecting > 1 {
		// An opaque token does not say who issued it; sending it to several introspection
		// endpoints would hand every one of them every other issuer's tokens.
		bad("issuers", "at most one issuer may configure introspection, %d do", introspecting)
	}
	return errors.Join(errs...)
}

// checkURL accepts an absolute https URL, or http on a loopback host, without query or
// fragment (OpenID Connect Discovery 1.0 §3, RFC 8414 §2).
func checkURL(s string) error {
	if s == "" {
		return errors.New("is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && loopback.Host(u.Hostname()):
	default:
		return fmt.Errorf("%q must be an https URL (http only on a loopback host)", s)
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || strings.Contains(s, "#") || u.User != nil {
		return fmt.Errorf("%q must have a host and no user, query or fragment", s)
	}
	return nil
}
