package executor

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/nonce"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdict"
)

// Bounds of what the executor holds for the accounts of token_exchange servers.
const (
	// MaxUserTokens bounds the exchanged tokens kept, one per account and server: past it the
	// one that expires first is dropped (its account's next call exchanges again).
	MaxUserTokens = 4096
	// MaxUserConnections bounds the accounts' own connections to token_exchange servers, all
	// servers together: past it the least recently used idle one is closed, and a call that
	// finds every one in use is refused before its nonce is consumed (credential_unavailable).
	MaxUserConnections = 256
	// UserConnectionIdle is how long an account's connection stays open unused.
	UserConnectionIdle = 5 * time.Minute
	// tokenMargin is added to call_timeout: an exchanged token with less than that left is
	// exchanged again before the call, so that no call outlives its token.
	tokenMargin = 10 * time.Second
	// exchangeTimeout bounds one exchange at the identity provider.
	exchangeTimeout = 10 * time.Second
	// maxExpiresIn is the longest expires_in (seconds) of an exchanged token taken: a year. An
	// access token said to live longer is a mistake, or a number that would overflow a
	// time.Duration (about 292 years) and come out as a token already expired.
	maxExpiresIn = 366 * 24 * 3600
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
// key of the account whose own token and connection it takes, the exchanged token the call was
// cleared with (held, which the call sends, whatever the cache holds by then) and the
// account's connection, reserved for the call until done.
type callCredential struct {
	kind    string
	key     credKey // the zero key for shared: the catalog's connection
	subject string  // the sub of the user's token that came with the verdict, if one did
	grant   string  // the vault's id of the grant whose token the call carries (user_grant)
	held    heldToken
	conn    *upstream.Client
	release func()
}

// done lets the call's connection go; a shared call's is the catalog's, and stays.
func (cc callCredential) done() {
	if cc.release != nil {
		cc.release()
	}
}

// userServer is a server called with each user's own authority (token_exchange, user_grant):
// how its accounts' connections are made, and where their tokens come from.
type userServer struct {
	id  string
	cfg Credential
	// conn is the server's config for an account's connection: of its headers only those
	// the entry's headers_for_users names (userHeaders); Authorization is the connection's
	// own transport's.
	conn upstream.Config
	// principalIsSub: the subject issuer's principal claim is sub, so a principal's subject
	// is the token's sub.
	principalIsSub bool
	source         tokenSource
}

// A tokenSource gets an account a token for one server, when the cache holds none good for the
// call: by exchange (exchanger), or from the account's grant in the vault (granter).
type tokenSource interface {
	// fetch returns a token of key's account for the server and when it expires, which must
	// be past now + margin; subjectToken is the user's own, verified. A refusal is a
	// *credError.
	fetch(ctx context.Context, key credKey, subjectToken string, now time.Time, margin time.Duration) (heldToken, error)
}

// exchanger asks one token_exchange server's identity provider for the accounts' tokens.
type exchanger struct {
	cfg Credential
	te  tokenexchange.TokenExchanger
}

// readSecrets reads the client secret files of the credentials entries, by server id: at
// start, before anything is opened, so that a missing one stops the start at its key.
func readSecrets(cfg *Config) (map[string]string, error) {
	out := map[string]string{}
	for _, id := range slices.Sorted(maps.Keys(cfg.Credentials)) {
		if f := cfg.Credentials[id].ClientSecretFile; f != "" {
			secret, err := readSecret(id, f)
			if err != nil {
				return nil, err
			}
			out[id] = secret
		}
	}
	return out, nil
}

// newUserServers makes the servers of the token_exchange and user_grant entries: the
// exchangers of the token_exchange ones, with their secrets, and the granters of the
// user_grant ones (grants.go).
func newUserServers(ctx context.Context, cfg *Config, secrets map[string]string, grants func(id string, cr Credential, secret string) tokenSource) (map[string]*userServer, error) {
	out := map[string]*userServer{}
	// The token endpoint is configured, never discovered, and redirects are not followed: the
	// client secret and the users' tokens go to the one URL the operator wrote.
	hc := &http.Client{Timeout: exchangeTimeout, CheckRedirect: noRedirects}
	for id, cr := range cfg.Credentials {
		var src tokenSource
		switch cr.Mode {
		case api.CredentialTokenExchange:
			te, err := tokenexchange.NewTokenExchangerClientCredentials(ctx, cr.SubjectIssuer, cr.ClientID, secrets[id],
				tokenexchange.WithHTTPClient(hc), tokenexchange.WithStaticTokenEndpoint(cr.SubjectIssuer, cr.TokenEndpoint))
			if err != nil {
				return nil, fmt.Errorf("credentials.%s: %w", id, err)
			}
			src = &exchanger{cfg: cr, te: te}
		case api.CredentialUserGrant:
			src = grants(id, cr, secrets[id])
		default:
			continue
		}
		conn := cfg.Servers[id]
		conn.Headers = userHeaders(conn.Headers, cr.HeadersForUsers)
		x := &userServer{id: id, cfg: cr, conn: conn, source: src}
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
		if !secretHeader(k) && slices.ContainsFunc(allow, func(a string) bool { return textproto.CanonicalMIMEHeaderKey(a) == textproto.CanonicalMIMEHeaderKey(k) }) {
			out[k] = v
		}
	}
	return out
}

// credential returns the credential the call of a verified verdict carries: the server's own
// for a shared server; for a user's server (token_exchange, user_grant) the principal's own,
// from userCredential. All of it happens before the nonce is consumed: a refusal spends
// nothing, is recorded, and whatever can fail of the credential fails here. subjects are the
// request's subject token headers. The caller calls done on the result once the call is over.
func (s *Service) credential(ctx context.Context, c *verdict.Claims, subjects []string, token, argsDigest string, now time.Time) (callCredential, *outcome) {
	x := s.users[c.Server]
	if x == nil {
		return callCredential{kind: api.CredentialShared}, nil
	}
	// A verdict already used is refused as such before the user's credential is looked at: a
	// caller holding a spent verdict learns nothing of a token it sends with it, and has no
	// exchange or refresh made for it. A look that fails leaves the answer to the consume.
	switch err := s.nonces.Spent(ctx, c.ID, time.Unix(c.Expiry, 0)); {
	case errors.Is(err, nonce.ErrConsumedNotStarted):
		o := s.refuse(ctx, http.StatusConflict, api.ExecutionReasonConsumedNotStarted, token, argsDigest, now, c)
		return callCredential{}, &o
	case errors.Is(err, nonce.ErrReplayed):
		o := s.refuse(ctx, http.StatusConflict, string(verdict.Replayed), token, argsDigest, now, c)
		return callCredential{}, &o
	}
	cc, r := s.userCredential(ctx, x, c.Subject, c.ID, subjects, x.cfg.Mode == api.CredentialTokenExchange)
	if r == nil {
		return cc, nil
	}
	o, _ := s.refusalAs(ctx, r.status, r.reason, token, argsDigest, now, c, r.subject)
	o.message = "verdict refused: " + r.reason + ": " + r.message
	o.connect = r.connect
	return callCredential{}, &o
}

// credRefusal is why a user's credential is not at hand: the refusal's status, reason and
// words, the sub of the user's token when one verified, and the page to connect an account at
// when that is the remedy.
type credRefusal struct {
	status                   int
	reason, message, subject string
	connect                  string
}

// userCredential returns principal's credential at x's server: once the user's token (one of
// subjects, required when needToken) has shown that it is principal's, the account's token for
// the server is at hand (exchanged now, or the grant's, or earlier and still good for the call)
// and a connection of the account's is reserved for the call. ref names the request in the log
// (the verdict id). An empty principal is the token's own, which is then required (a read).
func (s *Service) userCredential(ctx context.Context, x *userServer, principal, ref string, subjects []string, needToken bool) (callCredential, *credRefusal) {
	ctx, span := s.tr.Start(ctx, "credential", trace.SpanKindInternal)
	defer span.End()
	var connect string
	refuse := func(status int, reason, message, subject string) (callCredential, *credRefusal) {
		return callCredential{}, &credRefusal{status: status, reason: reason, message: message, subject: subject, connect: connect}
	}
	var tok string
	switch {
	case len(subjects) > 1:
		return refuse(http.StatusForbidden, api.ExecutionReasonCredentialInvalid, "more than one "+identity.SubjectTokenHeader+" header; nothing was spent", "")
	case len(subjects) == 1:
		tok = strings.TrimSpace(subjects[0])
	case needToken:
		return refuse(http.StatusForbidden, api.ExecutionReasonCredentialRequired,
			"the tool's server is called with the user's own authority, and no access token of the user came with the verdict; nothing was spent", "")
	}
	// A user_grant call may come without the user's token: the verdict alone releases its
	// principal's grant, so that a call triggered while the user is away (a schedule, a
	// condition) runs. A token that comes must be the principal's, as for an exchange.
	key := credKey{principal: principal, server: x.id}
	var sub string
	if tok != "" {
		p, err := s.subjects.Verify(ctx, tok)
		if err != nil {
			reason := identity.ReasonOf(err)
			if reason == "" || reason == identity.TokenMissing {
				reason = identity.TokenMalformed
			}
			s.log.LogAttrs(ctx, slog.LevelWarn, "subject token refused", slog.String("verdict_id", ref),
				slog.String("server", x.id), slog.String("reason", string(reason)), slog.String("error", err.Error()))
			if reason == identity.IdPUnavailable {
				return refuse(http.StatusServiceUnavailable, api.ExecutionReasonCredentialInvalid,
					"the user's access token could not be verified: its issuer cannot be reached; nothing was spent, send it again", "")
			}
			return refuse(http.StatusForbidden, api.ExecutionReasonCredentialInvalid, "the user's access token is refused ("+string(reason)+"); nothing was spent", "")
		}
		if principal == "" {
			// A read: the principal is the token's, as at the gateway.
			principal, key.principal = p.ID, p.ID
		}
		if p.ID != principal {
			// Whose token it was is logged for the operator; the record is the verdict's principal's.
			s.log.LogAttrs(ctx, slog.LevelWarn, "subject token of another principal", slog.String("verdict_id", ref),
				slog.String("server", x.id), slog.String("principal", principal), slog.String("token_principal", p.ID))
			return refuse(http.StatusForbidden, api.ExecutionReasonCredentialForeign,
				"the access token sent is another principal's than the verdict's; nothing was spent", "")
		}
		if p.Issuer != x.cfg.SubjectIssuer {
			return refuse(http.StatusForbidden, api.ExecutionReasonCredentialInvalid,
				"the user's access token is of an issuer whose tokens this server's calls do not take; nothing was spent", "")
		}
		if sub, err = x.tokenSubject(p, tok); err != nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "subject token names no account", slog.String("verdict_id", ref),
				slog.String("server", x.id), slog.String("principal", principal), slog.String("error", err.Error()))
			return refuse(http.StatusForbidden, api.ExecutionReasonCredentialInvalid,
				"the user's access token names no account (sub) the identity provider could exchange it for; nothing was spent", "")
		}
		if x.cfg.Mode == api.CredentialTokenExchange {
			// The provider exchanges for the token's account: the account is part of the key.
			key.issuer, key.subject = p.Issuer, sub
		}
	}
	held, err := s.userToken(ctx, x, key, tok)
	if err != nil {
		ce := asCredError(err)
		connect = ce.connect
		s.log.LogAttrs(ctx, ce.level(), ce.logMsg(), slog.String("verdict_id", ref),
			slog.String("server", x.id), slog.String("principal", principal), slog.String("error", ce.msg))
		return refuse(ce.status, cmp.Or(ce.reason, api.ExecutionReasonCredentialExchangeFailed), ce.refusal(), sub)
	}
	conn, release, err := s.userConn(ctx, x, key, held)
	if err != nil {
		// The token may be what the server refused: the next call gets one afresh (exchanged
		// again, or read from the vault) rather than this one again.
		s.tokens.drop(key.principal, key.server)
		// The server's answer may be in the error, and a server can quote back the token it
		// was sent: the log line has it cut out, and is bounded.
		why := fmt.Sprintf("%.400q", strings.ReplaceAll(err.Error(), held.token, "[redacted]"))
		s.log.LogAttrs(ctx, slog.LevelWarn, "no connection of the user to the server", slog.String("verdict_id", ref),
			slog.String("server", x.id), slog.String("principal", principal), slog.String("error", why))
		return refuse(http.StatusServiceUnavailable, api.ExecutionReasonCredentialUnavailable,
			"no connection of the user to the tool's server could be had now (all in use, or it could not be made); nothing was spent, send it again", sub)
	}
	return callCredential{kind: x.cfg.Mode, key: key, subject: sub, grant: held.grant, held: held, conn: conn, release: release}, nil
}

