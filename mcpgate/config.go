package mcpgate

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/askform"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/loopback"
	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/internal/tracing"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// Modes of the gateway.
const (
	// ModeEnforce sends every irreversible call through verdictd and the
	// executor; the gateway's own upstream connections serve only reads and
	// reversible calls.
	ModeEnforce = "enforce"
	// ModeObserve forwards every call to its server and only records what
	// the gate would have decided.
	ModeObserve = "observe"
)

// Defaults.
const (
	DefaultStateTTL    = 10 * time.Minute
	DefaultCallTimeout = 30 * time.Second
	DefaultRefresh     = 30 * time.Second
	DefaultMaxRounds   = 8
	MinStateKeyBytes   = 32
	// DefaultMaxSessions and DefaultSessionIdle bound the sessions kept for
	// HTTP clients of revisions before 2026-07-28 (see the package
	// documentation, Sessions).
	DefaultMaxSessions = 1000
	DefaultSessionIdle = 30 * time.Minute
	// MaxMaxSessions and MaxSessionIdle are the most the config may ask
	// for: every session holds memory and goroutines until it ends.
	MaxMaxSessions = 100000
	MaxSessionIdle = 24 * time.Hour
	// DefaultForwardTimeout bounds a call the gateway forwards to its
	// server (a read or reversible tool's), the time its user takes to
	// answer the server's questions in place included; MaxForwardTimeout is
	// the most the config may give one.
	DefaultForwardTimeout = 2 * time.Minute
	MaxForwardTimeout     = time.Hour
)

// forwardTimeout is how long a call forwarded to server may take.
func (c *Config) forwardTimeout(server string) time.Duration {
	if d := c.ForwardTimeouts[server].D(); d > 0 {
		return d
	}
	return c.ForwardTimeout.Or(DefaultForwardTimeout)
}

