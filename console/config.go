package console

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/loopback"
	"github.com/verdictgate/verdict/internal/opfile"
)

// Defaults and bounds of the config (docs/console.md).
const (
	DefaultSessionTTL  = 8 * time.Hour
	DefaultIdleTimeout = 30 * time.Minute
	MaxSessionTTL      = 24 * time.Hour
	DefaultGroupsClaim = "groups"
	// DefaultPrincipalClaim is the ID token claim a principal is made of, as the daemons'
	// identity section's default.
	DefaultPrincipalClaim = "sub"
	DefaultMaxSessions    = 10000
	// DefaultMaxSignIns bounds the sign-ins in progress; DefaultMaxSignInsPerClient bounds
	// those of one client address.
	DefaultMaxSignIns          = 10000
	DefaultMaxSignInsPerClient = 64
)

// Config is the console's config file.
type Config struct {
	// Listen is the address the console serves on.
	Listen string `json:"listen"`
	// PublicURL is the console's address as browsers reach it: the OIDC redirect URI is
	// PublicURL + "/callback", and a POST's Origin must be its origin. https, or http on a
	// loopback host.
	PublicURL string     `json:"public_url"`
	TLS       *httpx.TLS `json:"tls,omitempty"`
	OIDC      OIDC       `json:"oidc"`
	Verdictd  Upstream   `json:"verdictd"`
	Executor  Upstream   `json:"executor"`
	Session   Session    `json:"session,omitempty"`
	SignIn    SignIn     `json:"sign_in,omitempty"`
	// AuditGroups, when set, are the groups whose members may open the audit view and record
	// pages (besides ValuesGroups'); empty lets every signed-in user read them, masked.
	AuditGroups []string `json:"audit_groups,omitempty"`
	// ValuesGroups are the groups whose members see argument values in the audit view; every
	// other signed-in user sees them masked. Empty: nobody sees them.
	ValuesGroups []string `json:"values_groups,omitempty"`
	// AdminGroups are the groups whose members may open the replay page: a candidate policy
	// decided against verdictd's records, read unmasked. Empty: nobody.
	AdminGroups []string `json:"admin_groups,omitempty"`
	// DebugListen, if set, is a loopback address serving the Go runtime profiles.
	DebugListen string `json:"debug_listen,omitempty"`
	// ConnectURL, if set, is the executor's connect.public_url: the connections page links to
	// ConnectURL/connect/<server>, where a user connects an account at a user_grant server.
	ConnectURL string `json:"connect_url,omitempty"`
	// ConnectServers are the executor's user_grant servers the connections page offers to
	// connect an account at (the console cannot ask the executor for them). Without them the
	// page links only to the servers the user has an account connected at.
	ConnectServers []string `json:"connect_servers,omitempty"`
}

// OIDC is the OpenID Provider approvers sign in at.
type OIDC struct {
	Issuer   string `json:"issuer"`
	ClientID string `json:"client_id"`
	// ClientSecretFile holds the client secret of a confidential client; a public client
	// leaves it out and relies on PKCE alone.
	ClientSecretFile string `json:"client_secret_file,omitempty"`
	// Scopes are asked for besides openid, which is always asked for.
	Scopes []string `json:"scopes,omitempty"`
	// Resource, if set, is sent as the RFC 8707 resource indicator on the authorization and
	// token requests, so that the access token is issued for verdictd's approvals API.
	Resource string `json:"resource,omitempty"`
	// GroupsClaim is the ID token claim that lists the user's groups (default "groups").
	GroupsClaim string `json:"groups_claim,omitempty"`
	// PrincipalClaim is the ID token claim whose string value names the signed-in user, as
	// <issuer>#<value> (default "sub"): the principal_claim the daemons' identity and
	// approvers sections give this issuer, so that the console names a user as they do.
	PrincipalClaim string `json:"principal_claim,omitempty"`
}

// Upstream is a daemon the console reads from.
type Upstream struct {
	URL string `json:"url"`
	// ReadTokenFile holds the token the console reads the daemon's record exports with (its
	// admin token). Decisions are never made with it: a decision carries the approver's own
	// access token.
	ReadTokenFile string `json:"read_token_file"`
}

