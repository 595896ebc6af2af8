package executor

import (
	"errors"
	"fmt"
	"maps"
	"net/textproto"
	"net/url"
	"slices"
	"strings"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/loopback"
	"github.com/verdictgate/verdict/keys"
)

// How a user_grant server's client is registered at its authorization server.
const (
	// RegistrationConfigured: the operator registered it; client_id (and client_secret_file
	// for a confidential client) say which.
	RegistrationConfigured = "configured"
	// RegistrationDynamic: the executor registers a client of its own at each connection of an
	// account (RFC 7591), kept with that account's grant.
	RegistrationDynamic = "dynamic"
	// RegistrationMetadataDocument: the client id is a URL of the executor's connect pages,
	// where the authorization server reads the client's metadata.
	RegistrationMetadataDocument = "metadata_document"
)

// Credential is one server's entry of the credentials section: whose authority a call of the
// server carries. The fields beside Mode are token_exchange's and user_grant's, as each says.
type Credential struct {
	Mode string `json:"mode"`
	// Registration is how a user_grant server's client is registered: configured (the
	// default when client_id is set), dynamic or metadata_document.
	Registration string `json:"registration,omitempty"`
	// AuthorizationServer, for user_grant, pins the issuer whose grants are asked for: the
	// server's protected resource metadata must name it. Unset, the server's first one is
	// used, so that the server says where its users are sent to consent.
	AuthorizationServer string `json:"authorization_server,omitempty"`
	// TokenEndpoint is the identity provider's token endpoint, where the exchange is asked for.
	TokenEndpoint string `json:"token_endpoint,omitempty"`
	// ClientID and ClientSecretFile are the executor's own client at the identity provider
	// (client_secret_basic): the exchange is asked for by the executor, not by the user. For a
	// configured user_grant client, they are the client at the server's authorization server
	// (no secret file: a public client).
	ClientID         string `json:"client_id,omitempty"`
	ClientSecretFile string `json:"client_secret_file,omitempty"`
	// Audience and Resource name the server to the identity provider (RFC 8693 audience, RFC
	// 8707 resource): the exchanged token is for it alone. At least one is required. For
	// user_grant, Resource is the resource asked for (default: the server's url), and must be
	// what the server's protected resource metadata says it is.
	Audience string `json:"audience,omitempty"`
	Resource string `json:"resource,omitempty"`
	// Scopes are asked for with the exchange; none asks for the provider's default.
	Scopes []string `json:"scopes,omitempty"`
	// SubjectIssuer is the issuer of the identity section whose access tokens are accepted as
	// subject tokens for this server: the provider the exchange is asked of. A user_grant call
	// needs the user's token of this issuer beside the verdict too.
	SubjectIssuer string `json:"subject_issuer,omitempty"`
	// HeadersForUsers names the headers of the server's servers entry that a user's connection
	// sends too. The entry's headers are the list-only service identity's, so by default a
	// user's connection sends none of them; only headers that carry no secret may be named
	// (checked by secretHeader).
	HeadersForUsers []string `json:"headers_for_users,omitempty"`
}

// userFields reports whether any field of token_exchange or user_grant is set.
func (c *Credential) userFields() bool {
	return c.TokenEndpoint != "" || c.ClientID != "" || c.ClientSecretFile != "" || c.Audience != "" ||
		c.Resource != "" || len(c.Scopes) > 0 || c.SubjectIssuer != "" || len(c.HeadersForUsers) > 0 ||
		c.Registration != "" || c.AuthorizationServer != ""
}

// mode returns the credential mode of server: its entry's, or shared without one.
func (c *Config) mode(server string) string {
	if cr, ok := c.Credentials[server]; ok {
		return cr.Mode
	}
	return api.CredentialShared
}

// validateCredentials reports the problems of the credentials section, each at its key.
func (c *Config) validateCredentials() []error {
	var errs []error
	if c.Identity != nil {
		errs = append(errs, confx.At("identity", c.Identity.Validate()))
	}
	for _, id := range slices.Sorted(maps.Keys(c.Credentials)) {
		cr := c.Credentials[id]
		path := confx.Key("credentials", id)
		srv, ok := c.Servers[id]
		if !ok {
			errs = append(errs, confx.Errorf(path, "names no server of servers"))
		}
		switch cr.Mode {
		case "":
			errs = append(errs, confx.Errorf(confx.Key(path, "mode"), "is required: shared, token_exchange or user_grant"))
		case api.CredentialShared:
			if cr.userFields() {
				errs = append(errs, confx.Errorf(path, "registration, authorization_server, token_endpoint, client_id, client_secret_file, audience, resource, scopes, "+
					"subject_issuer and headers_for_users apply only to modes token_exchange and user_grant"))
			}
		case api.CredentialTokenExchange, api.CredentialUserGrant:
			if ok && len(srv.Command) > 0 {
				errs = append(errs, confx.Errorf(path, "%s needs a url server: a stdio server is sent no access token", cr.Mode))
			}
			if ok && srv.URL != "" {
				if err := checkUserURL(srv.URL); err != nil {
					errs = append(errs, confx.Errorf(confx.Key(confx.Key("servers", id), "url"), "%v", err))
				}
			}
			if cr.Mode == api.CredentialTokenExchange {
				errs = append(errs, c.validateExchange(path, &cr)...)
			} else {
				errs = append(errs, c.validateUserGrant(path, &cr)...)
			}
			errs = append(errs, checkHeadersForUsers(path, &cr, srv.Headers)...)
		default:
			errs = append(errs, confx.Errorf(confx.Key(path, "mode"), "%q: want shared, token_exchange or user_grant", cr.Mode))
		}
	}
	errs = append(errs, c.validateConnect()...)
	return errs
}

