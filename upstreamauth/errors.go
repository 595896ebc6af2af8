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

// The package's errors. Each is wrapped with what it is about; none quotes a secret.
var (
	// ErrInsecureURL: a URL is neither https nor http on a loopback host, has no host, or has a
	// user or a fragment; or it is http where what named it is https.
	ErrInsecureURL = errors.New("upstreamauth: not a URL anything may be sent to")
	// ErrNotFound: no metadata document at any of the well-known locations.
	ErrNotFound = errors.New("upstreamauth: no metadata document")
	// ErrMetadata: a metadata document is not JSON of its kind, or lacks what a client needs.
	ErrMetadata = errors.New("upstreamauth: the metadata document is not usable")
	// ErrResourceMismatch: a protected resource's metadata is for another resource.
	ErrResourceMismatch = errors.New("upstreamauth: the metadata is another resource's")
	// ErrIssuerMismatch: an authorization server's metadata, or an authorization response,
	// names another issuer.
	ErrIssuerMismatch = errors.New("upstreamauth: another issuer")
	// ErrNoPKCE: the authorization server does not list S256 in
	// code_challenge_methods_supported.
	ErrNoPKCE = errors.New("upstreamauth: the authorization server does not say it supports PKCE with S256")
	// ErrNoResourceMetadata: a WWW-Authenticate header has no Bearer challenge with a
	// resource_metadata parameter, or cannot be read.
	ErrNoResourceMetadata = errors.New("upstreamauth: no resource_metadata in the challenge")
	// ErrNoRegistration: the authorization server has no registration endpoint.
	ErrNoRegistration = errors.New("upstreamauth: the authorization server has no registration endpoint")
	// ErrNoClientIDMetadata: the authorization server does not take client ID metadata
	// documents.
	ErrNoClientIDMetadata = errors.New("upstreamauth: the authorization server does not take client ID metadata documents")
	// ErrNoRevocation: the authorization server has no revocation endpoint.
	ErrNoRevocation = errors.New("upstreamauth: the authorization server has no revocation endpoint")
	// ErrStateMismatch: the callback's state is not the pending flow's.
	ErrStateMismatch = errors.New("upstreamauth: the callback's state is not the flow's")
	// ErrCallback: the callback has no code, or a parameter more than once.
	ErrCallback = errors.New("upstreamauth: the callback is malformed")
	// ErrRevoked: the refresh token is revoked, expired or spent (invalid_grant): the user
	// consents again.
	ErrRevoked = errors.New("upstreamauth: the grant is revoked or expired")
	// ErrAnswer: an endpoint answered with something other than what it is for: a redirect,
	// a status without an OAuth error, a token no header can carry, a registration of
	// another client than the one asked for.
	ErrAnswer = errors.New("upstreamauth: the answer is not usable")
	// ErrUnreachable: a request got no answer (a connection refused, a timeout, a malformed
	// response).
	ErrUnreachable = errors.New("upstreamauth: no answer")
	// ErrInvalid: an argument breaks the package's rules (a Flow, a registration request).
	ErrInvalid = errors.New("upstreamauth: invalid argument")
)

// The endpoints an Error is from.
const (
	EndpointAuthorization = "authorization"
	EndpointToken         = "token"
	EndpointRegistration  = "registration"
	EndpointRevocation    = "revocation"
)

// Bounds of an Error's Code and Description, in characters: an answer cannot write a log line
// of its own length.
const (
	maxCode        = 40
	maxDescription = 200
	maxDetail      = 300
)

// An Error is an OAuth error an authorization server answered with (RFC 6749 §4.1.2.1 and
// §5.2, RFC 7591 §3.2.2, RFC 7009 §2.2.1): the error parameter of a callback, or the error
// of an endpoint's answer. Code and Description are the server's words with every secret
// the request carried replaced by [redacted], and cut short; Error quotes them.
type Error struct {
	Endpoint    string // EndpointAuthorization, EndpointToken, EndpointRegistration or EndpointRevocation
	Status      int    // the HTTP status; 0 for a callback's
	Code        string // invalid_grant, access_denied, invalid_target, …
	Description string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("upstreamauth: the %s endpoint refused: %q", e.Endpoint, e.Code)
	if e.Description != "" {
		s += fmt.Sprintf(": %q", e.Description)
	}
	return s
}

// oauthError is the Error of endpoint for an answer's code and description, with secrets cut
// out.
func oauthError(endpoint string, status int, code, description string, secrets []string) *Error {
	return &Error{
		Endpoint:    endpoint,
		Status:      status,
		Code:        cut(scrub(code, secrets), maxCode),
		Description: cut(scrub(description, secrets), maxDescription),
	}
}

// redacted stands for a secret in an error, a printed Client or Pending.
const redacted = "[redacted]"

// scrub replaces in s every secret, as sent and as form-encoded (which is how a form body or
// HTTP Basic carries it, and how a server may quote it back), longest first, so that no
// secret survives inside another's replacement.
func scrub(s string, secrets []string) string {
	var all []string
	for _, sec := range secrets {
		if sec != "" {
			all = append(all, sec, url.QueryEscape(sec))
		}
	}
	slices.SortFunc(all, func(a, b string) int { return len(b) - len(a) })
	for _, sec := range all {
		s = strings.ReplaceAll(s, sec, redacted)
	}
	return s
}

// cut returns s cut to n characters, with … in place of the rest.
func cut(s string, n int) string {
	// range counts a byte that is not UTF-8 as one character, as utf8.RuneCountInString does.
	for i := range s {
		if n == 0 {
			return s[:i] + "…"
		}
		n--
	}
	return s
}

// unreachable is the error of a request to what that got no answer: the context's own error
// when it ended, else the transport's, which may quote what the server sent (a malformed
// status line), so cut short and with secrets cut out.
func unreachable(what string, err error, secrets []string) error {
	for _, ce := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, ce) {
			return fmt.Errorf("%w: %s: %w", ErrUnreachable, what, ce)
		}
	}
	return fmt.Errorf("%w: %s: %s", ErrUnreachable, what, cut(scrub(err.Error(), secrets), maxDetail))
}

// endpointError is the error of a registration or revocation endpoint's answer with status
// other than success: its OAuth error when it is JSON with one, else its status alone.
func endpointError(endpoint string, resp *http.Response, body []byte, secrets []string) error {
	var e struct {
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	if isJSON(resp) && json.Unmarshal(body, &e) == nil && e.Error != "" {
		return oauthError(endpoint, resp.StatusCode, e.Error, e.ErrorDescription, secrets)
	}
	return fmt.Errorf("%w: the %s endpoint answered %s without an OAuth error (redirects are not followed)", ErrAnswer, endpoint, status(resp))
}
