package upstreamauth

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"golang.org/x/oauth2"
)

// A Client is the client the executor is at an authorization server: configured by the
// operator, registered (Register), or named by a client ID metadata document (MetadataClient).
// Its Secret never leaves through formatting: fmt (every verb), log/slog, JSON and YAML show
// [redacted] in its place.
type Client struct {
	ID     string
	Secret string // empty for a public client, whose code PKCE protects
	// AuthStyle is how Secret goes to the token and revocation endpoints: in an HTTP Basic
	// header or in the form body. The zero value (oauth2.AuthStyleAutoDetect) sends it in the
	// header when the server lists client_secret_basic or lists nothing (RFC 8414's default),
	// else in the body when it lists client_secret_post; never both ways, as oauth2's own
	// detection would. A public client sends its ID in the body.
	AuthStyle oauth2.AuthStyle
	// SecretExpiry is when a registered secret expires (client_secret_expires_at); zero when
	// it does not.
	SecretExpiry time.Time
}

// The token endpoint authentication methods (RFC 7591 §2).
const (
	AuthMethodNone  = "none"
	AuthMethodBasic = "client_secret_basic"
	AuthMethodPost  = "client_secret_post"
)

// Format prints c with its secret redacted, for every verb.
func (c Client) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, "{ID:%s Secret:%s AuthStyle:%d SecretExpiry:%s}", c.ID, redactedOr(c.Secret), c.AuthStyle, c.SecretExpiry)
}

// LogValue logs c with its secret redacted.
func (c Client) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", c.ID), slog.String("secret", redactedOr(c.Secret)))
}

// shown is what may be shown of a client: everything but the secret.
type shown struct {
	ID           string    `json:"id" yaml:"id"`
	Secret       string    `json:"secret" yaml:"secret"` // [redacted] or [none]
	AuthStyle    int       `json:"auth_style" yaml:"auth_style"`
	SecretExpiry time.Time `json:"secret_expiry,omitzero" yaml:"secret_expiry,omitempty"`
}

func (c Client) shown() shown {
	return shown{ID: c.ID, Secret: redactedOr(c.Secret), AuthStyle: int(c.AuthStyle), SecretExpiry: c.SecretExpiry}
}

// MarshalJSON encodes c with its secret redacted (a log handler that marshals a Flow reaches
// it so): a client is kept by copying its fields, never by marshaling it.
func (c Client) MarshalJSON() ([]byte, error) { return json.Marshal(c.shown()) }

// MarshalYAML encodes c with its secret redacted, for YAML encoders that ask
// (go.yaml.in/yaml/v3).
func (c Client) MarshalYAML() (any, error) { return c.shown(), nil }

// maxToken bounds a token or a secret taken from an answer: what the vault stores, and a
// header carries.
const maxToken = 16 << 10

// isHeaderSafe reports whether s is 1 to max bytes of visible ASCII, without space.
func isHeaderSafe(s string, max int) bool {
	// A byte past ASCII reads as a rune past 0x7f, valid UTF-8 or not.
	return s != "" && len(s) <= max && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f })
}

// redactedOr stands for a secret that is there, or says there is none.
func redactedOr(secret string) string {
	if secret == "" {
		return "[none]"
	}
	return redacted
}

// secrets are the forms of c's secret a request carries and a server may quote back: the
// secret itself, and the credentials of an HTTP Basic header (RFC 6749 §2.3.1's form-encoding
// of both, in base64). The form-encoded secret alone scrub covers.
func (c Client) secrets() []string {
	if c.Secret == "" {
		return nil
	}
	return []string{c.Secret, base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(c.ID) + ":" + url.QueryEscape(c.Secret)))}
}

// style is how c authenticates at s's token and revocation endpoints.
func (c Client) style(s *Server) (oauth2.AuthStyle, error) {
	if c.Secret == "" {
		return oauth2.AuthStyleInParams, nil
	}
	switch c.AuthStyle {
	case oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams:
		return c.AuthStyle, nil
	case oauth2.AuthStyleAutoDetect:
	default:
		return 0, fmt.Errorf("%w: client %s: unknown AuthStyle %d", ErrInvalid, c.ID, c.AuthStyle)
	}
	methods := s.TokenEndpointAuthMethodsSupported
	switch {
	case len(methods) == 0 || slices.Contains(methods, AuthMethodBasic):
		return oauth2.AuthStyleInHeader, nil
	case slices.Contains(methods, AuthMethodPost):
		return oauth2.AuthStyleInParams, nil
	}
	return 0, fmt.Errorf("%w: %s takes neither client_secret_basic nor client_secret_post", ErrInvalid, s.Issuer)
}