func (c *Config) validateExchange(path string, cr *Credential) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, confx.Errorf(confx.Key(path, key), format, args...))
	}
	if err := checkEndpoint(cr.TokenEndpoint); err != nil {
		bad("token_endpoint", "%v", err)
	}
	if cr.ClientID == "" {
		bad("client_id", "is required: the executor's client at the identity provider")
	}
	if cr.ClientSecretFile == "" {
		bad("client_secret_file", "is required: the file holding the executor's client secret")
	}
	if cr.Audience == "" && cr.Resource == "" {
		errs = append(errs, confx.Errorf(path, "audience or resource is required: the server the exchanged token is for"))
	}
	if cr.Audience != "" && strings.TrimSpace(cr.Audience) != cr.Audience {
		bad("audience", "%q has surrounding white space", cr.Audience)
	}
	if cr.Registration != "" || cr.AuthorizationServer != "" {
		errs = append(errs, confx.Errorf(path, "registration and authorization_server apply only to mode user_grant"))
	}
	errs = append(errs, checkResourceAndScopes(path, cr)...)
	switch i := c.subjectIssuer(path, cr, &errs); {
	case i < 0:
	case c.Identity.Issuers[i].Introspection != nil && !subjectIsSub(c.Identity.Issuers[i]):
		// The exchanged token is the account's (the token's sub), and kept for it: an
		// introspected token's sub is not at hand when the principal is another claim.
		bad("subject_issuer", "%q introspects opaque tokens and names its principals by %s: the executor could not tell "+
			"whose account (sub) such a token is, which its exchanged token is kept for; use principal_claim sub, or no introspection",
			cr.SubjectIssuer, c.Identity.Issuers[i].PrincipalClaim)
	}
	return errs
}

// validateUserGrant reports the problems of a user_grant entry at path.
func (c *Config) validateUserGrant(path string, cr *Credential) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, confx.Errorf(confx.Key(path, key), format, args...))
	}
	if cr.TokenEndpoint != "" || cr.Audience != "" {
		errs = append(errs, confx.Errorf(path, "token_endpoint and audience apply only to mode token_exchange: "+
			"a user_grant server's authorization server is found from the server's own metadata (RFC 9728)"))
	}
	switch cr.registration() {
	case RegistrationConfigured:
		if cr.ClientID == "" {
			bad("client_id", "is required with registration configured: the executor's client at the server's authorization server")
		}
	case RegistrationDynamic, RegistrationMetadataDocument:
		if cr.ClientID != "" || cr.ClientSecretFile != "" {
			errs = append(errs, confx.Errorf(path, "client_id and client_secret_file apply only to registration configured: "+
				"with %s the client is the executor's own making", cr.Registration))
		}
	case "":
		bad("registration", "is required without client_id: configured (with client_id), dynamic or metadata_document")
	default:
		bad("registration", "%q: want configured, dynamic or metadata_document", cr.Registration)
	}
	if cr.AuthorizationServer != "" {
		if err := loopback.SecureURL(cr.AuthorizationServer); err != nil {
			bad("authorization_server", "%v", secureFor(err, "the users are sent there to consent, and the codes and tokens come from there"))
		}
	}
	errs = append(errs, checkResourceAndScopes(path, cr)...)
	c.subjectIssuer(path, cr, &errs)
	if c.Vault == nil {
		errs = append(errs, confx.Errorf(path, "user_grant needs the vault section, where the users' grants are kept"))
	}
	if c.Connect == nil {
		errs = append(errs, confx.Errorf(path, "user_grant needs the connect section, where the users connect their accounts"))
	}
	return errs
}

// registration is the entry's registration, configured when unset beside a client_id.
func (c *Credential) registration() string {
	if c.Registration == "" && c.ClientID != "" {
		return RegistrationConfigured
	}
	return c.Registration
}

