package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/verdictgate/verdict/internal/loopback"
)

// wellKnownPath is where RFC 9728 puts protected resource metadata.
const wellKnownPath = "/.well-known/oauth-protected-resource"

// authFlags are the sign-in flags (see the package comment).
type authFlags struct {
	issuer   string
	resource string
	scopes   scopeFlags
	owners   ownerFlags
}

// check refuses the sign-in flags where they mean nothing: over stdio, which carries no
// token, and --resource, --scope or --owner without --auth-issuer.
func (f *authFlags) check(overHTTP bool) error {
	given := f.issuer != "" || f.resource != "" || len(f.scopes) > 0 || len(f.owners) > 0
	switch {
	case !given:
		return nil
	case !overHTTP:
		return errors.New("--auth-issuer, --resource, --scope and --owner need --http: stdio carries no access token")
	case f.issuer == "":
		return errors.New("--resource, --scope and --owner need --auth-issuer")
	}
	if err := loopback.SecureURL(f.issuer); err != nil {
		return fmt.Errorf("--auth-issuer: %w", err) // its keys decide who is signed in
	}
	if f.resource != "" {
		if err := checkResource(f.resource); err != nil {
			return fmt.Errorf("--resource: %w", err)
		}
	}
	return nil
}

// access returns who may use which accounts: with --auth-issuer each --owner's, whose
// accounts must be in l; without, everyone every account.
func (f *authFlags) access(l *Ledger) (access, error) {
	if f.issuer == "" {
		return access{}, nil
	}
	err := l.View(func(st *State) error {
		for _, account := range slices.Sorted(maps.Keys(f.owners)) {
			if _, ok := st.Accounts[account]; !ok {
				return fmt.Errorf("--owner %s=%s: the ledger has no account %q", f.owners[account], account, account)
			}
		}
		return nil
	})
	if err != nil {
		return access{}, err
	}
	return access{signedIn: true, owners: maps.Clone(f.owners)}, nil
}

// checkResource accepts a resource identifier (RFC 8707 §2): an absolute URL with no query
// or fragment, https or http on a loopback host, as tokens for it are sent there.
func checkResource(resource string) error {
	if err := loopback.SecureURL(resource); err != nil {
		return err
	}
	if u, _ := url.Parse(resource); u.RawQuery != "" || u.ForceQuery {
		return fmt.Errorf("%q has a query", resource)
	}
	return nil
}

// ownerFlags collects --owner: the subject that owns each account.
type ownerFlags map[string]string // account → sub

func (o *ownerFlags) String() string { return "" }

// Set takes SUB=ACCOUNT. The account is what follows the last "=", so that a subject may
// hold one; an account has one owner.
func (o *ownerFlags) Set(v string) error {
	i := strings.LastIndexByte(v, '=')
	if i <= 0 || i == len(v)-1 {
		return errors.New("want SUB=ACCOUNT")
	}
	sub, account := v[:i], v[i+1:]
	if prev, ok := (*o)[account]; ok {
		return fmt.Errorf("account %s is already %s's: an account has one owner", account, prev)
	}
	if *o == nil {
		*o = ownerFlags{}
	}
	(*o)[account] = sub
	return nil
}

// scopeFlags collects --scope.
type scopeFlags []string

func (s *scopeFlags) String() string { return strings.Join(*s, " ") }

// Set takes one scope token (RFC 6749 §3.3), which goes quoted into a challenge.
func (s *scopeFlags) Set(v string) error {
	if v == "" || strings.ContainsAny(v, " \"\\") {
		return fmt.Errorf("%q is not a scope token", v)
	}
	if !slices.Contains(*s, v) {
		*s = append(*s, v)
	}
	return nil
}

// access says which accounts a call may use. Its zero value, a bank without sign-in, lets
// every call use every account; signedIn, a call's actor (its token's sub) uses only the
// accounts it owns.
type access struct {
	signedIn bool
	owners   map[string]string // account → sub
}

// actor returns the actor of req: its token's subject when signed in, else "". A signed-in
// bank refuses a call without one; the guard lets none through, so this is the last line.
func (a access) actor(req *mcp.CallToolRequest) (string, *mcp.CallToolResult) {
	if !a.signedIn {
		return "", nil
	}
	if req.Extra == nil || req.Extra.TokenInfo == nil || req.Extra.TokenInfo.UserID == "" {
		return "", toolError("refused: the call carries no signed-in user")
	}
	return req.Extra.TokenInfo.UserID, nil
}

// owns reports whether actor may use account.
func (a access) owns(actor, account string) bool {
	return !a.signedIn || a.owners[account] == actor
}

// notYours is the refusal of another's account. It reads the same for an account that does
// not exist, so that a user learns nothing of the accounts that are not theirs.
func notYours(actor, account string) *mcp.CallToolResult {
	return toolError("refused: account %q is not one of %s's accounts", account, actor)
}

// resourceServer is the bank's side of OAuth: it verifies access tokens, serves its
// metadata, and answers requests without a good token.
type resourceServer struct {
	verifier    *oidc.IDTokenVerifier
	scopes      []string
	metadata    *oauthex.ProtectedResourceMetadata
	metadataURL string
	log         *slog.Logger
}