// Session bounds the console's sign-in sessions.
type Session struct {
	// TTL is how long a session lasts from sign-in, whatever its use (default 8h, at most 24h).
	TTL confx.Duration `json:"ttl,omitempty"`
	// IdleTimeout ends a session not used for this long (default 30m, at most TTL).
	IdleTimeout confx.Duration `json:"idle_timeout,omitempty"`
	// MaxSessions bounds the sessions the store holds (default 10000).
	MaxSessions int `json:"max_sessions,omitempty"`
	// Store is where the sessions are kept.
	Store SessionStore `json:"store,omitempty"`
}

// SessionStore selects where sessions live. Kind memory (the default) keeps them in the
// process: a restart signs everyone out, and one replica alone can read them. Kind etcd keeps
// them in an etcd cluster shared by every replica of a deployment (same endpoints and prefix),
// under prefix + "console/": a session is read on any replica and outlives restarts, and
// signing out everywhere ends it on all of them. The connection keys are etcdx.Config, read at
// the section's own level as in the daemons' etcd sections; request_timeout bounds each etcd
// request, and an etcd that does not answer within it refuses the request
// session_store_unavailable.
type SessionStore struct {
	Kind string `json:"kind,omitempty"`
	etcdx.Config
}

func (s *SessionStore) validate() []error {
	switch s.Kind {
	case "", SessionStoreMemory:
		// A misspelt kind must not leave a replica keeping sessions to itself while its
		// operator believes they are shared.
		if !s.Config.Empty() {
			return []error{confx.Place("session.store", errors.New("session.store: endpoints, prefix, tls, username, password_file and timeouts apply only to kind etcd"))}
		}
	case SessionStoreEtcd:
		return s.Config.Validate("session.store", "")
	default:
		return []error{confx.Place("session.store.kind", fmt.Errorf("session.store.kind %q: want memory or etcd", s.Kind))}
	}
	return nil
}

// SignIn bounds the sign-ins in progress: started at GET /login, not yet back at the callback.
// Past a bound a new sign-in is refused (429); one already started is never pushed out.
type SignIn struct {
	// MaxInProgress bounds them in all (default 10000).
	MaxInProgress int `json:"max_in_progress,omitempty"`
	// MaxPerClient bounds those of one client: the connection's remote IPv4 address, or its
	// IPv6 /64 (default 64, at most MaxInProgress).
	MaxPerClient int `json:"max_per_client,omitempty"`
}

func (s *SignIn) validate() []error {
	var errs []error
	if s.MaxInProgress < 0 {
		errs = append(errs, confx.Place("sign_in.max_in_progress", errors.New("sign_in.max_in_progress must not be negative")))
	}
	if s.MaxPerClient < 0 {
		errs = append(errs, confx.Place("sign_in.max_per_client", errors.New("sign_in.max_per_client must not be negative")))
	} else if s.MaxInProgress >= 0 && s.maxPerClient() > s.max() {
		errs = append(errs, confx.Place("sign_in.max_per_client", fmt.Errorf("sign_in.max_per_client %d exceeds sign_in.max_in_progress %d", s.maxPerClient(), s.max())))
	}
	return errs
}

func (s *SignIn) max() int { return cmp.Or(s.MaxInProgress, DefaultMaxSignIns) }

func (s *SignIn) maxPerClient() int {
	return cmp.Or(s.MaxPerClient, min(DefaultMaxSignInsPerClient, s.max()))
}