// checkResourceAndScopes reports a resource that is not an RFC 8707 one and a scope that is
// not an RFC 6749 scope token.
func checkResourceAndScopes(path string, cr *Credential) []error {
	var errs []error
	if cr.Resource != "" {
		if u, err := url.Parse(cr.Resource); err != nil || u.Scheme == "" || u.Fragment != "" || strings.Contains(cr.Resource, "#") {
			errs = append(errs, confx.Errorf(confx.Key(path, "resource"), "%q is not an absolute URI without a fragment (RFC 8707)", cr.Resource))
		}
	}
	for i, s := range cr.Scopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			errs = append(errs, confx.Errorf(confx.Index(confx.Key(path, "scopes"), i), "%q is not a scope token (RFC 6749 §3.3)", s))
		}
	}
	return errs
}

// subjectIssuer returns the index in the identity section of cr's subject_issuer, or -1 after
// appending to errs why there is none.
func (c *Config) subjectIssuer(path string, cr *Credential, errs *[]error) int {
	switch {
	case c.Identity == nil:
		*errs = append(*errs, confx.Errorf(path, "%s needs the identity section, which verifies the users' tokens that come with the verdicts", cr.Mode))
	case cr.SubjectIssuer == "":
		*errs = append(*errs, confx.Errorf(confx.Key(path, "subject_issuer"), "is required: the issuer of the identity section whose users' tokens come with the verdicts"))
	default:
		i := slices.IndexFunc(c.Identity.Issuers, func(is identity.Issuer) bool { return is.Issuer == cr.SubjectIssuer })
		if i < 0 {
			*errs = append(*errs, confx.Errorf(confx.Key(path, "subject_issuer"), "%q is not an issuer of the identity section", cr.SubjectIssuer))
		}
		return i
	}
	return -1
}

// subjectIsSub reports whether is names its principals by the tokens' sub.
func subjectIsSub(is identity.Issuer) bool {
	return is.PrincipalClaim == "" || is.PrincipalClaim == identity.DefaultPrincipalClaim
}

// checkHeadersForUsers reports the names of cr.HeadersForUsers that are not headers of the
// server's entry, or that may carry a secret: the entry's headers are the list-only service
// identity's, and a user's connection sends its own token and no one else's credential.
func checkHeadersForUsers(path string, cr *Credential, headers map[string]string) []error {
	var errs []error
	for i, h := range cr.HeadersForUsers {
		at := confx.Index(confx.Key(path, "headers_for_users"), i)
		switch {
		case secretHeader(h):
			errs = append(errs, confx.Errorf(at, "%q may carry a credential, and a user's connection sends only the user's own token; "+
				"name only headers that carry no secret", h))
		case !hasHeader(headers, h):
			errs = append(errs, confx.Errorf(at, "%q is not a header of the server's servers entry", h))
		}
	}
	return errs
}

// secretHeader reports whether the header name may carry a credential: Authorization,
// Proxy-Authorization, Cookie, and any name ending in key, token, secret, password, auth,
// authorization, cookie or credential(s), as X-Api-Key and X-Auth-Token do. Such a header is
// never named in headers_for_users.
func secretHeader(name string) bool {
	n := strings.ToLower(name)
	return slices.ContainsFunc([]string{"key", "token", "secret", "password", "auth", "authorization", "cookie", "credential", "credentials"},
		func(suffix string) bool { return strings.HasSuffix(n, suffix) })
}

// hasHeader reports whether headers has name, header names being case-insensitive.
func hasHeader(headers map[string]string, name string) bool {
	for k := range headers {
		if textproto.CanonicalMIMEHeaderKey(k) == textproto.CanonicalMIMEHeaderKey(name) {
			return true
		}
	}
	return false
}

// checkEndpoint accepts the token endpoint (loopback.SecureURL): the client secret and the
// users' tokens are sent there.
func checkEndpoint(s string) error {
	if s == "" {
		return errors.New("is required: the identity provider's token endpoint")
	}
	return secureFor(loopback.SecureURL(s), "the client secret and the users' tokens are sent there")
}

// checkUserURL accepts the url of a token_exchange server (loopback.SecureURL), since every
// request of a user's connection carries the user's exchanged token.
func checkUserURL(s string) error {
	return secureFor(loopback.SecureURL(s), "a token_exchange server is sent the users' exchanged tokens")
}

// secureFor says why a URL refused for its scheme must be secure.
func secureFor(err error, why string) error {
	if errors.Is(err, loopback.ErrPlain) {
		return fmt.Errorf("%w: %s", err, why)
	}
	return err
}

// maxSecretFile bounds a client secret file: a secret is short, and a larger file is a mistake.
const maxSecretFile = 4 << 10

// readSecret reads a credentials entry's client secret file as the project reads a private
// key: a file others could read or write is refused (keys.CheckPrivate), and so is one over
// maxSecretFile. Surrounding white space is not part of the secret.
func readSecret(server, path string) (string, error) {
	return readSecretAt(confx.Key(confx.Key("credentials", server), "client_secret_file"), path)
}

// readSecretAt is readSecret of the secret file at the config key key.
func readSecretAt(key, path string) (string, error) {
	b, err := keys.ReadPrivate(path, maxSecretFile)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s %s is empty", key, path)
	}
	return secret, nil
}