// Config is the gateway's config file (YAML; unknown keys are errors).
type Config struct {
	// Listen is the address of the streamable HTTP endpoint (/mcp) and of
	// /metrics, /healthz and /readyz. Empty serves no HTTP (stdio only).
	Listen string     `json:"listen,omitempty"`
	TLS    *httpx.TLS `json:"tls,omitempty"`
	// Mode is enforce (default) or observe. Observe also needs the
	// --observe flag: see [Options.Observe].
	Mode string `json:"mode,omitempty"`
	// Policy is the verdictd policy file: which servers to re-expose and
	// the class of every tool. It is reloaded when its content changes
	// (checked every PolicyPoll) and on SIGHUP.
	Policy string `json:"policy"`
	// PolicyPoll is how often the policy file is checked for a change
	// (default 2s, as verdictd's policy_poll; SIGHUP reloads at once).
	PolicyPoll confx.Duration `json:"policy_poll,omitempty"`
	// Servers override, per server id, how the gateway itself reaches a
	// policy server (for example with read-only credentials). Without an
	// entry the policy's tools_from is used.
	Servers  map[string]upstream.Config `json:"servers,omitempty"`
	Verdictd Endpoint                   `json:"verdictd"`
	Executor Endpoint                   `json:"executor"`
	// ConnectPages says where browsers reach the executor's connect pages, when not at the
	// origin of executor.url, and how long a call waits for the user to connect an account
	// (connect.go).
	ConnectPages *ConnectPages `json:"connect_pages,omitempty"`
	// UserServers are the servers the executor calls with each user's own authority
	// (token_exchange, user_grant): their pass-through calls run at the executor, with the
	// user's token, never over the gateway's own connection (userread.go).
	UserServers []string `json:"user_servers,omitempty"`
	// StateKeyFile holds the HMAC key of requestState tokens: at least 32
	// bytes, used as they are (surrounding whitespace trimmed).
	StateKeyFile string         `json:"state_key_file"`
	StateTTL     confx.Duration `json:"state_ttl,omitempty"`
	// State is where continuations wait between question rounds, and their bounds.
	State StateConfig `json:"state,omitempty"`
	// Identity, when set, makes the HTTP endpoint an OAuth 2.1 resource
	// server: a request's principal is that of its access token. It is
	// exclusive with principals' token_sha256.
	Identity *Identity `json:"identity,omitempty"`
	// Principals maps a principal id to its HTTP bearer token hash and
	// the values the user stored in advance. With identity, the ids are
	// those of the tokens (issuer#subject) and no entry has a token hash.
	Principals map[string]Principal `json:"principals"`
	// StdioPrincipal is the principal of the stdio connection.
	StdioPrincipal string `json:"stdio_principal,omitempty"`
	// Tools holds per-tool operator decisions, keyed "server/tool".
	Tools       map[string]ToolConfig `json:"tools,omitempty"`
	CallTimeout confx.Duration        `json:"call_timeout,omitempty"`
	// ForwardTimeout bounds every request the gateway forwards to a server
	// (default DefaultForwardTimeout); ForwardTimeouts sets it per server id.
	// When it passes, the host is answered upstream_timeout and the server
	// is sent a cancellation.
	ForwardTimeout  confx.Duration            `json:"forward_timeout,omitempty"`
	ForwardTimeouts map[string]confx.Duration `json:"forward_timeouts,omitempty"`
	RefreshInterval confx.Duration            `json:"refresh_interval,omitempty"`
	MaxRounds       int                       `json:"max_rounds,omitempty"`
	// MaxSessions bounds the HTTP sessions of clients of revisions before
	// 2026-07-28 (default DefaultMaxSessions); an initialize past it is
	// refused. SessionIdleTimeout ends a session that has had no request
	// for that long (default DefaultSessionIdle).
	MaxSessions int `json:"max_sessions,omitempty"`
	// MaxUpstreamSessions bounds the upstream connections of host sessions
	// (default DefaultMaxUpstreamSessions; see upstreams.go).
	MaxUpstreamSessions int `json:"max_upstream_sessions,omitempty"`
	// MaxUpstreamSessionsPerPrincipal bounds one principal's share of them
	// (default DefaultMaxUpstreamSessionsPerPrincipal, at most
	// max_upstream_sessions).
	MaxUpstreamSessionsPerPrincipal int            `json:"max_upstream_sessions_per_principal,omitempty"`
	SessionIdleTimeout              confx.Duration `json:"session_idle_timeout,omitempty"`
	// SSEKeepAlive is how long a session's event stream may carry nothing
	// before it is sent a keep-alive comment (default DefaultSSEKeepAlive,
	// at most MaxSSEKeepAlive; see keepalive.go).
	SSEKeepAlive confx.Duration `json:"sse_keepalive,omitempty"`
	// MaxDraftBytes bounds the drafted content one form shows for review
	// (default askform.DefaultMaxDraftBytes, at most
	// askform.MaxMaxDraftBytes); a record asking to review more ends the
	// call with draft_too_long.
	MaxDraftBytes int `json:"max_draft_bytes,omitempty"`
	// ConsoleURL is the approval console's public URL: a call whose approvals are given in
	// the console sends the host's user to {console_url}/approvals/{approval_id}.
	ConsoleURL string `json:"console_url,omitempty"`
	// Tracing, when set, exports OpenTelemetry spans (the OTEL_* environment can turn it on
	// too). Off, the trace context a host sends in _meta still goes on to verdictd, the
	// executor and the tool servers.
	Tracing *tracing.Config `json:"tracing,omitempty"`
	// DebugListen, if set, is a loopback address serving the Go runtime profiles
	// (/debug/pprof/) for performance work. Off by default; never a public address.
	DebugListen string `json:"debug_listen,omitempty"`
}

// Endpoint is an HTTP service the gateway calls, and its caller token.
type Endpoint struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// ConnectPages is the connect_pages section.
type ConnectPages struct {
	// URL is the executor's connect.public_url: pages on its origin are shown to users, as
	// are those on the origin of executor.url.
	URL string `json:"url,omitempty"`
	// Wait bounds how long a call waits, after the user accepted to open the page, for the
	// account to be connected before the verdict is presented again (default and at most
	// MaxConnectWait; never past the verdict's expiry).
	Wait confx.Duration `json:"wait,omitempty"`
}

// Principal is one user of the gateway.
type Principal struct {
	// TokenSHA256 is the hex SHA-256 of the principal's bearer token on
	// the HTTP endpoint. Empty: no HTTP access.
	TokenSHA256 string `json:"token_sha256,omitempty"`
	// PreSetData are values the user approved and stored in advance; they
	// reach verdictd as pre_set_data with trust user.
	PreSetData map[string]any `json:"pre_set_data,omitempty"`
}

