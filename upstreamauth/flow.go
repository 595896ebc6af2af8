package upstreamauth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-json-experiment/json"
	"golang.org/x/oauth2"
)

// A Flow is the authorization code flow with PKCE of one client at one authorization server,
// for one resource: the user's consent (Start, Exchange), and the grant's life after it
// (Refresh, Revoke). It holds no state of a user's flow, so one Flow serves every user's;
// each user's is a Pending. Check it before Start.
type Flow struct {
	Server *Server
	Client Client
	// Resource is the upstream MCP server's URL, sent as RFC 8707's resource with the
	// authorization request, the code exchange and every refresh, so that the tokens are
	// for that server alone.
	Resource string
	// RedirectURL is the executor's callback, where the user's browser brings the code back:
	// https, or http on a loopback host.
	RedirectURL string
	Scopes      []string
}

// A Pending is one user's flow between Start and Exchange: the state that ties the callback to
// it, and the PKCE verifier that proves the code exchange comes from whoever started it. Both
// are secrets until the exchange: fmt (every verb), log/slog, JSON and YAML show [redacted] in their
// place. The caller keeps it (by State, say) until the callback comes, and uses it once.
type Pending struct {
	State    string
	Verifier string
}

// Format prints p with its state and verifier redacted, for every verb.
func (p Pending) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, "{State:%s Verifier:%s}", redactedOr(p.State), redactedOr(p.Verifier))
}

// LogValue logs p with its state and verifier redacted.
func (p Pending) LogValue() slog.Value {
	return slog.GroupValue(slog.String("state", redactedOr(p.State)), slog.String("verifier", redactedOr(p.Verifier)))
}

// MarshalJSON encodes p with its state and verifier redacted: a Pending is kept by copying
// its fields, never by marshaling it.
func (p Pending) MarshalJSON() ([]byte, error) { return json.Marshal(p.shown()) }

// MarshalYAML encodes p with its state and verifier redacted, for YAML encoders that ask.
func (p Pending) MarshalYAML() (any, error) { return p.shown(), nil }

func (p Pending) shown() map[string]string {
	return map[string]string{"state": redactedOr(p.State), "verifier": redactedOr(p.Verifier)}
}

// Check holds f to what its requests need: a server that passes Server.Check, a client ID,
// a resource and a redirect URL that are https (http only on a loopback host), and scopes that
// are RFC 6749 scope tokens. Exchange, Refresh and Revoke check it too, before sending
// anything.
func (f *Flow) Check() error {
	if f.Server == nil {
		return fmt.Errorf("%w: the flow has no server", ErrInvalid)
	}
	if err := f.Server.Check(); err != nil {
		return err
	}
	if !isHeaderSafe(f.Client.ID, 1<<10) {
		return fmt.Errorf("%w: the flow's client has no usable ID", ErrInvalid)
	}
	if err := secureURL("resource", f.Resource, ""); err != nil {
		return err
	}
	if err := secureURL("redirect URL", f.RedirectURL, ""); err != nil {
		return err
	}
	for _, s := range f.Scopes {
		if !isScopeToken(s) {
			return fmt.Errorf("%w: scope %.200q is not a scope token", ErrInvalid, s)
		}
	}
	return nil
}

// config is f as oauth2 takes it, with the client authenticating in style. RedirectURL is
// left out for a refresh, which names none.
func (f *Flow) config(style oauth2.AuthStyle, redirect bool) *oauth2.Config {
	c := &oauth2.Config{
		ClientID:     f.Client.ID,
		ClientSecret: f.Client.Secret,
		Endpoint:     oauth2.Endpoint{AuthURL: f.Server.AuthorizationEndpoint, TokenURL: f.Server.TokenEndpoint, AuthStyle: style},
		Scopes:       f.Scopes,
	}
	if redirect {
		c.RedirectURL = f.RedirectURL
	}
	return c
}

// Start begins one user's consent: it returns the URL of the authorization request to send
// the user's browser to (the client, the redirect URL, the scopes, a fresh state, the S256
// challenge of a fresh verifier, the resource) and the Pending the callback is exchanged
// with. The state is 128 bits from crypto/rand, the verifier oauth2's (256 bits). Start sends
// nothing; a Flow that does not pass Check makes no usable URL (and one without a Server
// panics): check it first.
func (f *Flow) Start() (authURL string, p Pending) {
	p = Pending{State: rand.Text(), Verifier: oauth2.GenerateVerifier()}
	authURL = f.config(oauth2.AuthStyleInParams, true).AuthCodeURL(p.State,
		oauth2.S256ChallengeOption(p.Verifier), oauth2.SetAuthURLParam("resource", f.Resource))
	return authURL, p
}

