package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// A service is a client of the client-credentials grant.
type service struct {
	id, secret string
	resources  []string // the aud of its tokens
	opaque     bool     // its access tokens are opaque, for introspection
}

// issued is what the provider remembers of an access token, to answer introspection.
type issued struct {
	subject, clientID string
	audience, scopes  []string
	expiry            time.Time
}

// store is the example storage with JWT access tokens for a resource. Only what differs is
// overridden: the example issues opaque tokens whose aud is the client.
type store struct {
	*storage.Storage
	resource string
	services map[string]service
	groups   map[string][]string // by user sub: the groups claim of its access tokens
	// exchangers are the clients of the token-exchange grant, by ID: the audiences each may
	// ask tokens for.
	exchangers map[string][]string

	// requireResource: every authorization request must name resource in a resource
	// parameter (RFC 8707), and no other (the token endpoint's requests are checked by
	// resourceCheck, before the provider reads them).
	requireResource bool

	mu     sync.Mutex
	tokens map[string]issued // by token ID
	// registered are the clients of the registration endpoint (-registration), by ID.
	registered map[string]registered
}

// newStore returns the storage; introspectors are confidential clients allowed to call the
// introspection endpoint, exchangers those allowed the token-exchange grant for their resources.
func newStore(issuer, resource string, services, introspectors, exchangers []service) *store {
	clients := map[string]*storage.Client{
		NativeClientID: storage.NativeClient(NativeClientID, NativeRedirectURI),
	}
	for _, in := range introspectors {
		clients[in.id] = storage.WebClient(in.id, in.secret)
	}
	s := &store{
		resource:   resource,
		services:   map[string]service{},
		exchangers: map[string][]string{},
		tokens:     map[string]issued{},
		registered: map[string]registered{},
	}
	for _, x := range exchangers {
		clients[x.id] = storage.WebClient(x.id, x.secret)
		s.exchangers[x.id] = slices.Clone(x.resources)
	}
	s.Storage = storage.NewStorageWithClients(storage.NewUserStore(issuer), clients)
	for _, sv := range services {
		s.services[sv.id] = sv
	}
	return s
}

// jwtClient is an example client whose access tokens are JWTs.
type jwtClient struct {
	op.Client
	grants []oidc.GrantType
}

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

func (c jwtClient) GrantTypes() []oidc.GrantType {
	if c.grants != nil {
		return c.grants
	}
	return c.Client.GrantTypes()
}

// IsScopeAllowed lets a client ask for any scope: which scopes a resource requires is what
// the resource server, not this provider, is tested on.
func (jwtClient) IsScopeAllowed(string) bool { return true }

var errClient = errors.New("wrong client id or secret")

// ClientCredentials authenticates a client-credentials client.
func (s *store) ClientCredentials(ctx context.Context, clientID, clientSecret string) (op.Client, error) {
	sv, ok := s.services[clientID]
	if !ok || subtle.ConstantTimeCompare([]byte(sv.secret), []byte(clientSecret)) != 1 {
		return nil, errClient
	}
	c := jwtClient{Client: storage.WebClient(sv.id, sv.secret), grants: []oidc.GrantType{oidc.GrantTypeClientCredentials}}
	if sv.opaque {
		return opaqueClient{c}, nil
	}
	return c, nil
}

// opaqueClient is a client whose access tokens are opaque.
type opaqueClient struct{ jwtClient }

func (opaqueClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }

// ClientCredentialsTokenRequest makes the client the token's subject and its resources the
// token's audience.
func (s *store) ClientCredentialsTokenRequest(ctx context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	sv, ok := s.services[clientID]
	if !ok {
		return nil, errClient
	}
	return &tokenRequest{JWTTokenRequest: oidc.JWTTokenRequest{Subject: sv.id, Audience: slices.Clone(sv.resources), Scopes: scopes}, clientID: sv.id}, nil
}

// tokenRequest is a client-credentials request that knows its client.
type tokenRequest struct {
	oidc.JWTTokenRequest
	clientID string
}