// ToolConfig are the operator's decisions for one gated tool.
type ToolConfig struct {
	// ActionNamePreset is sent as intent.action_name_preset with trust
	// user when the host supplies no located action name: the operator
	// vouches that calling this tool is what the user calls the action.
	ActionNamePreset string `json:"action_name_preset,omitempty"`
	// WhenCase is the timing sent when the host supplies none. Empty: the
	// user is asked.
	WhenCase string `json:"when_case,omitempty"`
	// Scopes are the OAuth scopes an access token must grant for a call
	// of the tool over HTTP (identity only); a call without them is
	// refused with insufficient_scope. The tool stays listed.
	Scopes []string `json:"scopes,omitempty"`
}

// LoadConfig reads and validates the config file at path. The policy file it names decides which
// servers exist: a tools entry or a servers override naming another is reported at its place in
// the config (see checkPolicyServers). A policy that does not load is left for New to report.
func LoadConfig(path string) (*Config, error) {
	c, err := confx.LoadValid[Config](path)
	if err != nil {
		return nil, err
	}
	if pol, perr := policy.Load(c.Policy); perr == nil {
		if err := checkPolicyServers(c, pol); err != nil {
			return nil, confx.Locate(path, err)
		}
	}
	return c, nil
}

// Validate reports every problem of c at once, each placed at its key (see confx.LoadValid),
// section by section in the order of the sections below.
func (c *Config) Validate() error {
	var errs []error
	for _, check := range []func() []error{c.checkDaemon, c.checkEndpoints, c.checkState, c.checkPrincipals,
		c.checkTools, c.checkDurations, c.checkBounds, c.checkConsoleURL, c.checkUserServers, c.checkMaxima} {
		errs = append(errs, check()...)
	}
	return errors.Join(errs...)
}

// placed is the problem at path whose message names its key already (confx.Place).
func placed(path, format string, a ...any) error {
	return confx.Place(path, fmt.Errorf(format, a...))
}

// checkDaemon checks the gateway's own settings: its mode, policy, tracing and debug listener.
func (c *Config) checkDaemon() []error {
	var errs []error
	switch c.Mode {
	case "", ModeEnforce, ModeObserve:
	default:
		errs = append(errs, placed("mode", "mode %q: want enforce or observe", c.Mode))
	}
	if c.Policy == "" {
		errs = append(errs, placed("policy", "policy is required"))
	}
	if c.Tracing != nil {
		errs = append(errs, c.Tracing.Validate("tracing")...)
	}
	errs = append(errs, confx.DebugListen(c.DebugListen)...)
	return errs
}

// checkEndpoints checks the verdictd and executor sections.
func (c *Config) checkEndpoints() []error {
	var errs []error
	for _, s := range []struct {
		name string
		e    Endpoint
	}{{"verdictd", c.Verdictd}, {"executor", c.Executor}} {
		if err := s.e.validate(); err != nil {
			errs = append(errs, confx.At(s.name, err))
		}
	}
	if c.Identity == nil {
		return errs
	}
	// With an identity section every request to either daemon carries the user's access
	// token beside the gateway's (Verdict-Subject-Token): over plain http off a loopback
	// host anyone on the path would read it, and use it as the user, at the gateway too.
	for _, e := range []struct{ name, url string }{{"verdictd", c.Verdictd.URL}, {"executor", c.Executor.URL}} {
		if u, err := url.Parse(e.url); err == nil && u.Scheme == "http" && !loopback.Host(u.Hostname()) {
			errs = append(errs, confx.Errorf(confx.Key(e.name, "url"), "%q: with the identity section the users' access tokens are sent there, "+
				"so it must be https (http only on a loopback host)", e.url))
		}
	}
	return errs
}

// checkState checks where continuations wait: the state key, their lifetime and the store.
func (c *Config) checkState() []error {
	var errs []error
	if c.StateKeyFile == "" {
		errs = append(errs, placed("state_key_file", "state_key_file is required"))
	}
	if c.StateTTL.D() > time.Hour {
		errs = append(errs, placed("state_ttl", "state_ttl %s is longer than 1h", c.StateTTL.D()))
	}
	errs = append(errs, c.State.validate()...)
	if c.StateTTL.D() != 0 && c.StateTTL.D() < 2*time.Second && c.State.Kind == StateStoreEtcd {
		errs = append(errs, placed("state_ttl", "state_ttl %s is under 2s: etcd leases count whole seconds", c.StateTTL.D()))
	}
	return errs
}