// Exchange completes p with the query of the callback the user's browser brought back: it
// checks that each parameter comes at most once, that the state is p's (ErrStateMismatch),
// and that iss, when the server sends one or says it does (RFC 9207), is the server's
// (ErrIssuerMismatch); an error parameter is then an *Error of the authorization endpoint, with
// the server's code; otherwise it redeems the code at the token endpoint with p's verifier and
// the resource, and returns the token (a Bearer access token, and the refresh token if any).
// The token endpoint's refusal is an *Error; its invalid_grant means the code is spent or
// expired, and the user starts again.
func (f *Flow) Exchange(ctx context.Context, hc *http.Client, p Pending, callback url.Values) (*oauth2.Token, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	secrets := append([]string{p.State, p.Verifier, callback.Get("code")}, f.Client.secrets()...)
	for _, k := range []string{"state", "code", "iss", "error", "error_description"} {
		if len(callback[k]) > 1 {
			return nil, fmt.Errorf("%w: %s more than once", ErrCallback, k)
		}
	}
	if p.State == "" || subtle.ConstantTimeCompare([]byte(callback.Get("state")), []byte(p.State)) != 1 {
		return nil, ErrStateMismatch
	}
	if p.Verifier == "" {
		return nil, fmt.Errorf("%w: the pending flow has no verifier", ErrInvalid)
	}
	if iss, ok := callback["iss"]; ok || f.Server.AuthorizationResponseIssParameterSupported {
		if !ok || iss[0] != f.Server.Issuer {
			return nil, fmt.Errorf("%w: the callback's iss is not %s (RFC 9207)", ErrIssuerMismatch, f.Server.Issuer)
		}
	}
	if code := callback.Get("error"); code != "" {
		return nil, oauthError(EndpointAuthorization, 0, code, callback.Get("error_description"), secrets)
	}
	code := callback.Get("code")
	if code == "" {
		return nil, fmt.Errorf("%w: no code", ErrCallback)
	}
	return f.token(ctx, hc, code, true, secrets, oauth2.VerifierOption(p.Verifier))
}

// Refresh trades refreshToken for a new token at the token endpoint, for the resource (RFC
// 8707). The answer's refresh token is the one to keep: a server that rotates them has spent
// the one sent (oauth2 keeps the one sent when the answer has none). invalid_grant (the
// refresh token is revoked, expired or spent) is ErrRevoked, wrapping the *Error: the user
// consents again.
func (f *Flow) Refresh(ctx context.Context, hc *http.Client, refreshToken string) (*oauth2.Token, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	if refreshToken == "" {
		return nil, fmt.Errorf("%w: no refresh token", ErrInvalid)
	}
	// oauth2's TokenSource sends no parameter but the refresh token, and RFC 8707's resource
	// must go with every refresh; so the request is Exchange's with grant_type overridden. It
	// also carries an empty code, which RFC 6749 §3.2 has the server take as absent.
	tok, err := f.token(ctx, hc, "", false, append([]string{refreshToken}, f.Client.secrets()...),
		oauth2.SetAuthURLParam("grant_type", "refresh_token"), oauth2.SetAuthURLParam("refresh_token", refreshToken))
	if e, ok := errors.AsType[*Error](err); ok && e.Code == "invalid_grant" {
		return nil, fmt.Errorf("%w: %w", ErrRevoked, err)
	}
	return tok, err
}

// token redeems code (with opts and the resource) at the token endpoint, the client
// authenticating as the server takes it, and checks the token that comes back; redirect says
// whether the request names the redirect URL. No error quotes any of secrets.
func (f *Flow) token(ctx context.Context, hc *http.Client, code string, redirect bool, secrets []string, opts ...oauth2.AuthCodeOption) (*oauth2.Token, error) {
	style, err := f.Client.style(f.Server)
	if err != nil {
		return nil, err
	}
	tok, err := f.config(style, redirect).Exchange(f.clientContext(ctx, hc), code, append(opts, oauth2.SetAuthURLParam("resource", f.Resource))...)
	if err != nil {
		return nil, tokenError(err, secrets)
	}
	if err := checkToken(tok); err != nil {
		return nil, err
	}
	return tok, nil
}