// tokenSubject returns the sub of the user's token tok, which verified as p: the account the
// identity provider exchanges the token for. With the principal claim sub it is the
// principal's subject; with another claim it is read from the token's payload, whose
// signature p's verification checked. An introspected token's sub is not at hand (the config
// refuses that pair, see validateExchange), and a token without one names no account: both
// are refused.
func (x *userServer) tokenSubject(p *identity.Principal, tok string) (string, error) {
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

// credError is a refusal of an account's token for a server, described without anything the
// identity provider or authorization server sent beside its error code and description: an
// answer that is not one could hold a token. msg is for the log; the refusal's words are
// user's, or those of a failed exchange when it is empty.
type credError struct {
	status int
	reason string // the refusal's reason; "" is credential_exchange_failed
	msg    string
	user   string
	// tampered: a stored grant did not open, which the operator must hear of (an error).
	tampered bool
	// connect is the page where the user connects an account, when that is the remedy.
	connect string
}

func (e *credError) Error() string { return e.msg }

// asCredError is err as a credError: one that is not is the executor's own failure, 503.
func asCredError(err error) *credError {
	if ce, ok := errors.AsType[*credError](err); ok {
		return ce
	}
	return &credError{status: http.StatusServiceUnavailable, msg: err.Error()}
}

func (e *credError) level() slog.Level {
	if e.tampered {
		return slog.LevelError
	}
	return slog.LevelWarn
}

func (e *credError) logMsg() string {
	if e.reason == "" {
		return "token exchange failed"
	}
	return "no token of the account for the server"
}

// refusal is what the refusal says, nothing having been spent.
func (e *credError) refusal() string {
	switch {
	case e.user != "":
		return e.user
	case e.status == http.StatusForbidden:
		return "the identity provider refused to exchange the user's token for one of the tool's server; nothing was spent"
	}
	return "the identity provider could not be asked for the user's token for the tool's server; nothing was spent, send it again"
}

// userToken returns key's token with at least the margin left: the cache's, or else one got
// in exchange for subjectToken (or from the vault), which the cache then keeps. On error it
// returns the status of the refusal: 403 when the identity provider refused, 503 when it could
// not be asked or its answer was no token the call can be sent with.
//
// A user_grant server's token comes from the vault on every call when the vault is shared
// (etcd): a grant revoked or connected anew at another executor, which cannot drop this one's
// cache, holds from the next call on. A grant the vault no longer gives takes its token out of
// the cache, so the account's connection sends it no more either.
func (s *Service) userToken(ctx context.Context, x *userServer, key credKey, subjectToken string) (heldToken, error) {
	now := s.now()
	margin := s.cfg.CallTimeout.Or(DefaultCallTimeout) + tokenMargin
	shared := x.cfg.Mode == api.CredentialUserGrant && s.cfg.vaultStore() == NonceStoreEtcd
	if h, ok := s.tokens.get(key, now); ok && !shared && now.Add(margin).Before(h.exp) {
		return h, nil
	}
	h, err := x.source.fetch(ctx, key, subjectToken, now, margin)
	if err != nil {
		if ce := asCredError(err); x.cfg.Mode == api.CredentialUserGrant && ce.reason == api.ExecutionReasonCredentialRequired {
			s.tokens.drop(key.principal, key.server)
		}
		return heldToken{}, err
	}
	h.key = key
	s.tokens.put(h, now)
	return h, nil
}

// fetch exchanges subjectToken at the identity provider for the server's token.
func (x *exchanger) fetch(ctx context.Context, key credKey, subjectToken string, now time.Time, margin time.Duration) (heldToken, error) {
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
		return heldToken{}, describeExchangeError(err, subjectToken)
	}
	if err := checkExchanged(resp); err != nil {
		return heldToken{}, err
	}
	exp, err := exchangedExpiry(now, resp.ExpiresIn, margin)
	if err != nil {
		return heldToken{}, err
	}
	return heldToken{token: resp.AccessToken, exp: exp}, nil
}

