package mcpgate

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/loopback"
)

// Identity is the identity section: with it the HTTP endpoint is an OAuth 2.1 resource server
// (docs/identity.md) that takes access tokens of the configured issuers, and the principal of a
// request is the token's (identity.Principal.ID, issuer-qualified).
type Identity struct {
	// Resource is the gateway's resource identifier (RFC 8707), the URL hosts connect to: its
	// metadata (RFC 9728) is served at the well-known URL derived from it. Default: the
	// audience the issuers name, when they all name the same one.
	Resource string            `json:"resource,omitempty"`
	Issuers  []identity.Issuer `json:"issuers"`
}

func (c *Identity) config() identity.Config { return identity.Config{Issuers: c.Issuers} }

// resource returns the resource identifier: Resource, or the audience every issuer names.
func (c *Identity) resource() string {
	if c.Resource != "" || len(c.Issuers) == 0 {
		return c.Resource
	}
	aud := c.Issuers[0].Audience
	if slices.ContainsFunc(c.Issuers[1:], func(is identity.Issuer) bool { return is.Audience != aud }) {
		return ""
	}
	return aud
}

// validate reports the section's problems, each at its key under identity.
func (c *Identity) validate() []error {
	cfg := c.config()
	errs := []error{confx.At("identity", cfg.Validate())}
	res := c.resource()
	switch {
	case len(c.Issuers) == 0:
		// identity.Config.Validate says an issuer is required; no resource can be checked.
	case res == "":
		errs = append(errs, confx.Errorf("identity.resource", "is required when the issuers name different audiences"))
	default:
		u, err := url.Parse(res)
		switch {
		case err != nil || u.Host == "" || u.Fragment != "" || u.RawQuery != "" || u.User != nil:
			errs = append(errs, confx.Errorf("identity.resource", "%q is not an absolute URL with a host and no user, query or fragment", res))
		case u.Scheme != "https" && !(u.Scheme == "http" && loopback.Host(u.Hostname())):
			errs = append(errs, confx.Errorf("identity.resource", "%q must be an https URL (http only on a loopback host)", res))
		case !slices.ContainsFunc(c.Issuers, func(is identity.Issuer) bool { return is.Audience == res }):
			// Its metadata would name no authorization server: no host could learn where to
			// get a token.
			errs = append(errs, confx.Errorf("identity.resource", "%q is the audience of no issuer", res))
		}
	}
	return errs
}

// checkScopes reports a tools entry's scopes that are no scope tokens, or scopes given without
// an identity section, whose tokens alone carry scopes.
func checkScopes(path string, scopes []string, withIdentity bool) []error {
	var errs []error
	if len(scopes) > 0 && !withIdentity {
		errs = append(errs, confx.Errorf(confx.Key(path, "scopes"), "needs the identity section: static tokens grant no scopes"))
	}
	for i, s := range scopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			errs = append(errs, confx.Errorf(confx.Index(confx.Key(path, "scopes"), i), "%q is not a scope token (RFC 6749 §3.3)", s))
		}
	}
	return errs
}

// resourceServer is the gateway's side of OAuth: the verifier of access tokens and what it
// serves and answers with.
type resourceServer struct {
	verifier    *identity.Verifier
	cfg         identity.Config
	resource    string
	metadataURL string // where metadata is served (RFC 9728 §3.1)
}

func newResourceServer(c *Identity, opts ...identity.Option) (*resourceServer, error) {
	cfg := c.config()
	v, err := identity.NewVerifier(cfg, opts...)
	if err != nil {
		return nil, err
	}
	rs := &resourceServer{verifier: v, cfg: cfg, resource: c.resource()}
	if rs.metadataURL, err = identity.MetadataURL(rs.resource); err != nil {
		return nil, fmt.Errorf("identity.resource: %w", err)
	}
	return rs, nil
}

// register serves the resource's metadata at the well-known URL, and also at the bare
// well-known path when the resource has a path, and at the well-known path followed by each
// server's own endpoint (servers: "/mcp/<id>"): a client that looks there finds it too. One
// resource covers every endpoint of the gateway: a token for it is good at each.
func (rs *resourceServer) register(mux *http.ServeMux, endpoints []string) {
	md := rs.cfg.ResourceMetadata(rs.resource)
	u, _ := url.Parse(rs.metadataURL) // MetadataURL made it
	paths := map[string]bool{identity.WellKnownPath: true, u.Path: true}
	for _, p := range endpoints {
		paths[identity.WellKnownPath+p] = true
	}
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		mux.Handle(p, md)
	}
}

// authReasons are the labels of mcpgate_auth_refusals_total: the identity package's reasons,
// insufficient_scope among them for the calls a tool's scopes refuse.
func authReasons() []string {
	var out []string
	for _, r := range identity.Reasons() {
		out = append(out, string(r))
	}
	return out
}

type subjectTokenKey struct{}

