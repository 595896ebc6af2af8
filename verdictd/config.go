package verdictd

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/approvals"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/tracing"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/ship"
)

// Defaults of the contract (docs/operations.md) and of this implementation.
const (
	DefaultVerdictTTL   = 60 * time.Second
	MaxVerdictTTL       = 10 * time.Minute
	DefaultMaxBodyBytes = 1 << 20
	DefaultMaxSegments  = 512
	DefaultMaxDepth     = 64
	// The user checklist a request carries (gates.Limits says why these are bounded).
	DefaultMaxChecklistItems  = 64
	DefaultMaxExpressionBytes = policy.MaxExprBytes
	DefaultMaxChecklistBytes  = 8 << 10
	// DefaultMaxEvaluationCost is the CEL cost a preflight's expressions may spend together.
	DefaultMaxEvaluationCost = gates.DefaultEvaluationBudget

	// WriteTimeout bounds the writing of one HTTP response (the server's write timeout). A
	// preflight must be decided well within it: see DefaultPreflightTimeout.
	WriteTimeout = 60 * time.Second
	// DefaultPreflightTimeout bounds one preflight from its first byte to its commit. Half the
	// write timeout: the rest covers the commit and the answer, so that a committed record
	// always reaches its caller. MaxPreflightTimeout leaves ten seconds for them.
	DefaultPreflightTimeout = 30 * time.Second
	MaxPreflightTimeout     = WriteTimeout - 10*time.Second

	DefaultRefreshInterval = 30 * time.Second
	DefaultPolicyPoll      = 2 * time.Second
	DefaultClockSkew       = 5 * time.Second
	DefaultJWKSRefresh     = 5 * time.Minute

	// MaxClockSkew bounds clock_skew, as the executor bounds its own. Here the skew is how far
	// ahead of verdictd's clock a receipt's iat may be; clocks kept by NTP differ by well under
	// a second, so a minute (the default verdict lifetime) still leaves a wide margin, and a
	// longer skew would only hide clocks that need fixing.
	MaxClockSkew = time.Minute

	// DefaultReceiptMaxAge is how old a receipt (by its iat) may be when it reaches verdictd.
	// The executor posts a receipt as soon as it is signed and gives up after four attempts
	// within a minute; ten minutes leaves room for a backlog in its queue and is the longest
	// verdict lifetime, so a captured receipt stays replayable no longer than the verdict it
	// reports on could have lived.
	DefaultReceiptMaxAge = 10 * time.Minute
	// MaxReceiptMaxAge bounds receipt_max_age: a day is the default life of the summary a
	// receipt is checked against on a shared state store, and a longer window would only
	// keep captured receipts replayable.
	MaxReceiptMaxAge = 24 * time.Hour

	// Ceilings of the checklist limits. Past them a request's expressions alone could cost
	// seconds of CPU to compile; MaxExpressionBytes is the compiler's own bound.
	MaxChecklistItems  = 1024
	MaxExpressionBytes = policy.MaxExprBytes
	MaxChecklistBytes  = 64 << 10
	// MaxEvaluationCost is ten expressions at their cost limit: past it one preflight could
	// spend tens of seconds of CPU.
	MaxEvaluationCost = 10 * gates.CELCostLimit
)