// exchangedExpiry returns when a token exchanged at now with expires_in expires, if it lives
// longer than margin (call_timeout + tokenMargin): a token the call could outlive is refused,
// and so is one whose lifetime is not said (no expires_in, or 0: it might expire at once) or
// is past maxExpiresIn (a number that large is no lifetime, and would overflow).
func exchangedExpiry(now time.Time, expiresIn uint64, margin time.Duration) (time.Time, error) {
	switch {
	case expiresIn == 0:
		return time.Time{}, unusable("no expires_in: how long the token serves is not said")
	case expiresIn > maxExpiresIn:
		return time.Time{}, unusable("expires_in %d is more than a year", expiresIn)
	}
	life := time.Duration(expiresIn) * time.Second
	if life <= margin {
		return time.Time{}, unusable("the token lives %v, no longer than call_timeout + %v (%v): a call could outlive it", life, tokenMargin, margin)
	}
	return now.Add(life), nil
}

// unusable refuses an exchange's answer that the call cannot be sent with.
func unusable(format string, args ...any) error {
	return &credError{status: http.StatusServiceUnavailable, msg: "the token endpoint's answer is not usable: " + fmt.Sprintf(format, args...)}
}

// describeExchangeError keeps of a failed exchange what may be logged: the OAuth error code and
// description of a refusal, the cause of a request that got no answer, or only that the answer
// was not a token response (the library's message for that quotes the answer's body).
// A description that quotes the user's token back has it cut out.
func describeExchangeError(err error, subjectToken string) *credError {
	if oe, ok := errors.AsType[*oidc.Error](err); ok {
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
		return &credError{status: status, msg: fmt.Sprintf("token endpoint refused: %.40q: %.200q", string(oe.ErrorType), desc)}
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return &credError{status: http.StatusServiceUnavailable, msg: "token endpoint not reached: " + ue.Err.Error()}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &credError{status: http.StatusServiceUnavailable, msg: "token endpoint not reached: " + err.Error()}
	}
	return &credError{status: http.StatusServiceUnavailable, msg: "the token endpoint's answer is not a token response"}
}