// checkPrincipals checks who may call: the identity section or the principals' tokens, one
// way in, and the stdio connection's principal.
func (c *Config) checkPrincipals() []error {
	var errs []error
	if c.Identity != nil {
		errs = append(errs, c.Identity.validate()...)
	} else if len(c.Principals) == 0 {
		errs = append(errs, placed("principals", "principals: at least one is required (or an identity section)"))
	}
	for name, p := range c.Principals {
		path := confx.Key("principals", name)
		if strings.TrimSpace(name) == "" {
			errs = append(errs, placed(path, "principals: empty principal id"))
		}
		switch {
		case p.TokenSHA256 != "" && c.Identity != nil:
			// One way in: a static token beside the issuers' would be a second credential
			// that no IdP can revoke, and the one an attacker would try first.
			errs = append(errs, confx.Errorf(confx.Key(path, "token_sha256"), "is exclusive with the identity section: "+
				"the HTTP endpoint takes only the issuers' access tokens (keep pre_set_data, keyed by the token's principal id issuer#subject)"))
		case p.TokenSHA256 != "":
			if _, err := httpx.ParseSHA256(p.TokenSHA256); err != nil {
				errs = append(errs, confx.At(path, err))
			}
		}
	}
	if c.StdioPrincipal != "" {
		if _, ok := c.Principals[c.StdioPrincipal]; !ok {
			errs = append(errs, placed("stdio_principal", "stdio_principal %q is not in principals", c.StdioPrincipal))
		}
	}
	return errs
}

// checkTools checks the servers overrides and the per-tool decisions.
func (c *Config) checkTools() []error {
	var errs []error
	for id, s := range c.Servers {
		if err := s.Validate(); err != nil {
			errs = append(errs, confx.At(confx.Key("servers", id), err))
		}
	}
	for key, t := range c.Tools {
		path := confx.Key("tools", key)
		if strings.Count(key, "/") != 1 {
			errs = append(errs, confx.Errorf(path, "key must be server/tool"))
		}
		if t.WhenCase != "" && !slices.Contains(policy.WhenCases(), t.WhenCase) {
			errs = append(errs, confx.Errorf(confx.Key(path, "when_case"), "%q: want one of %v", t.WhenCase, policy.WhenCases()))
		}
		errs = append(errs, checkScopes(path, t.Scopes, c.Identity != nil)...)
	}
	return errs
}

// checkDurations checks that no duration is negative and that no forwarded call may take
// longer than MaxForwardTimeout.
func (c *Config) checkDurations() []error {
	var errs []error
	for _, s := range []struct {
		name string
		d    confx.Duration
	}{{"policy_poll", c.PolicyPoll}, {"state_ttl", c.StateTTL}, {"call_timeout", c.CallTimeout},
		{"refresh_interval", c.RefreshInterval}, {"session_idle_timeout", c.SessionIdleTimeout}, {"sse_keepalive", c.SSEKeepAlive}} {
		if s.d.D() < 0 {
			errs = append(errs, placed(s.name, "%s must not be negative", s.name))
		}
	}
	forward := map[string]confx.Duration{"forward_timeout": c.ForwardTimeout}
	for id, d := range c.ForwardTimeouts {
		forward[confx.Key("forward_timeouts", id)] = d
	}
	for _, key := range slices.Sorted(maps.Keys(forward)) {
		if d := forward[key]; d.D() < 0 || d.D() > MaxForwardTimeout {
			errs = append(errs, confx.Errorf(key, "%v: want at most %v (0 or absent: %v)", d.D(), MaxForwardTimeout, DefaultForwardTimeout))
		}
	}
	return errs
}

// checkBounds checks the counts: question rounds, sessions, upstream connections, draft bytes.
func (c *Config) checkBounds() []error {
	var errs []error
	if c.MaxRounds < 0 {
		errs = append(errs, placed("max_rounds", "max_rounds is negative"))
	}
	if c.MaxSessions < 0 || c.MaxSessions > MaxMaxSessions {
		errs = append(errs, placed("max_sessions", "max_sessions %d: want 1 to %d (0 or absent: %d)", c.MaxSessions, MaxMaxSessions, DefaultMaxSessions))
	}
	if c.MaxUpstreamSessions < 0 || c.MaxUpstreamSessions > MaxMaxUpstreamSessions {
		errs = append(errs, placed("max_upstream_sessions", "max_upstream_sessions %d: want 1 to %d (0 or absent: %d)", c.MaxUpstreamSessions, MaxMaxUpstreamSessions, DefaultMaxUpstreamSessions))
	}
	if n := c.MaxUpstreamSessionsPerPrincipal; n < 0 || n > cmp.Or(c.MaxUpstreamSessions, DefaultMaxUpstreamSessions) {
		errs = append(errs, placed("max_upstream_sessions_per_principal", "max_upstream_sessions_per_principal %d: want 1 to max_upstream_sessions, %d (0 or absent: %d, or max_upstream_sessions if lower)",
			n, cmp.Or(c.MaxUpstreamSessions, DefaultMaxUpstreamSessions), DefaultMaxUpstreamSessionsPerPrincipal))
	}
	if c.MaxDraftBytes < 0 || c.MaxDraftBytes > askform.MaxMaxDraftBytes {
		errs = append(errs, placed("max_draft_bytes", "max_draft_bytes %d: want 1 to %d (0 or absent: %d)", c.MaxDraftBytes, askform.MaxMaxDraftBytes, askform.DefaultMaxDraftBytes))
	}
	return errs
}