// Config is verdictd's config file.
type Config struct {
	Listen     string         `json:"listen"`
	DataDir    string         `json:"data_dir"`
	Issuer     string         `json:"issuer"`
	SigningKey string         `json:"signing_key"`
	Policy     string         `json:"policy"`
	VerdictTTL confx.Duration `json:"verdict_ttl,omitempty"`
	// PreflightTimeout bounds one preflight (default 30s, at most MaxPreflightTimeout): one
	// not decided by then is refused (503 preflight_timeout) and nothing of it is recorded.
	PreflightTimeout confx.Duration `json:"preflight_timeout,omitempty"`
	// Callers may call POST /v1/preflight and POST /v1/receipts, each for the principals its
	// entry lists (see Caller).
	Callers []Caller `json:"callers"`
	// Identity, when set, verifies the subject tokens callers forward in the
	// Verdict-Subject-Token header (identity.SubjectTokenHeader): a preflight that carries one
	// is for the token's principal, whatever its caller's entry lists.
	Identity *identity.Config `json:"identity,omitempty"`
	// Approvers, when set, verifies the access tokens of the people who decide console
	// approvals through the approvals API (docs/approvals.md); without it every decision is
	// refused (401).
	Approvers *Approvers `json:"approvers,omitempty"`
	// ApprovalWebhooks bounds the requests to the approval webhooks tools' rules name.
	ApprovalWebhooks ApprovalWebhooks `json:"approval_webhooks,omitempty"`
	// AdminTokenSHA256 guards the records endpoints; without it they answer 401 to everyone.
	AdminTokenSHA256 string     `json:"admin_token_sha256,omitempty"`
	TLS              *httpx.TLS `json:"tls,omitempty"`
	Limits           Limits     `json:"limits,omitempty"`

	// PreviousKeys are public key sets (JWKS files) of retired signing keys whose verdicts may
	// still be live; they are published beside the current key.
	PreviousKeys []string `json:"previous_keys,omitempty"`
	// Executors are the executors whose receipts are accepted.
	Executors []Executor `json:"executors,omitempty"`
	// Algorithms accepted on receipts; empty means EdDSA.
	ReceiptAlgorithms []string `json:"receipt_algorithms,omitempty"`
	// ClockSkew tolerated on receipt times (default 5s, at most MaxClockSkew).
	ClockSkew confx.Duration `json:"clock_skew,omitempty"`
	// ReceiptMaxAge is how old a receipt may be, by its iat, and still be accepted (default
	// DefaultReceiptMaxAge, at least the clock skew, at most MaxReceiptMaxAge).
	ReceiptMaxAge confx.Duration `json:"receipt_max_age,omitempty"`
	// CatalogRefresh is how often every policy server's tools/list is refreshed (default 30s).
	CatalogRefresh confx.Duration `json:"catalog_refresh,omitempty"`
	// PolicyPoll is how often the policy file is checked for a change (default 2s; SIGHUP
	// reloads at once).
	PolicyPoll confx.Duration `json:"policy_poll,omitempty"`
	// JWKSRefresh is how often executor key sets given by URL are refetched (default 5m).
	JWKSRefresh confx.Duration `json:"jwks_refresh,omitempty"`
	// StateStore is where the conversation state lives: this replica's bbolt file (the
	// default) or an etcd cluster shared by every replica.
	StateStore StateStore `json:"state_store,omitempty"`
	// ConversationTTL is how long a conversation's ask counters live after their last change
	// (default DefaultConversationTTL, or state_store.ttl when that is set); an idle
	// conversation is then forgotten, on either state store.
	ConversationTTL confx.Duration `json:"conversation_ttl,omitempty"`
	// MaxConversationsPerPrincipal bounds the live conversations of one principal (default
	// DefaultMaxConversations, at most MaxMaxConversations): a preflight that would start one
	// more is refused (429 conversation_limit).
	MaxConversationsPerPrincipal int `json:"max_conversations_per_principal,omitempty"`
	// DebugListen, if set, is a loopback address serving the Go runtime profiles
	// (/debug/pprof/) for performance work. Off by default; never a public address.
	DebugListen string `json:"debug_listen,omitempty"`
	// Shipping, when set, pushes every decision record to log sinks (package ship).
	Shipping *ship.Config `json:"shipping,omitempty"`
	// Tracing, when set, exports OpenTelemetry spans (package internal/tracing; the OTEL_*
	// environment can turn it on too).
	Tracing *tracing.Config `json:"tracing,omitempty"`
	// Records says what a decision record keeps beyond what the preflight answered.
	Records Records `json:"records,omitempty"`
}

// Records is the records section.
type Records struct {
	// CaptureRequests keeps with each decision record what its preflight decided from (the
	// decoded request, the tool's definition, the state, measurements and approvals it read:
	// api.Capture), so that `verdictd policy replay` can decide it again under another policy.
	// Off by default: a captured request is as sensitive as the call's arguments, and masked
	// exports and sinks mask it whole.
	CaptureRequests bool `json:"capture_requests,omitempty"`
}

