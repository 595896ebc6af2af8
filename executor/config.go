package executor

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/loopback"
	"github.com/verdictgate/verdict/internal/tracing"
	"github.com/verdictgate/verdict/nonce"
	"github.com/verdictgate/verdict/ship"
	"github.com/verdictgate/verdict/upstream"
)

// Defaults of the contract (docs/operations.md) and of this implementation.
const (
	DefaultClockSkew       = 5 * time.Second
	DefaultCallTimeout     = 30 * time.Second
	DefaultMaxTTL          = 10 * time.Minute
	DefaultMaxBodyBytes    = 1 << 20
	DefaultRefreshInterval = 30 * time.Second
	DefaultPolicyPoll      = 2 * time.Second
	DefaultJWKSRefresh     = 5 * time.Minute

	// MaxClockSkew bounds clock_skew. A verdict is accepted until exp + clock_skew, so the skew
	// lengthens every verdict's life: a skew as long as the verdicts' lifetime (verdictd's
	// default verdict_ttl is 60s) doubles it, and a longer one makes exp mean little. Clocks kept
	// by NTP differ by well under a second, so a minute still leaves a wide margin.
	MaxClockSkew = time.Minute
)

// Config is the executor's config file.
type Config struct {
	Listen         string                     `json:"listen"`
	DataDir        string                     `json:"data_dir"`
	ExecutorID     string                     `json:"executor_id"`
	TrustedIssuers []TrustedIssuer            `json:"trusted_issuers"`
	Algorithms     []string                   `json:"algorithms,omitempty"`
	ReceiptKey     string                     `json:"receipt_key"`
	ClockSkew      confx.Duration             `json:"clock_skew,omitempty"`
	MaxTTL         confx.Duration             `json:"max_ttl,omitempty"`
	NonceStore     NonceStore                 `json:"nonce_store,omitempty"`
	Servers        map[string]upstream.Config `json:"servers"`
	// Credentials says, by server id, whose authority a call of the server carries: shared
	// (the servers entry's own headers, the default) or token_exchange (the principal's own
	// token for the server, docs/credentials.md).
	Credentials map[string]Credential `json:"credentials,omitempty"`
	// Identity verifies the users' access tokens (the subject tokens the gateway forwards) for
	// the token_exchange servers, as verdictd's identity section does for preflights.
	Identity *identity.Config `json:"identity,omitempty"`
	// Vault keeps the users' grants of the user_grant servers; Connect serves the pages where
	// the users give them (connect.go).
	Vault            *VaultConfig   `json:"vault,omitempty"`
	Connect          *Connect       `json:"connect,omitempty"`
	Callers          []Caller       `json:"callers"`
	AdminTokenSHA256 string         `json:"admin_token_sha256,omitempty"`
	TLS              *httpx.TLS     `json:"tls,omitempty"`
	CallTimeout      confx.Duration `json:"call_timeout,omitempty"`
	RefreshInterval  confx.Duration `json:"refresh_interval,omitempty"`
	JWKSRefresh      confx.Duration `json:"jwks_refresh,omitempty"`
	Limits           Limits         `json:"limits,omitempty"`
	Verdictd         *ReceiptSink   `json:"verdictd,omitempty"`
	// DebugListen, if set, is a loopback address serving the Go runtime profiles
	// (/debug/pprof/) for performance work. Off by default; never a public address.
	DebugListen string `json:"debug_listen,omitempty"`
	// Policy, when set, is the policy file verdictd serves: the executor reads its pins (and
	// nothing else) and refuses to run a tool they hold back. Polled every PolicyPoll.
	Policy     string         `json:"policy,omitempty"`
	PolicyPoll confx.Duration `json:"policy_poll,omitempty"`
	// Tracing, when set, exports OpenTelemetry spans (package internal/tracing; the OTEL_*
	// environment can turn it on too).
	Tracing *tracing.Config `json:"tracing,omitempty"`
	// Shipping, when set, pushes every execution record to log sinks (package ship).
	Shipping *ship.Config `json:"shipping,omitempty"`
}

// TrustedIssuer names a verdictd whose verdicts this executor runs, and where its public keys are.
type TrustedIssuer = confx.Issuer

