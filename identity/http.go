package identity

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// WellKnownPath is where RFC 9728 puts protected resource metadata.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// ResourceMetadata is RFC 9728 protected resource metadata; it serves itself as JSON.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported,omitempty"`
	ResourceName           string   `json:"resource_name,omitempty"`
	ResourceDocumentation  string   `json:"resource_documentation,omitempty"`
}

// ResourceMetadata returns the metadata of the resource server identified by resource: the
// issuers whose audience it is, the scopes they require, and "header" as the only way to
// present a token (the MCP authorization specification forbids tokens in query strings).
func (c *Config) ResourceMetadata(resource string) ResourceMetadata {
	m := ResourceMetadata{Resource: resource, BearerMethodsSupported: []string{"header"}}
	for _, is := range c.Issuers {
		if is.Audience != resource {
			continue
		}
		m.AuthorizationServers = append(m.AuthorizationServers, is.Issuer)
		for _, s := range is.Scopes {
			if !slices.Contains(m.ScopesSupported, s) {
				m.ScopesSupported = append(m.ScopesSupported, s)
			}
		}
	}
	return m
}

// ServeHTTP answers GET and HEAD with m as JSON.
func (m ResourceMetadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	b, err := json.Marshal(m)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=3600")
	w.Write(b)
}

// MetadataURL returns where the metadata of resource is served (RFC 9728 §3.1): the
// well-known path inserted between the host and the resource's own path.
func MetadataURL(resource string) (string, error) {
	u, err := url.Parse(resource)
	if err != nil {
		return "", err
	}
	if u.Scheme == "" || u.Host == "" {
		return "", errors.New("identity: resource " + resource + " is not an absolute URL")
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: WellKnownPath}).String() + path, nil
}

// BearerToken returns the token of r's Authorization header (RFC 6750 §2.1). A request with
// no such header is refused as TokenMissing and one with another scheme or a malformed value
// as TokenMalformed. Tokens in the query or the body are not looked for.
func BearerToken(r *http.Request) (string, error) {
	h := r.Header.Values("Authorization")
	if len(h) == 0 {
		return "", &Error{Reason: TokenMissing}
	}
	if len(h) > 1 {
		return "", refuse(TokenMalformed, "", "%d Authorization headers", len(h))
	}
	scheme, token, ok := strings.Cut(h[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", refuse(TokenMalformed, "", "Authorization scheme is not Bearer")
	}
	token = strings.TrimLeft(token, " ")
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", refuse(TokenMalformed, "", "malformed bearer token")
	}
	return token, nil
}

// descriptions are the error_description of each Reason: fixed texts, so that nothing of the
// token or of the authorization server's answers is reflected to the caller.
var descriptions = map[Reason]string{
	TokenMalformed:    "the access token is malformed",
	ClaimMissing:      "the access token lacks a required claim",
	TokenExpired:      "the access token expired",
	TokenNotYetValid:  "the access token is not valid yet",
	LifetimeTooLong:   "the access token lives longer than this resource accepts",
	WrongAudience:     "the access token was not issued for this resource",
	WrongIssuer:       "the access token was not issued by a trusted authorization server",
	AlgNotAllowed:     "the access token's signature algorithm is not accepted",
	BadSignature:      "the access token's signature does not verify",
	UnknownKey:        "the access token was signed with an unknown key",
	IdPUnavailable:    "the authorization server cannot be reached to verify the access token",
	InsufficientScope: "the access token lacks a required scope",
	TokenInactive:     "the access token is not active",
}

// WriteError answers a refused request (RFC 6750 §3, RFC 9728 §5.1):
//
//   - TokenMissing: 401 with a challenge naming only the resource metadata, as a request
//     without credentials gets no error code;
//   - InsufficientScope: 403 with error="insufficient_scope" and the scopes of scope, if any;
//   - IdPUnavailable: 503, since the token may be good and the client should retry rather
//     than discard it, with an invalid_token challenge;
//   - any other refusal: 401 with error="invalid_token".
//
// err should be an *Error; any other error is answered as invalid_token. resourceMetadata
// is the URL of the resource's metadata (MetadataURL), or "" to leave it out.
func WriteError(w http.ResponseWriter, resourceMetadata string, err error, scope ...string) {
	reason := ReasonOf(err)
	var params []string
	if resourceMetadata != "" {
		params = append(params, `resource_metadata="`+quote(resourceMetadata)+`"`)
	}
	status := HTTPStatus(err)
	code := "invalid_token"
	switch reason {
	case TokenMissing:
		code = ""
	case InsufficientScope:
		code = "insufficient_scope"
	}
	if code != "" {
		params = append(params, `error="`+code+`"`)
		if d, ok := descriptions[reason]; ok {
			params = append(params, `error_description="`+d+`"`)
		}
	}
	if len(scope) > 0 {
		params = append(params, `scope="`+quote(strings.Join(scope, " "))+`"`)
	}
	challenge := "Bearer"
	if len(params) > 0 {
		challenge += " " + strings.Join(params, ", ")
	}
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, http.StatusText(status), status)
}

// quote drops what a quoted-string cannot hold as is, rather than escape it: the values
// written are URLs and scope tokens, in which '"' and '\' have no place.
func quote(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// HTTPStatus is the status of the answer to a request refused for err: 403 for
// InsufficientScope, 503 for IdPUnavailable (the token may be good: the client should retry,
// not discard it), 401 for any other refusal. WriteError answers with it; a daemon whose API
// has an error format of its own answers with it too.
func HTTPStatus(err error) int {
	switch ReasonOf(err) {
	case InsufficientScope:
		return http.StatusForbidden
	case IdPUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusUnauthorized
}

// SubjectTokenHeader is the request header in which a daemon that calls another on a user's
// behalf forwards the user's own access token (mcpgate calling verdictd), in the spirit of
// OAuth 2.0 token exchange's subject_token (RFC 8693): the called daemon verifies it and takes
// the principal from it instead of believing its caller.
const SubjectTokenHeader = "Verdict-Subject-Token"

type contextKey struct{}

// NewContext returns a copy of ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, contextKey{}, p)
}

// FromContext returns the Principal that Middleware (or NewContext) put in ctx.
func FromContext(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(contextKey{}).(*Principal)
	return p, ok && p != nil
}

// Middleware verifies the bearer token of every request before passing it to next, with the
// Principal in its context; a refused request is answered by WriteError and goes no further.
// resourceMetadata is as for WriteError. refused, if not nil, is told of every refusal before
// it is answered, to count or log it.
func Middleware(v *Verifier, resourceMetadata string, refused func(*http.Request, error), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, err := BearerToken(r)
		var p *Principal
		if err == nil {
			p, err = v.Verify(r.Context(), token)
		}
		if err != nil {
			if refused != nil {
				refused(r, err)
			}
			WriteError(w, resourceMetadata, err, v.requiredScopes(err)...)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
	})
}

// requiredScopes returns the scopes the issuer of an InsufficientScope refusal requires.
func (v *Verifier) requiredScopes(err error) []string {
	var e *Error
	if !errors.As(err, &e) || e.Reason != InsufficientScope {
		return nil
	}
	if is, ok := v.issuers[e.Issuer]; ok {
		return is.cfg.Scopes
	}
	return nil
}