// ApprovalWebhooks bounds the requests to approval webhooks: at most InFlight at once
// (default approvals.DefaultWebhookInFlight, at most approvals.MaxWebhookInFlight), and at most Queue new pending
// approvals waiting for one (default approvals.DefaultWebhookQueue, at most approvals.MaxWebhookQueue). An
// approval that finds the queue full is not posted: it stays pending for the console, or
// expires.
type ApprovalWebhooks struct {
	InFlight int `json:"in_flight,omitempty"`
	Queue    int `json:"queue,omitempty"`
}

func (w ApprovalWebhooks) validate() []error {
	var errs []error
	if w.InFlight < 0 || w.InFlight > approvals.MaxWebhookInFlight {
		errs = append(errs, confx.Place("approval_webhooks.in_flight",
			fmt.Errorf("approval_webhooks.in_flight %d: want from 1 to %d (omit it for %d)", w.InFlight, approvals.MaxWebhookInFlight, approvals.DefaultWebhookInFlight)))
	}
	if w.Queue < 0 || w.Queue > approvals.MaxWebhookQueue {
		errs = append(errs, confx.Place("approval_webhooks.queue",
			fmt.Errorf("approval_webhooks.queue %d: want from 1 to %d (omit it for %d)", w.Queue, approvals.MaxWebhookQueue, approvals.DefaultWebhookQueue)))
	}
	return errs
}

// DefaultGroupsClaim is the claim an approver's groups are read from unless groups_claim says
// otherwise.
const DefaultGroupsClaim = "groups"

// Approvers is the approvers section: the issuers whose access tokens approvers present
// (the identity section's shape: each issuer's audience is verdictd's own approvals resource
// URI), the claim their groups are read from, and the group of the approvals' admins.
type Approvers struct {
	Issuers     []identity.Issuer `json:"issuers"`
	GroupsClaim string            `json:"groups_claim,omitempty"`
	// AdminGroup, when set, names the admins of the approvals API: a token that carries it in
	// its groups reads every approval, those only a webhook decides included (an audit, never
	// a decision: deciding needs the tool's approver role like anyone's).
	AdminGroup string `json:"admin_group,omitempty"`
}

// admin reports whether p is an admin of the approvals API.
func (a *Approvers) admin(p *identity.Principal) bool {
	return a != nil && a.AdminGroup != "" && slices.Contains(p.Groups, a.AdminGroup)
}

func (a *Approvers) identity() identity.Config { return identity.Config{Issuers: a.Issuers} }

func (a *Approvers) groupsClaim() string { return cmp.Or(a.GroupsClaim, DefaultGroupsClaim) }

func (c *Config) validateApprovers() []error {
	a := c.Approvers
	if a == nil {
		return nil
	}
	var errs []error
	cfg := a.identity()
	errs = append(errs, confx.At("approvers", cfg.Validate()))
	if a.GroupsClaim != "" && strings.TrimSpace(a.GroupsClaim) != a.GroupsClaim {
		errs = append(errs, confx.Place("approvers.groups_claim", fmt.Errorf("approvers.groups_claim %q: surrounding white space", a.GroupsClaim)))
	}
	if a.AdminGroup != "" && strings.TrimSpace(a.AdminGroup) != a.AdminGroup {
		errs = append(errs, confx.Place("approvers.admin_group", fmt.Errorf("approvers.admin_group %q: surrounding white space", a.AdminGroup)))
	}
	errs = append(errs, c.approversBesideIdentity()...)
	return errs
}

