package identity

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/verdictgate/verdict/internal/opfile"
)

// A Verifier authenticates bearer tokens against the issuers of a Config. It is safe for
// concurrent use; make one per Config and keep it, since it caches the issuers' keys.
type Verifier struct {
	issuers    map[string]*issuer
	introspect *issuer // the one issuer that introspects opaque tokens, if any
	client     *http.Client
	now        func() time.Time
	groups     string // the claim Principal.Groups is read from; "" reads none
}

type issuer struct {
	cfg    Issuer
	algs   []jose.SignatureAlgorithm
	keys   *keySet
	secret string // introspection client secret
}

// An Option adjusts a Verifier.
type Option func(*Verifier)

// WithHTTPClient makes the Verifier reach authorization servers through c instead of a client
// with a 10 second timeout.
func WithHTTPClient(c *http.Client) Option { return func(v *Verifier) { v.client = c } }

// WithClock makes the Verifier read the time from now instead of time.Now: for tests, and for
// checking tokens as of a given moment.
func WithClock(now func() time.Time) Option { return func(v *Verifier) { v.now = now } }

// WithGroupsClaim makes the Verifier read Principal.Groups from the JWT claim name: an array
// of strings or one string. A token whose claim has another shape is refused as malformed;
// one without it has no groups. Introspected tokens carry none.
func WithGroupsClaim(name string) Option { return func(v *Verifier) { v.groups = name } }

// NewVerifier validates cfg and returns a Verifier for it. It does no network I/O: each
// issuer's metadata and keys are fetched when the first token needs them, so that a daemon
// starts while its authorization server is down and refuses tokens (IdPUnavailable) until it
// is back. It reads the introspection client secret file, if one is configured.
func NewVerifier(cfg Config, opts ...Option) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	v := &Verifier{
		issuers: make(map[string]*issuer, len(cfg.Issuers)),
		client:  &http.Client{Timeout: 10 * time.Second},
		now:     time.Now,
	}
	for _, o := range opts {
		o(v)
	}
	for _, c := range cfg.Issuers {
		c.Algorithms = slices.Clone(c.algorithms())
		c.Scopes = slices.Clone(c.Scopes)
		c.ExcludedAudiences = slices.Clone(c.ExcludedAudiences)
		is := &issuer{cfg: c, keys: &keySet{issuer: c.Issuer, client: v.client, now: v.now, fetching: make(chan struct{}, 1)}}
		for _, a := range c.Algorithms {
			is.algs = append(is.algs, jose.SignatureAlgorithm(a))
		}
		if in := c.Introspection; in != nil {
			b, err := opfile.ReadFile(in.ClientSecretFile)
			if err != nil {
				return nil, fmt.Errorf("identity: issuer %s: introspection.client_secret_file: %w", c.Issuer, err)
			}
			if is.secret = strings.TrimSpace(string(b)); is.secret == "" {
				return nil, fmt.Errorf("identity: issuer %s: introspection.client_secret_file %s is empty", c.Issuer, in.ClientSecretFile)
			}
			v.introspect = is
		}
		v.issuers[c.Issuer] = is
	}
	return v, nil
}

// Verify authenticates token, a bearer token without its "Bearer " prefix. A JWS compact
// token is verified as a JWT access token; any other token is introspected, if an issuer
// introspects, and refused as TokenMalformed if none does. A refusal is an *Error.
func (v *Verifier) Verify(ctx context.Context, token string) (*Principal, error) {
	if token == "" {
		return nil, &Error{Reason: TokenMissing}
	}
	if strings.Count(token, ".") == 2 {
		return v.verifyJWT(ctx, token)
	}
	if v.introspect == nil {
		return nil, refuse(TokenMalformed, "", "not a JWT, and no issuer introspects opaque tokens")
	}
	return v.introspect.introspect(ctx, v.client, v.now(), token)
}

// header is the part of a JOSE header read before the issuer's keys are chosen.
type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// claims are the registered claims a JWT access token is checked on (RFC 9068 §2.2).
type claims struct {
	jwt.Claims
	Scope string   `json:"scope"`
	Scp   []string `json:"scp"`
}