// checkExchanged refuses an exchange answer that is not a bearer access token the server can
// be sent in a header.
func checkExchanged(resp *oidc.TokenExchangeResponse) error {
	switch {
	case resp.AccessToken == "":
		return unusable("no access_token")
	case !strings.EqualFold(resp.TokenType, oidc.BearerToken):
		return unusable("token_type %.40q, want Bearer", resp.TokenType)
	case resp.IssuedTokenType != "" && resp.IssuedTokenType != oidc.AccessTokenType && resp.IssuedTokenType != oidc.JWTTokenType:
		return unusable("issued_token_type %.80q is not an access token", resp.IssuedTokenType)
	case len(resp.AccessToken) > 16<<10:
		return unusable("the access token is longer than 16 KiB")
	}
	// RFC 6750's b64token and what JWTs and opaque tokens use: visible ASCII without space (a
	// byte past ASCII reads as a rune past 0x7f, valid UTF-8 or not).
	if strings.ContainsFunc(resp.AccessToken, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return unusable("the access token holds a byte no header may carry")
	}
	return nil
}

// tokenCache holds the exchanged tokens, one per account and server (credKey), until they
// expire, at most max of them. The tokens are never logged or written anywhere. Each entry
// keeps its own key, whose it is (the account, issuer and sub, it was exchanged for), checked
// against the key on every hit.
type tokenCache struct {
	mu  sync.Mutex
	max int
	m   map[credKey]heldToken
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, m: map[credKey]heldToken{}}
}

