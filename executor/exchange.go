package executor

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/pkg/client/tokenexchange"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/oauth2"

	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdict"
)

// Bounds of what the executor holds for the principals of token_exchange servers.
const (
	// MaxUserTokens bounds the exchanged tokens kept, one per principal and server: past it the
	// one that expires first is dropped (its principal's next call exchanges again).
	MaxUserTokens = 4096
	// MaxUserConnections bounds the principals' own connections to token_exchange servers, all
	// servers together: past it the least recently used idle one is closed, and a call that
	// finds every one in use is not sent (upstream_unavailable).
	MaxUserConnections = 256
	// UserConnectionIdle is how long a principal's connection stays open unused.
	UserConnectionIdle = 5 * time.Minute
	// tokenMargin is added to call_timeout: an exchanged token with less than that left is
	// exchanged again before the call, so that no call outlives its token.
	tokenMargin = 10 * time.Second
	// exchangeTimeout bounds one exchange at the identity provider.
	exchangeTimeout = 10 * time.Second
)

// credKey names one account's credential at one server: the verdict's principal, and the
// account whose exchanged token it is, the user token's issuer and sub. The principal claim
// need not tell accounts apart (an email, a username may name two), and the identity provider
// exchanges for the token's sub: so the sub is part of the key of the cache and of the
// connections, and two accounts of one principal share neither a token nor a connection.
type credKey struct {
	principal, server string
	issuer, subject   string
}

// callCredential is the credential a call carries: its kind, and for a token_exchange call the
// key of the account whose own token and connection it takes.
type callCredential struct {
	kind string
	key  credKey // the zero key for shared: the catalog's connection
}

// exchanger asks one token_exchange server's identity provider for the principals' tokens.
type exchanger struct {
	server string
	cfg    Credential
	te     tokenexchange.TokenExchanger
	// conn is the server's config for a principal's connection: of its headers only those
	// the entry's headers_for_users names (userHeaders); Authorization is the connection's
	// own transport's.
	conn upstream.Config
	// principalIsSub: the subject issuer's principal claim is sub, so a principal's subject
	// is the token's sub.
	principalIsSub bool
}