func (v *Verifier) verifyJWT(ctx context.Context, token string) (*Principal, error) {
	// The issuer, and with it the algorithms and keys to accept, are read from the token
	// before its signature is checked; nothing read here is trusted until it is.
	parts := strings.Split(token, ".")
	var h header
	if err := decodeSegment(parts[0], &h); err != nil {
		return nil, refuse(TokenMalformed, "", "header: %v", err)
	}
	var unverified struct {
		Issuer string `json:"iss"`
	}
	if err := decodeSegment(parts[1], &unverified); err != nil {
		return nil, refuse(TokenMalformed, "", "payload: %v", err)
	}
	is, ok := v.issuers[unverified.Issuer]
	if !ok {
		return nil, refuse(WrongIssuer, "", "iss %q is not a configured issuer", unverified.Issuer)
	}
	if !slices.Contains(is.cfg.Algorithms, h.Alg) {
		return nil, refuse(AlgNotAllowed, is.cfg.Issuer, "alg %q is not one of %v", h.Alg, is.cfg.Algorithms)
	}
	jws, err := jose.ParseSignedCompact(token, is.algs)
	if err != nil {
		return nil, refuse(TokenMalformed, is.cfg.Issuer, "%v", err)
	}
	keys, err := is.keys.lookup(ctx, h.Kid, h.Alg)
	if err != nil {
		return nil, err
	}
	var payload []byte
	for _, k := range keys {
		if payload, err = jws.Verify(k.Key); err == nil {
			break
		}
	}
	if err != nil {
		return nil, &Error{Reason: BadSignature, Issuer: is.cfg.Issuer, Err: err}
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, refuse(TokenMalformed, is.cfg.Issuer, "claims: %v", err)
	}
	if c.Issuer != is.cfg.Issuer { // the signed payload must say what the unverified one did
		return nil, refuse(WrongIssuer, is.cfg.Issuer, "iss %q", c.Issuer)
	}
	if err := is.checkAudience(c.Audience); err != nil {
		return nil, err
	}
	if c.Expiry == nil {
		return nil, refuse(ClaimMissing, is.cfg.Issuer, "no exp")
	}
	if err := is.checkTimes(v.now(), c.Expiry.Time(), c.NotBefore, c.IssuedAt); err != nil {
		return nil, err
	}
	scopes := c.Scp
	if c.Scope != "" {
		scopes = strings.Fields(c.Scope)
	}
	if err := is.checkScopes(scopes); err != nil {
		return nil, err
	}
	subject, err := is.subject(payload, c.Subject)
	if err != nil {
		return nil, err
	}
	groups, err := v.readGroups(is, payload)
	if err != nil {
		return nil, err
	}
	return &Principal{
		Groups:    groups,
		ID:        PrincipalID(is.cfg.Issuer, subject),
		Subject:   subject,
		Issuer:    is.cfg.Issuer,
		Scopes:    scopes,
		Method:    MethodJWT,
		Expiry:    c.Expiry.Time(),
		TokenHash: tokenHash(is.cfg.Issuer, c.ID, token),
	}, nil
}

// subject returns the principal claim of payload; sub is what the claims already hold.
func (is *issuer) subject(payload []byte, sub string) (string, error) {
	name := is.cfg.principalClaim()
	if name != "sub" {
		var all map[string]any
		if err := json.Unmarshal(payload, &all); err != nil {
			return "", refuse(TokenMalformed, is.cfg.Issuer, "claims: %v", err)
		}
		s, ok := all[name].(string)
		if !ok && all[name] != nil {
			return "", refuse(TokenMalformed, is.cfg.Issuer, "principal claim %q is not a string", name)
		}
		sub = s
	}
	if sub == "" {
		return "", refuse(ClaimMissing, is.cfg.Issuer, "principal claim %q is absent or empty", name)
	}
	return sub, nil
}

// readGroups reads the groups claim of a verified payload, if the Verifier reads one.
func (v *Verifier) readGroups(is *issuer, payload []byte) ([]string, error) {
	if v.groups == "" {
		return nil, nil
	}
	var all map[string]any
	if err := json.Unmarshal(payload, &all); err != nil {
		return nil, refuse(TokenMalformed, is.cfg.Issuer, "claims: %v", err)
	}
	switch g := all[v.groups].(type) {
	case nil:
		return nil, nil
	case string:
		return []string{g}, nil
	case []any:
		out := make([]string, 0, len(g))
		for _, e := range g {
			s, ok := e.(string)
			if !ok {
				return nil, refuse(TokenMalformed, is.cfg.Issuer, "groups claim %q holds a %T, not a string", v.groups, e)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, refuse(TokenMalformed, is.cfg.Issuer, "groups claim %q is neither a string nor an array of strings", v.groups)
}

// checkTimes checks exp, nbf and iat against now, each allowing the issuer's skew, and the
// token's lifetime against max_token_lifetime: exp - iat, or, without iat, what is left of the
// token (exp - now, allowing the skew), since that much it lives at least.
func (is *issuer) checkTimes(now, exp time.Time, nbf, iat *jwt.NumericDate) error {
	skew := is.cfg.maxSkew()
	if !now.Before(exp.Add(skew)) {
		return refuse(TokenExpired, is.cfg.Issuer, "expired at %v, now %v", exp.UTC(), now.UTC())
	}
	if nbf != nil && now.Add(skew).Before(nbf.Time()) {
		return refuse(TokenNotYetValid, is.cfg.Issuer, "not before %v, now %v", nbf.Time().UTC(), now.UTC())
	}
	if iat != nil && now.Add(skew).Before(iat.Time()) {
		return refuse(TokenNotYetValid, is.cfg.Issuer, "issued at %v, now %v", iat.Time().UTC(), now.UTC())
	}
	max := is.cfg.maxTokenLifetime()
	switch {
	case iat != nil && exp.Sub(iat.Time()) > max:
		return refuse(LifetimeTooLong, is.cfg.Issuer, "lives %v from iat to exp, max_token_lifetime %v", exp.Sub(iat.Time()), max)
	case iat == nil && exp.Sub(now) > max+skew:
		return refuse(LifetimeTooLong, is.cfg.Issuer, "no iat, and %v left until exp, max_token_lifetime %v", exp.Sub(now), max)
	}
	return nil
}

// checkAudience requires aud to name the issuer's audience and none of its excluded ones.
func (is *issuer) checkAudience(aud []string) error {
	if !slices.Contains(aud, is.cfg.Audience) {
		return refuse(WrongAudience, is.cfg.Issuer, "aud %q does not contain %q", aud, is.cfg.Audience)
	}
	for _, a := range is.cfg.ExcludedAudiences {
		if slices.Contains(aud, a) {
			return refuse(WrongAudience, is.cfg.Issuer, "aud %q also names %q, an audience this resource excludes", aud, a)
		}
	}
	return nil
}

func (is *issuer) checkScopes(granted []string) error {
	for _, s := range is.cfg.Scopes {
		if !slices.Contains(granted, s) {
			return refuse(InsufficientScope, is.cfg.Issuer, "scope %q is required", s)
		}
	}
	return nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