// A RegistrationRequest is the client Register asks an authorization server to register, or
// MetadataDocument describes: a client of the authorization code grant with PKCE and
// refresh tokens.
type RegistrationRequest struct {
	ClientName string
	// RedirectURIs are where the server may send the user back with a code: each https, or
	// http on a loopback host, since a code is a secret.
	RedirectURIs []string
	// TokenEndpointAuthMethod is AuthMethodNone (the default: a public client) or, for
	// Register only, AuthMethodBasic or AuthMethodPost.
	TokenEndpointAuthMethod string
	Scope                   string // space-separated; optional
	// InitialAccessToken is sent as a Bearer token to a server that wants one (RFC 7591
	// §3); Register only. Secret.
	InitialAccessToken string
}

// clientMetadata is RFC 7591 §2 client metadata as this package sends it: in a registration
// request, and as a client ID metadata document.
type clientMetadata struct {
	ClientID                string   `json:"client_id,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	Scope                   string   `json:"scope,omitempty"`
}

// registration is the answer of a registration endpoint (RFC 7591 §3.2.1), as far as it is
// read; anything else it holds is left alone.
type registration struct {
	ClientID                string   `json:"client_id"`
	ClientSecret            string   `json:"client_secret"`
	ClientSecretExpiresAt   int64    `json:"client_secret_expires_at"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
}

// metadata checks r and returns the client metadata it asks for.
func (r RegistrationRequest) metadata() (clientMetadata, error) {
	if len(r.RedirectURIs) == 0 {
		return clientMetadata{}, fmt.Errorf("%w: a registration needs a redirect URI", ErrInvalid)
	}
	for _, u := range r.RedirectURIs {
		if err := secureURL("redirect URI", u, ""); err != nil {
			return clientMetadata{}, err
		}
	}
	method := r.TokenEndpointAuthMethod
	switch method {
	case "":
		method = AuthMethodNone
	case AuthMethodNone, AuthMethodBasic, AuthMethodPost:
	default:
		return clientMetadata{}, fmt.Errorf("%w: token_endpoint_auth_method %q: want none, client_secret_basic or client_secret_post", ErrInvalid, method)
	}
	if err := checkScope(r.Scope); err != nil {
		return clientMetadata{}, err
	}
	return clientMetadata{
		ClientName:              r.ClientName,
		RedirectURIs:            r.RedirectURIs,
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		TokenEndpointAuthMethod: method,
		Scope:                   r.Scope,
	}, nil
}

// checkScope refuses a scope that is not space-separated scope-tokens (RFC 6749 §3.3).
func checkScope(scope string) error {
	if scope != "" && slices.ContainsFunc(strings.Split(scope, " "), func(s string) bool { return !isScopeToken(s) }) {
		return fmt.Errorf("%w: scope %.200q is not space-separated scope tokens", ErrInvalid, scope)
	}
	return nil
}

// isScopeToken reports whether s is an RFC 6749 scope-token: 1*( %x21 / %x23-5B / %x5D-7E ).
func isScopeToken(s string) bool {
	// A byte past ASCII reads as a rune past 0x7e, valid UTF-8 or not.
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e || r == '"' || r == '\\' })
}