// LoadConfig reads and validates a config file.
func LoadConfig(path string) (*Config, error) { return confx.LoadValid[Config](path) }

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("listen is required"))
	} else if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, confx.Place("listen", fmt.Errorf("listen %q: %w", c.Listen, err)))
	}
	if c.PublicURL == "" {
		errs = append(errs, errors.New("public_url is required"))
	} else if err := checkPublicURL(c.PublicURL); err != nil {
		errs = append(errs, confx.Place("public_url", err))
	}
	errs = append(errs, c.OIDC.validate()...)
	errs = append(errs, c.Verdictd.validate("verdictd")...)
	errs = append(errs, c.Executor.validate("executor")...)
	errs = append(errs, c.Session.validate()...)
	errs = append(errs, c.SignIn.validate()...)
	for _, list := range []struct {
		name   string
		groups []string
	}{{"audit_groups", c.AuditGroups}, {"values_groups", c.ValuesGroups}, {"admin_groups", c.AdminGroups}} {
		for i, g := range list.groups {
			if strings.TrimSpace(g) == "" {
				errs = append(errs, confx.Place(confx.Index(list.name, i), fmt.Errorf("%s[%d] is empty", list.name, i)))
			}
		}
	}
	errs = append(errs, confx.DebugListen(c.DebugListen)...)
	errs = append(errs, c.validateConnect()...)
	return errors.Join(errs...)
}

// serverIDPattern is what a server id is (the policy's and the executor's): it goes in a path
// of the console and of the executor's connect pages as it is.
var serverIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// validateConnect checks connect_url, a page the console sends browsers to, and
// connect_servers, each a server id named once.
func (c *Config) validateConnect() []error {
	var errs []error
	if c.ConnectURL != "" {
		if err := loopback.SecureURL(c.ConnectURL); err != nil {
			errs = append(errs, confx.Place("connect_url", fmt.Errorf("connect_url %w: users sign in at the executor there", err)))
		} else if u, _ := url.Parse(c.ConnectURL); u.RawQuery != "" || u.ForceQuery {
			errs = append(errs, confx.Place("connect_url", fmt.Errorf("connect_url %q has a query: want the executor's connect.public_url", c.ConnectURL)))
		}
	}
	if len(c.ConnectServers) > 0 && c.ConnectURL == "" {
		errs = append(errs, confx.Place("connect_servers", errors.New("connect_servers needs connect_url: the page would have nowhere to link them to")))
	}
	for i, srv := range c.ConnectServers {
		switch {
		case !serverIDPattern.MatchString(srv):
			errs = append(errs, confx.Place(confx.Index("connect_servers", i), fmt.Errorf("connect_servers[%d] %q is not a server id (letters, digits, _ and -)", i, srv)))
		case slices.Index(c.ConnectServers, srv) != i:
			errs = append(errs, confx.Place(confx.Index("connect_servers", i), fmt.Errorf("connect_servers[%d] %q is named twice", i, srv)))
		}
	}
	return errs
}

// checkPublicURL accepts an https URL, or http on a loopback host (the session cookie is not
// Secure there, and nothing leaves the machine), with no path, query or fragment: the console
// serves at the root of its origin, which its __Host- cookie requires.
func checkPublicURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("public_url: %w", err)
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("public_url %q: no host", raw)
	case u.Scheme == "http" && !loopback.Host(u.Hostname()):
		return fmt.Errorf("public_url %q: plain http would carry sessions in clear; http is accepted for a loopback host only, use https", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("public_url %q: want https://host[:port]", raw)
	case u.User != nil, u.RawQuery != "", u.Fragment != "", strings.Trim(u.Path, "/") != "":
		return fmt.Errorf("public_url %q: want the origin alone (scheme, host, port): the console serves at the root", raw)
	}
	return nil
}