// approversBesideIdentity checks an issuer named in both the identity and the approvers
// sections. Its approver tokens must be for another audience than its subject tokens, else a
// subject token the gateway forwards for a user (or a caller holding one) would decide as that
// user; and both must name its people by the same claim, else four eyes would compare two
// different ids of the same person and let them approve their own call.
func (c *Config) approversBesideIdentity() []error {
	if c.Identity == nil {
		return nil
	}
	claim := func(is identity.Issuer) string { return cmp.Or(is.PrincipalClaim, identity.DefaultPrincipalClaim) }
	var errs []error
	for i, a := range c.Approvers.Issuers {
		for _, id := range c.Identity.Issuers {
			if id.Issuer != a.Issuer {
				continue
			}
			key := fmt.Sprintf("approvers.issuers[%d]", i)
			if id.Audience == a.Audience {
				errs = append(errs, confx.Place(key+".audience", fmt.Errorf("%s.audience %q: the identity section accepts this issuer's tokens for the same audience; "+
					"approver tokens need their own (verdictd's approvals resource), or a subject token would decide", key, a.Audience)))
			}
			if claim(id) != claim(a) {
				errs = append(errs, confx.Place(key+".principal_claim", fmt.Errorf("%s.principal_claim %q: the identity section names this issuer's principals by %q; "+
					"four eyes compares the two, so they must be the same", key, claim(a), claim(id))))
			}
		}
	}
	return errs
}

// Limits bound what a preflight request may contain (docs/operations.md), and its user checklist.
type Limits struct {
	MaxBodyBytes       int `json:"max_body_bytes,omitempty"`
	MaxSegments        int `json:"max_segments,omitempty"`
	MaxDepth           int `json:"max_depth,omitempty"`
	MaxChecklistItems  int `json:"max_checklist_items,omitempty"`
	MaxExpressionBytes int `json:"max_expression_bytes,omitempty"`
	MaxChecklistBytes  int `json:"max_checklist_bytes,omitempty"`
	MaxEvaluationCost  int `json:"max_evaluation_cost,omitempty"`
}

func (l Limits) validate() []error {
	var errs []error
	if l.MaxBodyBytes < 0 || l.MaxSegments < 0 || l.MaxDepth < 0 ||
		l.MaxChecklistItems < 0 || l.MaxExpressionBytes < 0 || l.MaxChecklistBytes < 0 || l.MaxEvaluationCost < 0 {
		errs = append(errs, confx.Place("limits", errors.New("limits: values must not be negative")))
	}
	for _, c := range []struct {
		name       string
		v, ceiling int
	}{
		{"max_checklist_items", l.MaxChecklistItems, MaxChecklistItems},
		{"max_expression_bytes", l.MaxExpressionBytes, MaxExpressionBytes},
		{"max_checklist_bytes", l.MaxChecklistBytes, MaxChecklistBytes},
		{"max_evaluation_cost", l.MaxEvaluationCost, MaxEvaluationCost},
	} {
		if c.v > c.ceiling {
			errs = append(errs, confx.Place(confx.Key("limits", c.name), fmt.Errorf("limits.%s %d exceeds %d", c.name, c.v, c.ceiling)))
		}
	}
	return errs
}

// Executor is an executor whose receipts verdictd accepts: its id (the receipt issuer) and
// where its public receipt keys are (a JWKS file path or URL).
type Executor = confx.Issuer