// newExchangers reads the token_exchange entries' secrets and makes their exchangers.
func newExchangers(ctx context.Context, cfg *Config) (map[string]*exchanger, error) {
	out := map[string]*exchanger{}
	// The token endpoint is configured, never discovered, and redirects are not followed: the
	// client secret and the users' tokens go to the one URL the operator wrote.
	hc := &http.Client{Timeout: exchangeTimeout, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	for id, cr := range cfg.Credentials {
		if cr.Mode != ModeTokenExchange {
			continue
		}
		secret, err := readSecret(id, cr.ClientSecretFile)
		if err != nil {
			return nil, err
		}
		te, err := tokenexchange.NewTokenExchangerClientCredentials(ctx, cr.SubjectIssuer, cr.ClientID, secret,
			tokenexchange.WithHTTPClient(hc), tokenexchange.WithStaticTokenEndpoint(cr.SubjectIssuer, cr.TokenEndpoint))
		if err != nil {
			return nil, fmt.Errorf("credentials.%s: %w", id, err)
		}
		conn := cfg.Servers[id]
		conn.Headers = userHeaders(conn.Headers, cr.HeadersForUsers)
		x := &exchanger{server: id, cfg: cr, te: te, conn: conn}
		for _, is := range cfg.Identity.Issuers {
			if is.Issuer == cr.SubjectIssuer {
				x.principalIsSub = subjectIsSub(is)
			}
		}
		out[id] = x
	}
	return out, nil
}

// userHeaders returns the headers of a server's entry that a user's connection sends: those
// allow names, and none that may carry a credential whatever allow says. The entry's headers
// are the list-only service identity's (its token, an API key, a cookie): a user's call
// carries the user's own authority and no one else's.
func userHeaders(headers map[string]string, allow []string) map[string]string {
	out := map[string]string{}
	for k, v := range headers {
		if secretHeader(k) {
			continue
		}
		if slices.ContainsFunc(allow, func(a string) bool { return textproto.CanonicalMIMEHeaderKey(a) == textproto.CanonicalMIMEHeaderKey(k) }) {
			out[k] = v
		}
	}
	return out
}

// credential returns the credential the call of a verified verdict carries: the server's own
// for a shared server; for a token_exchange server the principal's, once the user's token sent
// with the verdict has shown that the principal is the verdict's and the principal's token for
// the server is at hand (exchanged now, or earlier and still good). All of it happens before the
// nonce is consumed: a refusal spends nothing. subjects are the request's subject token headers.
func (s *Service) credential(ctx context.Context, c *verdict.Claims, subjects []string, token, argsDigest string, now time.Time) (callCredential, *outcome) {
	x := s.exchangers[c.Server]
	if x == nil {
		return callCredential{kind: ModeShared}, nil
	}
	ctx, span := s.tr.Start(ctx, "credential", trace.SpanKindInternal)
	defer span.End()
	refuse := func(status int, reason, message, subject string) (callCredential, *outcome) {
		o, _ := s.refusalAs(ctx, status, reason, token, argsDigest, now, c, subject)
		o.message = "verdict refused: " + reason + ": " + message
		return callCredential{}, &o
	}
	var tok string
	switch len(subjects) {
	case 0:
		return refuse(http.StatusForbidden, ReasonCredentialRequired,
			"the tool's server is called with the user's own authority, and no access token of the user came with the verdict; nothing was spent", "")
	case 1:
		tok = strings.TrimSpace(subjects[0])
	default:
		return refuse(http.StatusForbidden, ReasonCredentialInvalid, "more than one "+identity.SubjectTokenHeader+" header; nothing was spent", "")
	}
	p, err := s.subjects.Verify(ctx, tok)
	if err != nil {
		reason := identity.ReasonOf(err)
		if reason == "" || reason == identity.TokenMissing {
			reason = identity.TokenMalformed
		}
		s.log.LogAttrs(ctx, slog.LevelWarn, "subject token refused", slog.String("verdict_id", c.ID),
			slog.String("server", c.Server), slog.String("reason", string(reason)), slog.String("error", err.Error()))
		if reason == identity.IdPUnavailable {
			return refuse(http.StatusServiceUnavailable, ReasonCredentialInvalid,
				"the user's access token could not be verified: its issuer cannot be reached; nothing was spent, send it again", "")
		}
		return refuse(http.StatusForbidden, ReasonCredentialInvalid, "the user's access token is refused ("+string(reason)+"); nothing was spent", "")
	}
	if p.ID != c.Subject {
		// Whose token it was is logged for the operator; the record is the verdict's principal's.
		s.log.LogAttrs(ctx, slog.LevelWarn, "subject token of another principal", slog.String("verdict_id", c.ID),
			slog.String("server", c.Server), slog.String("principal", c.Subject), slog.String("token_principal", p.ID))
		return refuse(http.StatusForbidden, ReasonCredentialForeign,
			"the access token sent is another principal's than the verdict's; nothing was spent", "")
	}
	if p.Issuer != x.cfg.SubjectIssuer {
		return refuse(http.StatusForbidden, ReasonCredentialInvalid,
			"the user's access token is of an issuer whose tokens this server's exchange does not take; nothing was spent", "")
	}
	sub, err := x.tokenSubject(p, tok)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "subject token names no account", slog.String("verdict_id", c.ID),
			slog.String("server", c.Server), slog.String("principal", c.Subject), slog.String("error", err.Error()))
		return refuse(http.StatusForbidden, ReasonCredentialInvalid,
			"the user's access token names no account (sub) the identity provider could exchange it for; nothing was spent", "")
	}
	key := credKey{principal: c.Subject, server: c.Server, issuer: p.Issuer, subject: sub}
	if status, err := s.userToken(ctx, x, key, tok); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "token exchange failed", slog.String("verdict_id", c.ID),
			slog.String("server", c.Server), slog.String("principal", c.Subject), slog.String("error", err.Error()))
		msg := "the identity provider refused to exchange the user's token for one of the tool's server; nothing was spent"
		if status != http.StatusForbidden {
			msg = "the identity provider could not be asked for the user's token for the tool's server; nothing was spent, send it again"
		}
		return refuse(status, ReasonCredentialExchangeFailed, msg, sub)
	}
	return callCredential{kind: ModeTokenExchange, key: key}, nil
}

