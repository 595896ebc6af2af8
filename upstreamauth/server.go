package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
)

// A Server is what a client uses of an authorization server's metadata (RFC 8414 §2, with
// RFC 9207's and the client ID metadata document's flags). DiscoverServer makes one; one kept
// (it marshals to the same JSON) is checked again by Flow.Check before it is used.
type Server struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint"`
	TokenEndpoint                              string   `json:"token_endpoint"`
	RegistrationEndpoint                       string   `json:"registration_endpoint,omitempty"`
	RevocationEndpoint                         string   `json:"revocation_endpoint,omitempty"`
	ScopesSupported                            []string `json:"scopes_supported,omitempty"`
	ResponseTypesSupported                     []string `json:"response_types_supported,omitempty"`
	GrantTypesSupported                        []string `json:"grant_types_supported,omitempty"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported,omitempty"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	AuthorizationResponseIssParameterSupported bool     `json:"authorization_response_iss_parameter_supported,omitzero"`
	ClientIDMetadataDocumentSupported          bool     `json:"client_id_metadata_document_supported,omitzero"`
}

// DiscoverServer returns the metadata of the authorization server issuer (an issuer a
// resource's metadata named): RFC 8414's document, at /.well-known/oauth-authorization-server
// with the issuer's path inserted; else OpenID Connect discovery's, with the path inserted
// (/.well-known/openid-configuration/path) and then appended (/path/.well-known/openid-
// configuration), the order MCP clients ask in. A location that answers 4xx sends the search
// on; anything else it answers ends it. The document must name issuer exactly (RFC 8414 §3.3:
// else ErrIssuerMismatch) and pass Check: S256 among its PKCE methods (else ErrNoPKCE), its
// endpoints https (http only on loopback, and only for an http issuer).
func DiscoverServer(ctx context.Context, hc *http.Client, issuer string) (*Server, error) {
	if err := secureURL("issuer", issuer, ""); err != nil {
		return nil, err
	}
	u, _ := url.Parse(issuer)
	if u.RawQuery != "" || u.ForceQuery {
		return nil, fmt.Errorf("%w: the issuer %s has a query (RFC 8414 §2)", ErrInvalid, issuer)
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	locations := []string{origin + "/.well-known/oauth-authorization-server" + path, origin + "/.well-known/openid-configuration" + path}
	if path != "" {
		locations = append(locations, origin+path+"/.well-known/openid-configuration")
	}
	for _, at := range locations {
		body, err := getDocument(ctx, hc, at)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return decodeServer(body, issuer)
	}
	return nil, fmt.Errorf("%w: for the issuer %s", ErrNotFound, issuer)
}

// decodeServer reads an authorization server's metadata document for issuer and checks it.
// A member named twice is refused by the decoder.
func decodeServer(body []byte, issuer string) (*Server, error) {
	var s Server
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMetadata, err)
	}
	if s.Issuer != issuer {
		return nil, fmt.Errorf("%w: the metadata names %.200q, not %s", ErrIssuerMismatch, s.Issuer, issuer)
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Check holds s to what a client of it needs: an issuer that is a URL anything may be sent
// to, an authorization endpoint and a token endpoint, every endpoint https (http only on a
// loopback host, and only for an http issuer), S256 among the PKCE methods, and the code flow
// among the response types and grant types when they are listed.
func (s *Server) Check() error {
	if err := secureURL("issuer", s.Issuer, ""); err != nil {
		return err
	}
	if s.AuthorizationEndpoint == "" || s.TokenEndpoint == "" {
		return fmt.Errorf("%w: %s has no authorization_endpoint or no token_endpoint", ErrMetadata, s.Issuer)
	}
	for _, e := range []struct{ name, u string }{
		{"authorization_endpoint", s.AuthorizationEndpoint},
		{"token_endpoint", s.TokenEndpoint},
		{"registration_endpoint", s.RegistrationEndpoint},
		{"revocation_endpoint", s.RevocationEndpoint},
	} {
		if e.u == "" {
			continue
		}
		if err := secureURL(e.name, e.u, s.Issuer); err != nil {
			return err
		}
	}
	if !slices.Contains(s.CodeChallengeMethodsSupported, "S256") {
		return fmt.Errorf("%w: %s", ErrNoPKCE, s.Issuer)
	}
	if len(s.ResponseTypesSupported) > 0 && !slices.Contains(s.ResponseTypesSupported, "code") {
		return fmt.Errorf("%w: %s does not list the response type code", ErrMetadata, s.Issuer)
	}
	if len(s.GrantTypesSupported) > 0 && !slices.Contains(s.GrantTypesSupported, "authorization_code") {
		return fmt.Errorf("%w: %s does not list the grant type authorization_code", ErrMetadata, s.Issuer)
	}
	return nil
}