// NonceStore selects the replay store. kind bbolt (the default) keeps consumed nonces in the
// executor's own record file, which guards one executor. kind etcd keeps them in an etcd cluster
// shared by every executor of a deployment (same endpoints and prefix), so a verdict runs once
// across all of them; the etcd keys (etcdx.Config, read at the section's own level) apply to
// etcd only. Their request_timeout bounds each nonce consumption: an etcd that does not answer
// within it refuses the verdict with nonce_store_unavailable.
type NonceStore struct {
	Kind string `json:"kind,omitempty"`
	etcdx.Config
}

// EtcdTLS are the PEM files of the connection to etcd: ca verifies the servers (system roots
// when empty); cert and key are the executor's client certificate, if etcd asks for one.
type EtcdTLS = etcdx.TLS

// Nonce store kinds.
const (
	NonceStoreBolt = "bbolt"
	NonceStoreEtcd = "etcd"
)

// validate reports the problems of the nonce_store section.
func (n *NonceStore) validate() []error {
	switch n.Kind {
	case "", NonceStoreBolt:
		// A misspelt kind must not leave an executor guarding its own file while its operator
		// believes it shares nonces with the others.
		if !n.Config.Empty() {
			return []error{confx.Place("nonce_store", errors.New("nonce_store: endpoints, prefix, tls, username, password_file and timeouts apply only to kind etcd"))}
		}
		return nil
	case NonceStoreEtcd:
		// "nonce" names the endpoint problems as nonce.NewEtcd reports them at start.
		return n.Config.Validate("nonce_store", "nonce")
	default:
		return []error{confx.Place("nonce_store.kind", fmt.Errorf("nonce_store.kind %q: want bbolt or etcd", n.Kind))}
	}
}

// etcdOptions are the etcd backend's options, without the password (read at start).
func (n *NonceStore) etcdOptions() nonce.EtcdOptions {
	return nonce.EtcdOptions{
		Endpoints:      n.Endpoints,
		Prefix:         n.Prefix,
		TLS:            n.TLS,
		Username:       n.Username,
		DialTimeout:    n.DialTimeout.D(),
		RequestTimeout: n.RequestTimeout.D(),
	}
}

// Limits bound request bodies.
type Limits struct {
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
}

// ReceiptSink is the verdictd that receives this executor's receipts (optional).
type ReceiptSink struct {
	URL       string `json:"url"`
	Token     string `json:"token,omitempty"`
	TokenFile string `json:"token_file,omitempty"`
	// BatchDelay is how long the first receipt of a batch waits for others before the batch is
	// posted (DefaultReceiptBatchDelay when unset; 0: post what is queued at once). A batch is
	// one exchange and, at verdictd, about one commit, however many receipts it carries.
	BatchDelay *confx.Duration `json:"batch_delay,omitempty"`
}

// DefaultReceiptBatchDelay is verdictd.batch_delay when unset: at most this much later a
// receipt's values are offered as prior state, which only ever saves the user a question.
const DefaultReceiptBatchDelay = 50 * time.Millisecond

// maxReceiptBatchDelay bounds verdictd.batch_delay: a receipt that waits longer makes a user who
// repeats a call at once answer a question that its prior state would have offered.
const maxReceiptBatchDelay = time.Second

func (r *ReceiptSink) batchDelay() time.Duration {
	if r.BatchDelay == nil {
		return DefaultReceiptBatchDelay
	}
	return r.BatchDelay.D()
}

// checkReceiptURL refuses a verdictd URL where anyone on the path could read the bearer token
// sent with every receipt, and replay it to post receipts of their own: plain http is accepted
// for a loopback address only (127.0.0.0/8, ::1, localhost), where the token never leaves the
// host.
func checkReceiptURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("verdictd.url: %w", err)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if host := u.Hostname(); !loopback.Host(host) {
			return fmt.Errorf("verdictd.url %q: plain http would send the verdictd token unencrypted to %q; "+
				"http is accepted for a loopback address only (127.0.0.0/8, ::1, localhost); use https", u.Redacted(), host)
		}
	default:
		return fmt.Errorf("verdictd.url %q: want an https:// URL, or http:// on a loopback address", u.Redacted())
	}
	if u.Host == "" {
		return fmt.Errorf("verdictd.url %q: no host", u.Redacted())
	}
	return nil
}