// tokenSubject returns the sub of the user's token tok, which verified as p: the account the
// identity provider exchanges the token for. With the principal claim sub it is the
// principal's subject; with another claim it is read from the token's payload, whose
// signature p's verification checked. An introspected token's sub is not at hand (the config
// refuses that pair, see validateExchange), and a token without one names no account: both
// are refused.
func (x *exchanger) tokenSubject(p *identity.Principal, tok string) (string, error) {
	if x.principalIsSub {
		return p.Subject, nil
	}
	if p.Method != identity.MethodJWT {
		return "", fmt.Errorf("a token verified by %s carries no sub the executor can read", p.Method)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", errors.New("not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("payload: %v", err)
	}
	var claims struct {
		Subject string `json:"sub"`
	}
	if err := json.Unmarshal(b, &claims); err != nil {
		return "", fmt.Errorf("payload: %v", err)
	}
	if claims.Subject == "" {
		return "", errors.New("no sub")
	}
	return claims.Subject, nil
}

// exchangeError is a failed exchange, described without anything the identity provider sent
// beside its error code and description: an answer that is not one could hold a token.
type exchangeError struct {
	status int
	msg    string
}

func (e *exchangeError) Error() string { return e.msg }

// userToken makes sure key's token is in the cache with at least the margin left, exchanging
// subjectToken for it when it is not. On error it returns the status of the refusal: 403 when
// the identity provider refused, 503 when it could not be asked or its answer was not a token.
func (s *Service) userToken(ctx context.Context, x *exchanger, key credKey, subjectToken string) (int, error) {
	now := s.now()
	margin := s.cfg.CallTimeout.Or(DefaultCallTimeout) + tokenMargin
	if _, exp, ok := s.tokens.get(key, now); ok && now.Add(margin).Before(exp) {
		return 0, nil
	}
	var audience, resource []string
	if x.cfg.Audience != "" {
		audience = []string{x.cfg.Audience}
	}
	if x.cfg.Resource != "" {
		resource = []string{x.cfg.Resource}
	}
	resp, err := tokenexchange.ExchangeToken(ctx, x.te, subjectToken, oidc.AccessTokenType, "", "",
		resource, audience, x.cfg.Scopes, oidc.AccessTokenType)
	if err != nil {
		e := describeExchangeError(err, subjectToken)
		return e.status, e
	}
	if err := checkExchanged(resp); err != nil {
		return http.StatusServiceUnavailable, err
	}
	// No lifetime given: the token serves this call alone.
	exp := now.Add(margin)
	if resp.ExpiresIn > 0 {
		exp = now.Add(time.Duration(resp.ExpiresIn) * time.Second)
	}
	s.tokens.put(key, resp.AccessToken, exp, now)
	return 0, nil
}

// describeExchangeError keeps of a failed exchange what may be logged: the OAuth error code and
// description of a refusal, the cause of a request that got no answer, or only that the answer
// was not a token response (the library's message for that quotes the answer's body).
// A description that quotes the user's token back has it cut out.
func describeExchangeError(err error, subjectToken string) *exchangeError {
	var oe *oidc.Error
	if errors.As(err, &oe) {
		status := http.StatusForbidden
		if oe.ErrorType == oidc.ServerError || oe.ErrorType == "temporarily_unavailable" || oe.ErrorType == oidc.InvalidClient {
			// The executor's own client failing, or the provider's trouble, is not a refusal of
			// the user: it is the operator's to fix, and the verdict may be sent again.
			status = http.StatusServiceUnavailable
		}
		desc := oe.Description
		if subjectToken != "" {
			desc = strings.ReplaceAll(desc, subjectToken, "[redacted]")
		}
		// Both are the provider's words, quoted and cut short: neither ends the log line's
		// value or writes one of its own, whatever the answer held.
		return &exchangeError{status: status, msg: fmt.Sprintf("token endpoint refused: %.40q: %.200q", string(oe.ErrorType), desc)}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return &exchangeError{status: http.StatusServiceUnavailable, msg: "token endpoint not reached: " + ue.Err.Error()}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &exchangeError{status: http.StatusServiceUnavailable, msg: "token endpoint not reached: " + err.Error()}
	}
	return &exchangeError{status: http.StatusServiceUnavailable, msg: "the token endpoint's answer is not a token response"}
}