// subjectToken returns the access token the request that ctx serves was authenticated by.
func subjectToken(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(subjectTokenKey{}).(string)
	return t, ok && t != ""
}

// authenticate lets through only requests with an access token the verifier accepts, with the
// principal in their context; any other is answered as identity.WriteError says (401, 403
// insufficient_scope, 503 when the issuer cannot be reached) and counted by reason. There is no
// fallback to static tokens: they are exclusive with the identity section.
func (g *Gateway) authenticate(next http.Handler) http.Handler {
	return identity.Middleware(g.rs.verifier, g.rs.metadataURL, g.authRefused, next)
}

// authRefused counts and logs a request identity.Middleware refused.
func (g *Gateway) authRefused(r *http.Request, err error) {
	reason := cmp.Or(identity.ReasonOf(err), identity.TokenMalformed)
	g.metrics.authRefused.WithLabelValues(string(reason)).Inc()
	level := slog.LevelInfo
	if reason == identity.IdPUnavailable {
		level = slog.LevelWarn // the issuer is down: every user is locked out
	}
	g.log.Log(r.Context(), level, "request refused", "reason", string(reason), "error", err.Error())
}

// tokenInfo hands the principal authenticate found to the MCP SDK, which passes it to the tool
// handlers as req.Extra.TokenInfo. Expiry is identity's to check (with its skew), so none is
// given to the SDK to check again.
func tokenInfo(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
	p, ok := identity.FromContext(r.Context())
	token, _ := identity.BearerToken(r) // the one authenticate verified
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: p.ID, Scopes: p.Scopes, Extra: map[string]any{extraSubjectToken: token}}, nil
}

// extraSubjectToken is the TokenInfo.Extra key of the access token, forwarded to verdictd and
// the executor.
const extraSubjectToken = "io.verdict/subject_token"

// httpTool wraps the HTTP handler of the tool key ("server/tool"): with an identity section,
// a call is refused unless the token grants every scope the tools entry requires, and the
// token rides along in ctx for the verdictd client to forward. The tool stays listed: a host
// is told which scope is missing rather than find the tool gone.
func (g *Gateway) httpTool(key string, h mcp.ToolHandler) mcp.ToolHandler {
	if g.rs == nil {
		return h
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var ti *auth.TokenInfo
		if req.Extra != nil {
			ti = req.Extra.TokenInfo
		}
		if ti == nil {
			return h(ctx, req) // call refuses a request without a principal
		}
		missing := slices.DeleteFunc(slices.Clone(g.cfg.Tools[key].Scopes), func(s string) bool { return slices.Contains(ti.Scopes, s) })
		if len(missing) > 0 {
			g.metrics.authRefused.WithLabelValues(string(identity.InsufficientScope)).Inc()
			g.log.Info("call refused", "reason", api.ReasonInsufficientScope, "tool", key, "missing", missing)
			return toolError(api.ReasonInsufficientScope, "Your sign-in does not allow this action (it lacks the permission "+
				strings.Join(missing, ", ")+")."+nothingDone, api.MetaRequiredScopes, g.cfg.Tools[key].Scopes), nil
		}
		return h(withSubjectToken(ctx, true, ti), req)
	}
}

// withSubjectToken is ctx with the access token ti was made from, when the gateway has an
// identity section (on) and ti carries one, for forwardSubject to send.
func withSubjectToken(ctx context.Context, on bool, ti *auth.TokenInfo) context.Context {
	if !on || ti == nil {
		return ctx
	}
	if tok, _ := ti.Extra[extraSubjectToken].(string); tok != "" {
		ctx = context.WithValue(ctx, subjectTokenKey{}, tok)
	}
	return ctx
}

// forwardSubject is a transport that adds the access token of the request being served to the
// gateway's requests to one daemon (identity.SubjectTokenHeader): to verdictd, which takes the
// principal from the token rather than from the gateway, and to the executor, which exchanges it
// for the user's own token at a server called with the user's authority (docs/credentials.md).
// Only the daemon's origin gets it: a redirect elsewhere does not carry the user's token along.
type forwardSubject struct {
	base   http.RoundTripper
	origin string // scheme://host of the daemon
}

func (t forwardSubject) RoundTrip(r *http.Request) (*http.Response, error) {
	if tok, ok := subjectToken(r.Context()); ok && r.URL.Scheme+"://"+r.URL.Host == t.origin {
		r = r.Clone(r.Context())
		r.Header.Set(identity.SubjectTokenHeader, tok)
	}
	return t.base.RoundTrip(r)
}

// forwardingClient returns a copy of hc whose requests to base, the url of the daemon name,
// carry the subject token.
func forwardingClient(hc *http.Client, name, base string) (*http.Client, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("%s.url: %w", name, err)
	}
	c := *hc
	c.Transport = forwardSubject{base: cmp.Or(hc.Transport, http.DefaultTransport), origin: u.Scheme + "://" + u.Host}
	return &c, nil
}