// LoadConfig reads and validates a config file.
func LoadConfig(path string) (*Config, error) { return confx.LoadValid[Config](path) }

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	errs := confx.Required("listen", c.Listen, "data_dir", c.DataDir, "issuer", c.Issuer, "signing_key", c.SigningKey, "policy", c.Policy)
	errs = append(errs, confx.CheckDuration("verdict_ttl", c.VerdictTTL.D(), MaxVerdictTTL, "is negative",
		"exceeds the contract's 10m", "is under one second: verdict times are whole seconds"))
	errs = append(errs, confx.CheckDuration("preflight_timeout", c.PreflightTimeout.D(), MaxPreflightTimeout, "must not be negative",
		fmt.Sprintf("exceeds %s: the decision, its commit and the answer must fit in the %s write timeout", MaxPreflightTimeout, WriteTimeout), ""))
	errs = append(errs, checkCallers(c.Callers)...)
	errs = append(errs, c.ApprovalWebhooks.validate()...)
	if c.Identity != nil {
		errs = append(errs, confx.At("identity", c.Identity.Validate()))
	}
	errs = append(errs, c.validateApprovers()...)
	errs = append(errs, confx.AdminToken(c.AdminTokenSHA256)...)
	errs = append(errs, c.Limits.validate()...)
	errs = append(errs, c.checkKeys()...)
	errs = append(errs, c.StateStore.validate()...)
	errs = append(errs, c.validateConversations()...)
	if c.Shipping != nil {
		errs = append(errs, c.Shipping.Validate("shipping")...)
	}
	if c.Tracing != nil {
		errs = append(errs, c.Tracing.Validate("tracing")...)
	}
	errs = append(errs, confx.DebugListen(c.DebugListen)...)
	errs = append(errs, c.checkReceiptTimes()...)
	// In a fixed order, so that one config is refused with one message, the same each time.
	for _, s := range []struct {
		name string
		d    confx.Duration
	}{{"catalog_refresh", c.CatalogRefresh}, {"policy_poll", c.PolicyPoll}, {"jwks_refresh", c.JWKSRefresh}} {
		if s.d.D() < 0 {
			errs = append(errs, confx.Place(s.name, fmt.Errorf("%s must not be negative", s.name)))
		}
	}
	return errors.Join(errs...)
}

// checkKeys checks the key files and sets verdictd verifies with: its previous signing keys,
// the executors' receipt keys and the receipts' algorithms.
func (c *Config) checkKeys() []error {
	var errs []error
	for i, p := range c.PreviousKeys {
		if p == "" {
			errs = append(errs, confx.Place(confx.Index("previous_keys", i), fmt.Errorf("previous_keys[%d]: empty path", i)))
		}
	}
	errs = append(errs, confx.Issuers("executors", c.Executors)...)
	return append(errs, confx.Algorithms("receipt_algorithms", c.ReceiptAlgorithms)...)
}

// checkReceiptTimes checks the times a receipt is judged by: how far ahead of verdictd's
// clock it may be, and how old.
func (c *Config) checkReceiptTimes() []error {
	return []error{
		confx.CheckDuration("clock_skew", c.ClockSkew.D(), MaxClockSkew, "must not be negative",
			"exceeds the 1m limit: receipts would be accepted that far ahead of verdictd's clock, "+
				"longer than the default 60s verdict lifetime; synchronise the clocks (NTP) instead", ""),
		confx.CheckDuration("receipt_max_age", c.ReceiptMaxAge.D(), MaxReceiptMaxAge, "must not be negative",
			"exceeds the 24h limit: older receipts only stay replayable", "is under a second: receipt times count whole seconds"),
	}
}

// receiptMaxAge is receipt_max_age with the default applied.
func (c *Config) receiptMaxAge() time.Duration { return c.ReceiptMaxAge.Or(DefaultReceiptMaxAge) }

// TTL is the verdict lifetime with the default applied.
func (c *Config) TTL() time.Duration { return c.VerdictTTL.Or(DefaultVerdictTTL) }

func (c *Config) preflightTimeout() time.Duration {
	return c.PreflightTimeout.Or(DefaultPreflightTimeout)
}

func (c *Config) limits() gates.Limits {
	return gates.Limits{
		MaxBytes:    cmp.Or(c.Limits.MaxBodyBytes, DefaultMaxBodyBytes),
		MaxSegments: cmp.Or(c.Limits.MaxSegments, DefaultMaxSegments),
		MaxDepth:    cmp.Or(c.Limits.MaxDepth, DefaultMaxDepth),

		MaxChecklistItems: cmp.Or(c.Limits.MaxChecklistItems, DefaultMaxChecklistItems),
		MaxExprBytes:      cmp.Or(c.Limits.MaxExpressionBytes, DefaultMaxExpressionBytes),
		MaxChecklistBytes: cmp.Or(c.Limits.MaxChecklistBytes, DefaultMaxChecklistBytes),
	}
}

// evaluationBudget is the CEL cost a preflight's expressions may spend together.
func (c *Config) evaluationBudget() uint64 {
	return uint64(cmp.Or(c.Limits.MaxEvaluationCost, DefaultMaxEvaluationCost))
}