// GetClientByClientID returns the example's clients and the registered ones, with JWT access
// tokens.
func (s *store) GetClientByClientID(ctx context.Context, clientID string) (op.Client, error) {
	s.mu.Lock()
	r, ok := s.registered[clientID]
	s.mu.Unlock()
	if ok {
		return jwtClient{Client: storage.RedirectGlobsClient(r.client), grants: r.grants}, nil
	}
	c, err := s.Storage.GetClientByClientID(ctx, clientID)
	if err != nil {
		return nil, err
	}
	return jwtClient{Client: c}, nil
}

// AuthorizeClientIDSecret authenticates a registered confidential client by its secret, and
// the example's clients as the example does.
func (s *store) AuthorizeClientIDSecret(ctx context.Context, clientID, clientSecret string) error {
	s.mu.Lock()
	r, ok := s.registered[clientID]
	s.mu.Unlock()
	if !ok {
		return s.Storage.AuthorizeClientIDSecret(ctx, clientID, clientSecret)
	}
	if r.secret == "" || subtle.ConstantTimeCompare([]byte(r.secret), []byte(clientSecret)) != 1 {
		return errClient
	}
	return nil
}

// CreateAuthRequest refuses, with -require-resource, an authorization request that does not
// name the resource (RFC 8707 §2): the error goes back to the client's redirect URI, as
// invalid_target.
func (s *store) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	if s.requireResource {
		if err := s.checkResource(resourceFromContext(ctx)); err != nil {
			return nil, err
		}
	}
	return s.Storage.CreateAuthRequest(ctx, req, userID)
}

// authRequest is an example authorization request whose tokens are also for the resource.
type authRequest struct {
	op.AuthRequest
	resource string
}

func (a authRequest) GetAudience() []string {
	return append(a.AuthRequest.GetAudience(), a.resource)
}

// AuthRequestByCode adds the resource to the audience of the tokens issued for a code.
func (s *store) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	a, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	return authRequest{AuthRequest: a, resource: s.resource}, nil
}

// refreshRequest is a refresh of a code flow's grant, whose tokens are for the resource too.
type refreshRequest struct {
	op.RefreshTokenRequest
	resource string
}

func (r refreshRequest) GetAudience() []string {
	aud := r.RefreshTokenRequest.GetAudience()
	if slices.Contains(aud, r.resource) {
		return aud
	}
	return append(slices.Clone(aud), r.resource)
}

// TokenRequestByRefreshToken adds the resource to the audience of the tokens a refresh
// issues, as AuthRequestByCode does for the code's: every refresh token here is of a code flow.
func (s *store) TokenRequestByRefreshToken(ctx context.Context, refreshToken string) (op.RefreshTokenRequest, error) {
	r, err := s.Storage.TokenRequestByRefreshToken(ctx, refreshToken)
	if err != nil {
		return nil, err
	}
	return refreshRequest{RefreshTokenRequest: r, resource: s.resource}, nil
}

// unwrap returns the request the example storage knows in place of this provider's wrappers
// (which it does not recognise, and would issue tokens of no client for), with the record of
// the token to be issued for it.
func unwrap(req op.TokenRequest) (op.TokenRequest, issued) {
	t := issued{subject: req.GetSubject(), audience: req.GetAudience(), scopes: req.GetScopes()}
	switch r := req.(type) {
	case authRequest:
		t.clientID = r.GetClientID()
		req = r.AuthRequest
	case refreshRequest:
		t.clientID = r.GetClientID()
		req = r.RefreshTokenRequest
	case *tokenRequest:
		t.clientID = r.clientID
	case op.TokenExchangeRequest:
		t.clientID = r.GetClientID()
	}
	return req, t
}

// CreateAccessToken records the token for introspection, and hands the example storage the
// request it knows.
func (s *store) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	req, t := unwrap(req)
	id, exp, err := s.Storage.CreateAccessToken(ctx, req)
	if err != nil {
		return "", time.Time{}, err
	}
	s.record(id, t, exp)
	return id, exp, nil
}

// CreateAccessAndRefreshTokens is CreateAccessToken for a code flow that asked for
// offline_access, and for a refresh: the example storage keeps the refresh token under the
// client it knows the request by (a wrapped request would leave it no client, and the refresh
// would then be refused as another client's), rotating it on every refresh.
func (s *store) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	req, t := unwrap(req)
	id, refresh, exp, err := s.Storage.CreateAccessAndRefreshTokens(ctx, req, current)
	if err != nil {
		return "", "", time.Time{}, err
	}
	s.record(id, t, exp)
	return id, refresh, exp, nil
}