// LoadConfig reads and validates a config file.
func LoadConfig(path string) (*Config, error) { return confx.LoadValid[Config](path) }

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	errs := confx.Required("listen", c.Listen, "data_dir", c.DataDir, "executor_id", c.ExecutorID, "receipt_key", c.ReceiptKey)
	errs = append(errs, c.checkIssuers()...)
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("servers: at least one server is required"))
	}
	for id, s := range c.Servers {
		if err := s.Validate(); err != nil {
			errs = append(errs, confx.At(confx.Key("servers", id), err))
		}
	}
	errs = append(errs, c.validateCredentials()...)
	errs = append(errs, c.NonceStore.validate()...)
	if c.PolicyPoll.D() < 0 {
		errs = append(errs, confx.Place("policy_poll", errors.New("policy_poll must not be negative")))
	}
	if c.PolicyPoll != 0 && c.Policy == "" {
		errs = append(errs, confx.Place("policy_poll", errors.New("policy_poll is set but policy is not: there is nothing to poll")))
	}
	if c.Shipping != nil {
		errs = append(errs, c.Shipping.Validate("shipping")...)
	}
	if c.Tracing != nil {
		errs = append(errs, c.Tracing.Validate("tracing")...)
	}
	errs = append(errs, confx.Callers(CallerTokens(c.Callers))...)
	errs = append(errs, confx.AdminToken(c.AdminTokenSHA256)...)
	errs = append(errs, confx.CheckDuration("clock_skew", c.ClockSkew.D(), MaxClockSkew, "must not be negative",
		"exceeds the 1m limit: verdicts would be accepted that long past their exp, "+
			"longer than verdictd's default 60s verdict lifetime; synchronise the clocks (NTP) instead", ""))
	if c.MaxTTL.D() > DefaultMaxTTL {
		errs = append(errs, confx.Place("max_ttl", fmt.Errorf("max_ttl %s exceeds the contract's 10m", c.MaxTTL.D())))
	}
	errs = append(errs, confx.DebugListen(c.DebugListen)...)
	errs = append(errs, c.checkVerdictd()...)
	return errors.Join(errs...)
}

// checkIssuers checks whose verdicts the executor takes: the trusted issuers, each with its
// key set, and the signature algorithms.
func (c *Config) checkIssuers() []error {
	var errs []error
	if len(c.TrustedIssuers) == 0 {
		errs = append(errs, errors.New("trusted_issuers: at least one issuer is required"))
	}
	errs = append(errs, confx.Issuers("trusted_issuers", c.TrustedIssuers)...)
	return append(errs, confx.Algorithms("algorithms", c.Algorithms)...)
}

// checkVerdictd checks the verdictd section, where receipts are sent.
func (c *Config) checkVerdictd() []error {
	if c.Verdictd == nil {
		return nil
	}
	var errs []error
	if c.Verdictd.URL == "" {
		errs = append(errs, confx.Place("verdictd", errors.New("verdictd.url is required when verdictd is set")))
	} else if err := checkReceiptURL(c.Verdictd.URL); err != nil {
		errs = append(errs, confx.Place("verdictd.url", err))
	}
	// Two tokens would leave one of them unused without a word: say which to keep.
	if c.Verdictd.Token != "" && c.Verdictd.TokenFile != "" {
		errs = append(errs, confx.Place("verdictd.token_file", errors.New("verdictd: set token or token_file, not both")))
	}
	if d := c.Verdictd.batchDelay(); d < 0 || d > maxReceiptBatchDelay {
		errs = append(errs, confx.Place("verdictd.batch_delay", fmt.Errorf("verdictd.batch_delay %s: want 0 to %s", d, maxReceiptBatchDelay)))
	}
	return errs
}

// Caller is a client allowed on /v1/execute: its name, the SHA-256 of its bearer token, and
// whether its W3C trace context may be the parent of its executions. Only a caller trusted for
// tracing (the gateway, which starts each call's trace itself) names the trace_id of the
// execution records; any other caller's trace context is linked, so that no caller chooses the
// trace a record is found under.
type Caller struct {
	Name              string `json:"name"`
	TokenSHA256       string `json:"token_sha256"`
	TrustTraceContext bool   `json:"trust_trace_context,omitempty"`
}

// CallerTokens are the callers' bearer token hashes.
func CallerTokens(callers []Caller) []httpx.Token {
	toks := make([]httpx.Token, len(callers))
	for i, c := range callers {
		toks[i] = httpx.Token{Name: c.Name, TokenSHA256: c.TokenSHA256}
	}
	return toks
}