// get returns k's token while it has not expired at now, and only if it is the token of k's
// account: the key says whose token it must be, and the entry whose it is.
func (c *tokenCache) get(k credKey, now time.Time) (heldToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[k]
	if !ok || !now.Before(t.exp) || t.key != k {
		return heldToken{}, false
	}
	return t, true
}

// put stores k's token, dropping the expired ones and, when the cache is full, the one that
// expires first.
func (c *tokenCache) put(h heldToken, now time.Time) {
	k := h.key
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
	c.m[k] = h
}

// drop forgets the tokens of principal at server, of every account: a grant stored anew serves
// from the next call on.
func (c *tokenCache) drop(principal, server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.principal == principal && k.server == server {
			delete(c.m, k)
		}
	}
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

// errNoUserToken fails a request of an account's connection that carries no token the call
// was cleared with, when the cache's has expired or been dropped: nothing is sent without one.
var errNoUserToken = errors.New("executor: no current access token of the account for the server")

// heldToken is an account's exchanged token as a call (or the dial of a connection) was
// cleared with it, carried in the context of its requests (heldTokenKey).
type heldToken struct {
	key   credKey
	token string
	exp   time.Time
	grant string // the vault's id of the grant the token is of, for user_grant
}

type heldTokenKey struct{}

func withHeldToken(ctx context.Context, h heldToken) context.Context {
	return context.WithValue(ctx, heldTokenKey{}, h)
}

