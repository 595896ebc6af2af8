package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// A service is a client of the client-credentials grant.
type service struct {
	id, secret, resource string
}

// store is the example storage with JWT access tokens for a resource. Only what differs is
// overridden: the example issues opaque tokens whose aud is the client.
type store struct {
	*storage.Storage
	resource string
	services map[string]service
}

func newStore(issuer, resource string, services []service) *store {
	s := &store{
		Storage: storage.NewStorageWithClients(storage.NewUserStore(issuer), map[string]*storage.Client{
			NativeClientID: storage.NativeClient(NativeClientID, NativeRedirectURI),
		}),
		resource: resource,
		services: map[string]service{},
	}
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
	return jwtClient{Client: storage.WebClient(sv.id, sv.secret), grants: []oidc.GrantType{oidc.GrantTypeClientCredentials}}, nil
}

// ClientCredentialsTokenRequest makes the client the token's subject and its resource the
// token's audience.
func (s *store) ClientCredentialsTokenRequest(ctx context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	sv, ok := s.services[clientID]
	if !ok {
		return nil, errClient
	}
	return &oidc.JWTTokenRequest{Subject: sv.id, Audience: []string{sv.resource}, Scopes: scopes}, nil
}

// GetClientByClientID returns the example's clients with JWT access tokens.
func (s *store) GetClientByClientID(ctx context.Context, clientID string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, clientID)
	if err != nil {
		return nil, err
	}
	return jwtClient{Client: c}, nil
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

// CreateAccessToken hands the example storage the request it knows, so that it records the
// token's client.
func (s *store) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	if a, ok := req.(authRequest); ok {
		req = a.AuthRequest
	}
	return s.Storage.CreateAccessToken(ctx, req)
}

// GetPrivateClaimsFromScopes writes the granted scopes into the access token as its scope
// claim (RFC 9068 §2.2.3), which the example leaves out, next to the example's own claims.
func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	if len(scopes) > 0 {
		if claims == nil {
			claims = map[string]any{}
		}
		claims["scope"] = strings.Join(scopes, " ")
	}
	return claims, nil
}