// checkConsoleURL checks the console's URL, where a host's user is sent with an approver's
// sign-in to follow.
func (c *Config) checkConsoleURL() []error {
	if c.ConsoleURL == "" {
		return nil
	}
	u, err := url.Parse(c.ConsoleURL)
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return []error{placed("console_url", "console_url %q: want an http(s) URL without query, fragment or user", c.ConsoleURL)}
	case u.Scheme == "http" && !loopback.Host(u.Hostname()):
		return []error{placed("console_url", "console_url %q: plain http only on a loopback host (the page carries an approver's sign-in)", c.ConsoleURL)}
	}
	return nil
}

// checkUserServers checks the servers called with each user's own authority, and the
// connect pages where users connect their accounts at them.
func (c *Config) checkUserServers() []error {
	var errs []error
	for i, id := range c.UserServers {
		at := confx.Index("user_servers", i)
		switch {
		case c.Identity == nil:
			errs = append(errs, confx.Errorf(at, "user_servers needs the identity section: a user's read runs with the user's own token"))
		case id == "" || slices.Index(c.UserServers, id) != i:
			errs = append(errs, confx.Errorf(at, "%q is empty or named twice", id))
		}
	}
	if cp := c.ConnectPages; cp != nil {
		if cp.URL != "" {
			if err := loopback.SecureURL(cp.URL); err != nil {
				errs = append(errs, placed("connect_pages.url", "connect_pages.url: %v", err))
			}
		}
		if d := cp.Wait.D(); d < 0 || d > MaxConnectWait {
			errs = append(errs, placed("connect_pages.wait", "connect_pages.wait %s: want at most %s (0 or absent: %s)", d, MaxConnectWait, MaxConnectWait))
		}
	}
	return errs
}

// checkMaxima checks the session timers against their maxima.
func (c *Config) checkMaxima() []error {
	var errs []error
	if c.SSEKeepAlive.D() > MaxSSEKeepAlive {
		errs = append(errs, placed("sse_keepalive", "sse_keepalive %s is longer than %s", c.SSEKeepAlive.D(), MaxSSEKeepAlive))
	}
	if c.SessionIdleTimeout.D() > MaxSessionIdle {
		errs = append(errs, placed("session_idle_timeout", "session_idle_timeout %s is longer than %s", c.SessionIdleTimeout.D(), MaxSessionIdle))
	}
	return errs
}

func (e Endpoint) validate() error {
	if e.URL == "" {
		return errors.New("url is required")
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q: want an absolute http or https URL", e.URL)
	}
	if e.Token == "" {
		return errors.New("token is required")
	}
	return nil
}

// ReadStateKey reads the requestState HMAC key from path. It is a private key like a signing
// key: a file others could read or write is refused (keys.CheckPrivate).
func ReadStateKey(path string) ([]byte, error) {
	b, err := keys.ReadPrivate(path, maxStateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("state key: %w", opfile.IfMissing(err, StateKeyHint(path)))
	}
	b = bytes.TrimSpace(b)
	if len(b) < MinStateKeyBytes {
		return nil, fmt.Errorf("state key %s: %d bytes, need at least %d", path, len(b), MinStateKeyBytes)
	}
	return b, nil
}

// StateKeyHint says how to make the state key file at path: 32 random bytes, readable by its
// owner alone (docs/operations.md).
func StateKeyHint(path string) string {
	// The umask makes the file 0600 from its creation: a chmod after the write would leave the
	// key readable by others for a moment.
	return fmt.Sprintf("make it with %q", "(umask 077 && head -c 32 /dev/urandom | base64 > "+path+")")
}

// maxStateKeyFile bounds the state key file: a key is some dozens of bytes.
const maxStateKeyFile = 64 << 10