// userAuth is the transport of one account's connection to one server: every request carries
// the account's exchanged token in Authorization. A call's requests carry the token the call
// was cleared with (in their context: nothing can take it from them between the clearance and
// the call); the connection's own requests (a listening stream, the session's end, a
// reconnect) the one the cache holds for the account now. A request with neither is not sent.
type userAuth struct {
	base  http.RoundTripper
	cache *tokenCache
	key   credKey
	now   func() time.Time
}

func (t *userAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	now := t.now()
	var tok string
	if h, ok := r.Context().Value(heldTokenKey{}).(heldToken); ok && h.key == t.key && now.Before(h.exp) {
		tok = h.token
	} else if c, ok := t.cache.get(t.key, now); ok {
		tok = c.token
	}
	if tok == "" {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, errNoUserToken
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.base.RoundTrip(r)
}

// userConns are the accounts' own connections to token_exchange servers: a server may tie its
// sessions to the user they were opened for, so no connection serves two accounts. Each is
// made at its account's first call, and closed when it has been idle UserConnectionIdle,
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
				return nil, nil, fmt.Errorf("all %d connections of accounts to token_exchange servers are in use", p.max)
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
// catalog's for a shared server, else the account's own that credential reserved, whose
// requests carry the account's exchanged token and none of the server's configured
// credentials.
func (s *Service) upstreamFor(ctx context.Context, server string, cc callCredential) (*upstream.Client, error) {
	x := s.users[server]
	if x == nil {
		return s.catalog.Client(ctx, server)
	}
	if cc.kind != x.cfg.Mode || cc.conn == nil || cc.key.server != server {
		// Fail closed: the shared connection of a token_exchange server is the list-only
		// service identity's, and a call there would carry no one's authority or the wrong one.
		return nil, errNoPrincipal
	}
	return cc.conn, nil
}

// userConn reserves key's connection to x's server for a call, dialled with the token held if
// there is none: at most MaxUserConnections, each the account's alone.
func (s *Service) userConn(ctx context.Context, x *userServer, key credKey, held heldToken) (*upstream.Client, func(), error) {
	return s.userConns.acquire(withHeldToken(ctx, held), key, s.now, func(ctx context.Context) (*upstream.Client, error) {
		hc := &http.Client{CheckRedirect: noRedirects, Transport: &userAuth{base: s.userTransport, cache: s.tokens, key: key, now: s.now}}
		return upstream.Dial(ctx, x.id, x.conn, upstream.Options{Logger: s.log, HTTPClient: hc})
	})
}

// noRedirects is the redirect policy of every connection to a tool's server: a redirect is not
// followed but taken as the server's answer, which is never a result (upstream reads it as an
// unknown outcome, or as the server's refusal when it carries a JSON-RPC error). Followed, a 307
// or 308 would send the call, its arguments and the connection's token (the user's exchanged
// one, or the server's configured headers, which the connection adds to every request) to
// wherever the answer names, another origin or plain http.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// runUserConns closes the accounts' idle connections until ctx ends.
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
func recordCredential(rec *api.ExecutionRecord, cc callCredential) {
	rec.Credential, rec.CredentialSubject, rec.CredentialGrant = cc.kind, cc.subject, cc.grant
}