// checkExchanged refuses an exchange answer that is not a bearer access token the server can
// be sent in a header.
func checkExchanged(resp *oidc.TokenExchangeResponse) error {
	bad := func(why string) error {
		return &exchangeError{status: http.StatusServiceUnavailable, msg: "the token endpoint's answer is not usable: " + why}
	}
	switch {
	case resp.AccessToken == "":
		return bad("no access_token")
	case !strings.EqualFold(resp.TokenType, oidc.BearerToken):
		return bad(fmt.Sprintf("token_type %.40q, want Bearer", resp.TokenType))
	case resp.IssuedTokenType != "" && resp.IssuedTokenType != oidc.AccessTokenType && resp.IssuedTokenType != oidc.JWTTokenType:
		return bad(fmt.Sprintf("issued_token_type %.80q is not an access token", resp.IssuedTokenType))
	case len(resp.AccessToken) > 16<<10:
		return bad("the access token is longer than 16 KiB")
	}
	// RFC 6750's b64token and what JWTs and opaque tokens use: visible ASCII without space.
	for i := 0; i < len(resp.AccessToken); i++ {
		if b := resp.AccessToken[i]; b <= ' ' || b >= 0x7f {
			return bad("the access token holds a byte no header may carry")
		}
	}
	return nil
}

// tokenCache holds the exchanged tokens, one per account and server (credKey), until they
// expire, at most max of them. The tokens are never logged or written anywhere.
type tokenCache struct {
	mu  sync.Mutex
	max int
	m   map[credKey]cachedToken
}

// cachedToken is a token and whose it is: the account (issuer, sub) it was exchanged for,
// checked against the key on every hit.
type cachedToken struct {
	token           string
	exp             time.Time
	issuer, subject string
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, m: map[credKey]cachedToken{}}
}

// get returns k's token while it has not expired at now, and only if it is the token of k's
// account: the key says whose token it must be, and the entry whose it is.
func (c *tokenCache) get(k credKey, now time.Time) (string, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[k]
	if !ok || !now.Before(t.exp) || t.issuer != k.issuer || t.subject != k.subject {
		return "", time.Time{}, false
	}
	return t.token, t.exp, true
}

// put stores k's token, dropping the expired ones and, when the cache is full, the one that
// expires first.
func (c *tokenCache) put(k credKey, token string, exp, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		var first credKey
		var firstExp time.Time
		for key, t := range c.m {
			if !now.Before(t.exp) {
				delete(c.m, key)
				continue
			}
			if firstExp.IsZero() || t.exp.Before(firstExp) {
				first, firstExp = key, t.exp
			}
		}
		if len(c.m) >= c.max {
			delete(c.m, first)
		}
	}
	c.m[k] = cachedToken{token: token, exp: exp, issuer: k.issuer, subject: k.subject}
}

// len returns how many tokens are held.
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// errNoPrincipal fails a call of a token_exchange server that came without a principal's
// credential: it is never sent over the server's shared connection.
var errNoPrincipal = errors.New("executor: a call of a token_exchange server without the principal's credential; nothing is sent over its shared connection")

// errNoUserToken fails a request of a principal's connection when the principal's token has
// expired or been dropped: nothing is sent without it.
var errNoUserToken = errors.New("executor: no current access token of the principal for the server")

// userTokenSource is the token source of one principal's connection to one server: the token
// the cache holds for them now.
type userTokenSource struct {
	cache *tokenCache
	key   credKey
	now   func() time.Time
}

func (s userTokenSource) Token() (*oauth2.Token, error) {
	tok, exp, ok := s.cache.get(s.key, s.now())
	if !ok {
		return nil, errNoUserToken
	}
	return &oauth2.Token{AccessToken: tok, TokenType: "Bearer", Expiry: exp}, nil
}

// userConns are the principals' own connections to token_exchange servers: a server may tie
// its sessions to the user they were opened for, so no connection serves two principals. Each
// is made at its principal's first call, and closed when it has been idle UserConnectionIdle,
// or to make room for another; at most max are open.
type userConns struct {
	mu     sync.Mutex
	max    int
	idle   time.Duration
	conns  map[credKey]*userConn
	closed bool
}

type userConn struct {
	ready chan struct{} // closed once cl or err is set
	cl    *upstream.Client
	err   error
	busy  int       // calls holding it
	last  time.Time // when the last call let it go
}

func newUserConns(max int, idle time.Duration) *userConns {
	return &userConns{max: max, idle: idle, conns: map[credKey]*userConn{}}
}