// newResourceServer finds the issuer's keys by OpenID discovery and returns the resource
// server of f. endpoint is the server's own /mcp URL, the resource when f names none; now,
// if not nil, is the clock tokens' expiry is checked against.
func newResourceServer(ctx context.Context, f *authFlags, endpoint string, now func() time.Time, log *slog.Logger) (*resourceServer, error) {
	resource := f.resource
	if resource == "" {
		u, err := url.Parse(endpoint)
		if err != nil {
			return nil, err
		}
		if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
			return nil, fmt.Errorf("--resource is required: listening on all addresses, the server has no one URL of its own (%s)", endpoint)
		}
		if err := checkResource(endpoint); err != nil {
			return nil, fmt.Errorf("--resource is required: the default, the server's own URL, is refused: %w", err)
		}
		resource = endpoint
	}
	mdURL, err := metadataURL(resource)
	if err != nil {
		return nil, fmt.Errorf("--resource: %w", err)
	}
	// The client reaches the issuer for discovery now and for its keys later (the key set
	// keeps the context's values, not its deadline).
	client := &http.Client{Timeout: 10 * time.Second}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, client), 30*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, f.issuer)
	if err != nil {
		return nil, fmt.Errorf("--auth-issuer %s: %w", f.issuer, err)
	}
	return &resourceServer{
		// An access token's aud names the resource (RFC 9068 §4); go-oidc checks that as it
		// checks an ID token's client ID, with iss, exp and the signature.
		verifier: p.Verifier(&oidc.Config{ClientID: resource, Now: now}),
		scopes:   slices.Clone(f.scopes),
		metadata: &oauthex.ProtectedResourceMetadata{
			Resource:               resource,
			AuthorizationServers:   []string{f.issuer},
			ScopesSupported:        slices.Clone(f.scopes),
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "bank",
		},
		metadataURL: mdURL,
		log:         log,
	}, nil
}

// metadataURL is where RFC 9728 §3.1 puts the metadata of resource: the well-known path
// inserted between its host and its path.
func metadataURL(resource string) (string, error) {
	u, err := url.Parse(resource)
	if err != nil {
		return "", err
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: wellKnownPath}).String() + path, nil
}

// register serves the metadata at the well-known path, followed by /mcp (the server's
// endpoint) and by the resource's path (where metadataURL points when --resource has
// another), and bare: a client that looks in either place finds it.
func (rs *resourceServer) register(mux *http.ServeMux) {
	u, _ := url.Parse(rs.metadataURL) // metadataURL made it
	paths := map[string]bool{wellKnownPath: true, wellKnownPath + "/mcp": true, u.Path: true}
	h := auth.ProtectedResourceMetadataHandler(rs.metadata)
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		mux.Handle(p, h)
	}
}

// tokenInfoKey is the context key of the TokenInfo the guard found.
type tokenInfoKey struct{}

// guard lets through only requests with an access token the verifier accepts that grants
// every --scope, and hands the token's subject and scopes to the MCP server as the call's
// TokenInfo. Every refusal carries the Bearer challenge with the metadata's URL (RFC 9728
// §5.1): 401 without a token, 401 invalid_token with a bad one, 403 insufficient_scope
// (RFC 6750 §3.1). The SDK's own RequireBearerToken only carries the TokenInfo across: its
// challenge names no error.
func (rs *resourceServer) guard(next http.Handler) http.Handler {
	found := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		if ti, ok := ctx.Value(tokenInfoKey{}).(*auth.TokenInfo); ok {
			return ti, nil
		}
		return nil, auth.ErrInvalidToken
	}
	// The expiry was checked with the verifier's clock; the SDK is not to check it again
	// with another.
	pass := auth.RequireBearerToken(found, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti, status, challenge, err := rs.authenticate(r)
		if err != nil {
			rs.log.Info("request refused", "status", status, "error", err.Error())
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer resource_metadata=%q", rs.metadataURL)+challenge)
			http.Error(w, err.Error(), status)
			return
		}
		pass.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenInfoKey{}, ti)))
	})
}

// authenticate returns the TokenInfo of r's access token, or the status, the challenge's
// error parameters and the reason of its refusal.
func (rs *resourceServer) authenticate(r *http.Request) (*auth.TokenInfo, int, string, error) {
	h := r.Header.Values("Authorization")
	if len(h) == 0 {
		// No error code: the client did not try (RFC 6750 §3.1).
		return nil, http.StatusUnauthorized, "", errors.New("an access token is required")
	}
	const invalid = `, error="invalid_token"`
	scheme, token, ok := strings.Cut(h[0], " ")
	if len(h) > 1 || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return nil, http.StatusUnauthorized, invalid, errors.New("the Authorization header is not one bearer token")
	}
	ti, err := rs.verify(r.Context(), token)
	if err != nil {
		return nil, http.StatusUnauthorized, invalid, err
	}
	var missing []string
	for _, s := range rs.scopes {
		if !slices.Contains(ti.Scopes, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return nil, http.StatusForbidden, fmt.Sprintf(`, error="insufficient_scope", scope=%q`, strings.Join(rs.scopes, " ")),
			fmt.Errorf("the token lacks the scopes %s", strings.Join(missing, " "))
	}
	return ti, 0, "", nil
}

// verify checks token (its signature by the issuer's keys, iss, an aud that names the
// resource, exp) and returns its subject and scopes. Any failure, the issuer's keys out of
// reach among them, refuses the token.
func (rs *resourceServer) verify(ctx context.Context, token string) (*auth.TokenInfo, error) {
	t, err := rs.verifier.Verify(ctx, token)
	if err != nil {
		return nil, err
	}
	if t.Subject == "" {
		return nil, errors.New("the token has no sub: it names no user")
	}
	var c struct {
		Scope string `json:"scope"` // RFC 9068 §2.2.3
	}
	if err := t.Claims(&c); err != nil {
		return nil, err
	}
	return &auth.TokenInfo{UserID: t.Subject, Scopes: strings.Fields(c.Scope)}, nil
}