// record keeps what introspection answers of the access token id.
func (s *store) record(id string, t issued, exp time.Time) {
	t.expiry = exp
	s.mu.Lock()
	s.tokens[id] = t
	s.mu.Unlock()
}

// SetIntrospectionFromToken answers introspection (RFC 7662 §2.2) with what a resource server
// checks: iss, aud, exp, sub, scope. The example leaves out aud and iss, and knows only users,
// not the clients that are the subjects of client-credentials tokens.
func (s *store) SetIntrospectionFromToken(ctx context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	s.mu.Unlock()
	if !ok || t.subject != subject || !time.Now().Before(t.expiry) {
		return errors.New("token is not active")
	}
	resp.Issuer = op.IssuerFromContext(ctx)
	resp.Subject = t.subject
	resp.Audience = t.audience
	resp.Scope = t.scopes
	resp.ClientID = t.clientID
	resp.Expiration = oidc.FromTime(t.expiry)
	resp.JWTID = tokenID
	return nil
}

// GetPrivateClaimsFromScopes writes the granted scopes into the access token as its scope
// claim (RFC 9068 §2.2.3), which the example leaves out, next to the example's own claims.
func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	g := s.groups[userID]
	if claims == nil && (len(scopes) > 0 || len(g) > 0) {
		claims = map[string]any{}
	}
	if len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	if len(g) > 0 {
		claims["groups"] = g
	}
	return claims, nil
}

// SetUserinfoFromRequest puts the user's groups (-group) in the ID token too, as providers
// commonly do for their relying parties: the review console reads them there.
func (s *store) SetUserinfoFromRequest(ctx context.Context, userinfo *oidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, userinfo, token, scopes); err != nil {
		return err
	}
	if g := s.groups[token.GetSubject()]; len(g) > 0 {
		userinfo.AppendClaims("groups", g)
	}
	return nil
}

// ValidateTokenExchangeRequest admits the one exchange this provider serves (RFC 8693): an
// -exchange-client trades a user's access token for an access token of the same subject at an
// audience it was given. The example storage's own rules (impersonation by admins, a refresh
// token by default) are not this provider's.
func (s *store) ValidateTokenExchangeRequest(ctx context.Context, req op.TokenExchangeRequest) error {
	allowed, ok := s.exchangers[req.GetClientID()]
	if !ok {
		return oidc.ErrUnauthorizedClient().WithDescription("the client may not exchange tokens")
	}
	if req.GetExchangeSubjectTokenType() != oidc.AccessTokenType {
		return oidc.ErrInvalidRequest().WithDescription("subject_token_type must be access_token")
	}
	if req.GetExchangeActor() != "" || req.GetExchangeActorTokenType() != "" {
		return oidc.ErrInvalidRequest().WithDescription("actor tokens are not accepted")
	}
	switch req.GetRequestedTokenType() {
	case "":
		req.SetRequestedTokenType(oidc.AccessTokenType)
	case oidc.AccessTokenType:
	default:
		return oidc.ErrInvalidRequest().WithDescription("only access tokens are issued")
	}
	// The issued token's aud is the audience asked for (a resource alone would leave it the
	// client's ID, which no resource server accepts).
	if len(req.GetAudience()) == 0 {
		return oidc.ErrInvalidRequest().WithDescription("audience is required: it becomes the token's aud")
	}
	for _, a := range append(slices.Clone(req.GetAudience()), req.GetResourses()...) {
		if !slices.Contains(allowed, a) {
			return oidc.ErrInvalidTarget().WithDescription("the client may not ask tokens for %s", a)
		}
	}
	return nil
}

// GetPrivateClaimsFromTokenExchangeRequest gives an exchanged token the claims of the
// provider's other access tokens: the scope granted and the user's groups.
func (s *store) GetPrivateClaimsFromTokenExchangeRequest(ctx context.Context, req op.TokenExchangeRequest) (map[string]any, error) {
	return s.GetPrivateClaimsFromScopes(ctx, req.GetSubject(), req.GetClientID(), req.GetScopes())
}