// Revoke asks the server to revoke token, the grant's refresh token (which revokes the grant
// at most servers) or an access token (RFC 7009). A server without a revocation endpoint is
// ErrNoRevocation: the grant then ends when its tokens expire, and the caller forgets it all
// the same. A server that does not know the token answers as if it revoked it (RFC 7009
// §2.2).
func (f *Flow) Revoke(ctx context.Context, hc *http.Client, token string) error {
	if err := f.Check(); err != nil {
		return err
	}
	if f.Server.RevocationEndpoint == "" {
		return fmt.Errorf("%w: %s", ErrNoRevocation, f.Server.Issuer)
	}
	if token == "" {
		return fmt.Errorf("%w: no token to revoke", ErrInvalid)
	}
	style, err := f.Client.style(f.Server)
	if err != nil {
		return err
	}
	secrets := append([]string{token}, f.Client.secrets()...)
	form := url.Values{"token": {token}}
	if style == oauth2.AuthStyleInParams {
		form.Set("client_id", f.Client.ID)
		if f.Client.Secret != "" {
			form.Set("client_secret", f.Client.Secret)
		}
	}
	resp, body, err := post(ctx, hc, EndpointRevocation, f.Server.RevocationEndpoint, "application/x-www-form-urlencoded", []byte(form.Encode()), secrets,
		func(req *http.Request) {
			if style == oauth2.AuthStyleInHeader {
				// RFC 6749 §2.3.1: both form-encoded first, as oauth2 does at the token endpoint.
				req.SetBasicAuth(url.QueryEscape(f.Client.ID), url.QueryEscape(f.Client.Secret))
			}
		})
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return endpointError(EndpointRevocation, resp, body, secrets)
	}
	return nil
}

// GrantedScopes returns the scopes tok was granted: the answer's scope, or, when it has none,
// the flow's (RFC 6749 §5.1: the scopes asked for).
func (f *Flow) GrantedScopes(tok *oauth2.Token) []string {
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		return strings.Fields(s)
	}
	return f.Scopes
}

// clientContext is ctx carrying the HTTP client oauth2 sends with: hc, following no redirect.
func (f *Flow) clientContext(ctx context.Context, hc *http.Client) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, noRedirect(hc))
}

// tokenError is what may be said of a failed token request: the OAuth error of a refusal, the
// status of an answer that is none (a redirect, a 5xx page), that it was not a token
// response, or that no answer came; never the body (oauth2's error quotes it), nor the
// reason phrase of the status line.
func tokenError(err error, secrets []string) error {
	if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok {
		if re.ErrorCode != "" {
			return oauthError(EndpointToken, re.Response.StatusCode, re.ErrorCode, re.ErrorDescription, secrets)
		}
		return fmt.Errorf("%w: the token endpoint answered %s without an OAuth error (redirects are not followed)", ErrAnswer, status(re.Response))
	}
	if _, ok := errors.AsType[*url.Error](err); ok || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return unreachable(EndpointToken+" endpoint", err, secrets)
	}
	return fmt.Errorf("%w: the token endpoint's answer is not a token response", ErrAnswer)
}

// checkToken refuses a token the executor cannot send or store: an access token that is not
// Bearer, longer than 16 KiB or with a byte no header carries (RFC 6750's b64token and the
// JWTs and opaque tokens in use are visible ASCII), a refresh token that is no RFC 6749
// VSCHAR string of at most 16 KiB, a negative expires_in. The reasons are fixed words: the
// answer is the server's, and holds the tokens.
func checkToken(tok *oauth2.Token) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: the token endpoint's token %s", ErrAnswer, why)
	}
	switch {
	case !strings.EqualFold(tok.TokenType, "Bearer"):
		return bad("is not of type Bearer")
	case !isHeaderSafe(tok.AccessToken, maxToken):
		return bad("is empty, longer than 16 KiB or holds a byte no header may carry")
	case tok.RefreshToken != "" && !isVSCHAR(tok.RefreshToken, maxToken):
		return bad("has a refresh token longer than 16 KiB or with a byte outside RFC 6749's VSCHAR")
	case tok.ExpiresIn < 0:
		return bad("has a negative expires_in")
	}
	return nil
}

// isVSCHAR reports whether s is 1 to max bytes of RFC 6749's VSCHAR (%x20-7E).
func isVSCHAR(s string, max int) bool {
	// A byte past ASCII reads as a rune past 0x7f, valid UTF-8 or not.
	return s != "" && len(s) <= max && !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r >= 0x7f })
}