// acquire returns k's connection, dialled by dial if there is none, and the function that lets
// it go once the call is over.
func (p *userConns) acquire(ctx context.Context, k credKey, now func() time.Time, dial func(context.Context) (*upstream.Client, error)) (*upstream.Client, func(), error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, upstream.ErrClosed
	}
	uc, ok := p.conns[k]
	var victim *upstream.Client
	if !ok {
		if len(p.conns) >= p.max {
			var lru credKey
			var found *userConn
			for key, c := range p.conns {
				if c.busy == 0 && c.cl != nil && (found == nil || c.last.Before(found.last)) {
					lru, found = key, c
				}
			}
			if found == nil {
				p.mu.Unlock()
				return nil, nil, fmt.Errorf("all %d connections of principals to token_exchange servers are in use", p.max)
			}
			delete(p.conns, lru)
			victim = found.cl
		}
		uc = &userConn{ready: make(chan struct{})}
		p.conns[k] = uc
	}
	uc.busy++
	p.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
	release := func() {
		p.mu.Lock()
		uc.busy--
		uc.last = now()
		p.mu.Unlock()
	}
	if !ok {
		cl, err := dial(ctx)
		p.mu.Lock()
		uc.cl, uc.err = cl, err
		if err != nil && p.conns[k] == uc {
			delete(p.conns, k) // the next call dials again
		}
		closed := p.closed
		p.mu.Unlock()
		close(uc.ready)
		if closed && cl != nil {
			cl.Close()
		}
	}
	select {
	case <-uc.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if uc.err != nil {
		release()
		return nil, nil, uc.err
	}
	return uc.cl, release, nil
}

// sweep closes the connections idle since before now - idle.
func (p *userConns) sweep(now time.Time) {
	var idle []*upstream.Client
	p.mu.Lock()
	for k, c := range p.conns {
		if c.busy == 0 && c.cl != nil && !now.Before(c.last.Add(p.idle)) {
			delete(p.conns, k)
			idle = append(idle, c.cl)
		}
	}
	p.mu.Unlock()
	for _, cl := range idle {
		cl.Close()
	}
}

// open returns how many connections are open or being made.
func (p *userConns) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// close closes every connection; acquire fails from then on.
func (p *userConns) close() error {
	p.mu.Lock()
	p.closed = true
	var all []*upstream.Client
	for k, c := range p.conns {
		if c.cl != nil {
			all = append(all, c.cl)
		}
		delete(p.conns, k)
	}
	p.mu.Unlock()
	var errs []error
	for _, cl := range all {
		errs = append(errs, cl.Close())
	}
	return errors.Join(errs...)
}

// upstreamFor returns the connection a call with the credential cc takes to server: the
// catalog's for a shared server, else the account's own, whose requests carry the account's
// exchanged token and none of the server's configured credentials.
func (s *Service) upstreamFor(ctx context.Context, server string, cc callCredential) (*upstream.Client, func(), error) {
	x := s.exchangers[server]
	if x == nil {
		c, err := s.catalog.Client(ctx, server)
		return c, func() {}, err
	}
	if cc.kind != ModeTokenExchange || cc.key.principal == "" || cc.key.server != server {
		// Fail closed: the shared connection of a token_exchange server is the list-only
		// service identity's, and a call there would carry no one's authority or the wrong one.
		return nil, nil, errNoPrincipal
	}
	k := cc.key
	return s.userConns.acquire(ctx, k, s.now, func(ctx context.Context) (*upstream.Client, error) {
		hc := &http.Client{CheckRedirect: noRedirects, Transport: &oauth2.Transport{
			Source: userTokenSource{cache: s.tokens, key: k, now: s.now},
			Base:   s.userTransport,
		}}
		return upstream.Dial(ctx, server, x.conn, upstream.Options{Logger: s.log, HTTPClient: hc})
	})
}

// noRedirects is the redirect policy of every connection to a tool's server: a redirect is not
// followed but taken as the server's answer, which is never a result (upstream reads it as an
// unknown outcome, or as the server's refusal when it carries a JSON-RPC error). Followed, a 307
// or 308 would send the call, its arguments and the connection's token (the user's exchanged
// one, or the server's configured headers, which the connection adds to every request) to
// wherever the answer names, another origin or plain http.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// runUserConns closes the principals' idle connections until ctx ends.
func (s *Service) runUserConns(ctx context.Context) {
	t := time.NewTicker(cmp.Or(UserConnectionIdle/4, time.Minute))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.userConns.sweep(s.now())
		}
	}
}

// credentialOf is the credential kind a record of server names: "" for a server this executor
// does not have.
func (s *Service) credentialOf(server string) string {
	if _, ok := s.cfg.Servers[server]; !ok {
		return ""
	}
	return s.cfg.mode(server)
}

// recordCredential writes the call's credential into rec.
func recordCredential(rec *store.Execution, cc callCredential) {
	rec.Credential, rec.CredentialSubject = cc.kind, cc.key.subject
}
