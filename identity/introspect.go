package identity

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// introspection is what RFC 7662 §2.2 answers about a token, as far as it is checked.
type introspection struct {
	Active    bool             `json:"active"`
	Scope     string           `json:"scope"`
	Issuer    string           `json:"iss"`
	Audience  jwt.Audience     `json:"aud"`
	Expiry    *jwt.NumericDate `json:"exp"`
	NotBefore *jwt.NumericDate `json:"nbf"`
	IssuedAt  *jwt.NumericDate `json:"iat"`
	Subject   string           `json:"sub"`
	ID        string           `json:"jti"`
}

// introspect asks the issuer's introspection endpoint about an opaque token. The answer is
// held to what a JWT would be: an active token of this issuer, for this audience, with an
// exp. An issuer that leaves out aud or exp gets its tokens refused rather than trusted for
// any resource or forever.
func (is *issuer) introspect(ctx context.Context, client *http.Client, now time.Time, token string) (*Principal, error) {
	in := is.cfg.Introspection
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.Endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, &Error{Reason: IdPUnavailable, Issuer: is.cfg.Issuer, Err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 §2.3.1: the client ID and secret are form-encoded before Basic encoding.
	req.SetBasicAuth(url.QueryEscape(in.ClientID), url.QueryEscape(is.secret))
	var raw json.RawMessage
	if err := doJSON(client, req, &raw); err != nil {
		return nil, &Error{Reason: IdPUnavailable, Issuer: is.cfg.Issuer, Err: fmt.Errorf("introspection: %w", err)}
	}
	var r introspection
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, &Error{Reason: IdPUnavailable, Issuer: is.cfg.Issuer, Err: fmt.Errorf("introspection answer: %w", err)}
	}
	if !r.Active {
		return nil, refuse(TokenInactive, is.cfg.Issuer, "introspection: not active")
	}
	if r.Issuer != "" && r.Issuer != is.cfg.Issuer {
		return nil, refuse(WrongIssuer, is.cfg.Issuer, "introspection: iss %q", r.Issuer)
	}
	if err := is.checkAudience(r.Audience); err != nil {
		return nil, err
	}
	if r.Expiry == nil {
		return nil, refuse(ClaimMissing, is.cfg.Issuer, "introspection: no exp")
	}
	if err := is.checkTimes(now, r.Expiry.Time(), r.NotBefore, r.IssuedAt); err != nil {
		return nil, err
	}
	subject, err := is.subject(raw, r.Subject)
	if err != nil {
		return nil, err
	}
	scopes := strings.Fields(r.Scope)
	if err := is.checkScopes(scopes); err != nil {
		return nil, err
	}
	return &Principal{
		ID:        PrincipalID(is.cfg.Issuer, subject),
		Subject:   subject,
		Issuer:    is.cfg.Issuer,
		Scopes:    scopes,
		Method:    MethodIntrospection,
		Expiry:    r.Expiry.Time(),
		TokenHash: tokenHash(is.cfg.Issuer, r.ID, token),
	}, nil
}