func (o *OIDC) validate() []error {
	var errs []error
	if o.Issuer == "" {
		errs = append(errs, confx.Place("oidc", errors.New("oidc.issuer is required")))
	} else if err := checkTokenURL("oidc.issuer", o.Issuer); err != nil {
		errs = append(errs, confx.Place("oidc.issuer", err))
	}
	if o.ClientID == "" {
		errs = append(errs, confx.Place("oidc", errors.New("oidc.client_id is required")))
	}
	if o.ClientSecretFile != "" {
		if err := readableFile(o.ClientSecretFile); err != nil {
			errs = append(errs, confx.Place("oidc.client_secret_file", fmt.Errorf("oidc.client_secret_file: %w", err)))
		}
	}
	for i, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			errs = append(errs, confx.Place(confx.Index("oidc.scopes", i), fmt.Errorf("oidc.scopes[%d] %q is not a scope token", i, s)))
		}
	}
	if o.PrincipalClaim != "" && strings.TrimSpace(o.PrincipalClaim) != o.PrincipalClaim {
		errs = append(errs, confx.Place("oidc.principal_claim", fmt.Errorf("oidc.principal_claim %q has surrounding white space", o.PrincipalClaim)))
	}
	if o.Resource != "" {
		if u, err := url.Parse(o.Resource); err != nil || !u.IsAbs() || u.Fragment != "" {
			errs = append(errs, confx.Place("oidc.resource", fmt.Errorf("oidc.resource %q: want an absolute URI without a fragment (RFC 8707)", o.Resource)))
		}
	}
	return errs
}

func (o *OIDC) groupsClaim() string { return cmp.Or(o.GroupsClaim, DefaultGroupsClaim) }

// principalClaim is the claim the principal is read from.
func (o *OIDC) principalClaim() string { return cmp.Or(o.PrincipalClaim, DefaultPrincipalClaim) }

func (u *Upstream) validate(name string) []error {
	var errs []error
	if u.URL == "" {
		errs = append(errs, confx.Place(name, fmt.Errorf("%s.url is required", name)))
	} else if err := checkTokenURL(name+".url", u.URL); err != nil {
		errs = append(errs, confx.Place(name+".url", err))
	}
	if u.ReadTokenFile == "" {
		errs = append(errs, confx.Place(name, fmt.Errorf("%s.read_token_file is required: the records exports need the daemon's admin token", name)))
	} else if err := readableFile(u.ReadTokenFile); err != nil {
		errs = append(errs, confx.Place(name+".read_token_file", fmt.Errorf("%s.read_token_file: %w", name, err)))
	}
	return errs
}

// checkTokenURL refuses a URL a bearer token would be sent to in clear: https, or http on a
// loopback host.
func checkTokenURL(name, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("%s %q: want https://host[:port][/path]", name, raw)
	case u.Scheme == "http" && !loopback.Host(u.Hostname()):
		return fmt.Errorf("%s %q: plain http would send tokens in clear; http is accepted for a loopback host only, use https", name, u.Redacted())
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%s %q: want https://host[:port][/path]", name, u.Redacted())
	case u.User != nil:
		return fmt.Errorf("%s %q: credentials in the URL are refused", name, u.Redacted())
	}
	return nil
}

func (s *Session) validate() []error {
	var errs []error
	ttl, idle := s.ttl(), s.idle()
	if ttl > MaxSessionTTL {
		errs = append(errs, confx.Place("session.ttl", fmt.Errorf("session.ttl %s exceeds %s", ttl, MaxSessionTTL)))
	}
	if idle > ttl {
		errs = append(errs, confx.Place("session.idle_timeout", fmt.Errorf("session.idle_timeout %s exceeds session.ttl %s", idle, ttl)))
	}
	if s.MaxSessions < 0 {
		errs = append(errs, confx.Place("session.max_sessions", errors.New("session.max_sessions must not be negative")))
	}
	if s.Store.Kind == SessionStoreEtcd && ttl < 2*time.Second {
		errs = append(errs, confx.Place("session.ttl", fmt.Errorf("session.ttl %s is under 2s: etcd leases count whole seconds", ttl)))
	}
	return append(errs, s.Store.validate()...)
}

func (s *Session) ttl() time.Duration  { return s.TTL.Or(DefaultSessionTTL) }
func (s *Session) idle() time.Duration { return s.IdleTimeout.Or(min(DefaultIdleTimeout, s.ttl())) }
func (s *Session) max() int            { return cmp.Or(s.MaxSessions, DefaultMaxSessions) }

func readableFile(path string) error {
	f, err := opfile.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// readSecret reads a token or secret file: its content without surrounding white space, never
// empty.
func readSecret(path string) (string, error) {
	b, err := opfile.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}