// Register registers a client at s's registration endpoint (RFC 7591) and returns it: a
// client of the authorization code grant and refresh tokens, public unless r asks for a
// secret. The answer must name a client ID, a secret when the method needs one, every
// redirect URI asked for when it lists them, and the authorization code grant when it lists
// grants; else ErrAnswer, quoting nothing of it (it holds the secret). A refusal is an *Error.
// A server without a registration endpoint is ErrNoRegistration.
func Register(ctx context.Context, hc *http.Client, s *Server, r RegistrationRequest) (Client, error) {
	if s.RegistrationEndpoint == "" {
		return Client{}, fmt.Errorf("%w: %s", ErrNoRegistration, s.Issuer)
	}
	if err := s.Check(); err != nil {
		return Client{}, err
	}
	m, err := r.metadata()
	if err != nil {
		return Client{}, err
	}
	body, err := json.Marshal(m)
	if err != nil {
		return Client{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	secrets := []string{r.InitialAccessToken}
	resp, answer, err := post(ctx, hc, EndpointRegistration, s.RegistrationEndpoint, "application/json", body, secrets, func(req *http.Request) {
		req.Header.Set("Accept", "application/json")
		if r.InitialAccessToken != "" {
			req.Header.Set("Authorization", "Bearer "+r.InitialAccessToken)
		}
	})
	if err != nil {
		return Client{}, err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return Client{}, endpointError(EndpointRegistration, resp, answer, secrets)
	}
	var reg registration
	if !isJSON(resp) || json.Unmarshal(answer, &reg) != nil {
		return Client{}, fmt.Errorf("%w: the registration endpoint's answer is not a registration", ErrAnswer)
	}
	return registered(reg, m)
}

// registered is the client of a registration's answer, if it is the client asked for.
func registered(reg registration, asked clientMetadata) (Client, error) {
	bad := func(why string) (Client, error) {
		return Client{}, fmt.Errorf("%w: the registration endpoint registered %s", ErrAnswer, why)
	}
	method := cmp.Or(reg.TokenEndpointAuthMethod, asked.TokenEndpointAuthMethod)
	c := Client{ID: reg.ClientID, Secret: reg.ClientSecret}
	switch {
	case !isHeaderSafe(reg.ClientID, 1<<10):
		return bad("no usable client_id")
	case reg.ClientSecret != "" && !isHeaderSafe(reg.ClientSecret, maxToken):
		return bad("a client_secret no request can carry")
	case method != asked.TokenEndpointAuthMethod:
		return bad("another token_endpoint_auth_method than the one asked for")
	case method != AuthMethodNone && reg.ClientSecret == "":
		return bad("no client_secret for a confidential client")
	case method == AuthMethodNone && reg.ClientSecret != "":
		return bad("a client_secret for a public client")
	case reg.ClientSecretExpiresAt < 0:
		return bad("a client_secret_expires_at before 1970")
	case len(reg.RedirectURIs) > 0 && slices.ContainsFunc(asked.RedirectURIs, func(u string) bool { return !slices.Contains(reg.RedirectURIs, u) }):
		return bad("other redirect_uris than those asked for")
	case len(reg.GrantTypes) > 0 && !slices.Contains(reg.GrantTypes, "authorization_code"):
		return bad("a client without the authorization_code grant")
	}
	// Any other method leaves the style to be worked out from the server's metadata (style),
	// which refuses a server that takes neither secret method.
	switch method {
	case AuthMethodBasic:
		c.AuthStyle = oauth2.AuthStyleInHeader
	case AuthMethodPost, AuthMethodNone:
		c.AuthStyle = oauth2.AuthStyleInParams
	}
	if reg.ClientSecretExpiresAt > 0 {
		c.SecretExpiry = time.Unix(reg.ClientSecretExpiresAt, 0)
	}
	return c, nil
}

// MetadataDocument returns the client ID metadata document the executor serves at clientID,
// an https URL with a path, for an authorization server that takes such documents in place of
// a registration (Server.ClientIDMetadataDocumentSupported): its client_id is clientID, and it
// describes a public client (token_endpoint_auth_method none: the document names no secret) of
// the authorization code grant and refresh tokens at r's redirect URIs.
func MetadataDocument(clientID string, r RegistrationRequest) ([]byte, error) {
	if err := checkClientIDURL(clientID); err != nil {
		return nil, err
	}
	if r.TokenEndpointAuthMethod != "" && r.TokenEndpointAuthMethod != AuthMethodNone {
		return nil, fmt.Errorf("%w: a client ID metadata document describes a public client: token_endpoint_auth_method none", ErrInvalid)
	}
	m, err := r.metadata()
	if err != nil {
		return nil, err
	}
	m.ClientID = clientID
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return b, nil
}

// MetadataClient returns the public client whose ID is clientID, the URL of its client ID
// metadata document (MetadataDocument), at s: ErrNoClientIDMetadata unless s takes such
// documents.
func MetadataClient(s *Server, clientID string) (Client, error) {
	if !s.ClientIDMetadataDocumentSupported {
		return Client{}, fmt.Errorf("%w: %s", ErrNoClientIDMetadata, s.Issuer)
	}
	if err := checkClientIDURL(clientID); err != nil {
		return Client{}, err
	}
	return Client{ID: clientID, AuthStyle: oauth2.AuthStyleInParams}, nil
}

// checkClientIDURL holds a client ID metadata document's URL to its rules: https (http only on
// a loopback host, for tests), a path other than the root, no dot segments, no user, no
// fragment.
func checkClientIDURL(clientID string) error {
	if err := secureURL("client_id", clientID, ""); err != nil {
		return err
	}
	u, _ := url.Parse(clientID)
	if u.Path == "" || u.Path == "/" {
		return fmt.Errorf("%w: client_id %s has no path", ErrInvalid, clientID)
	}
	if segs := strings.Split(u.Path, "/"); slices.Contains(segs, ".") || slices.Contains(segs, "..") {
		return fmt.Errorf("%w: client_id %s has a dot segment", ErrInvalid, clientID)
	}
	return nil
}
