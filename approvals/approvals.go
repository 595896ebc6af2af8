// Package approvals owns verdictd's out-of-band approvals (docs/approvals.md): an ask_user
// record whose open approvals its tool lets the console or a webhook give creates a pending
// approval of exactly that call, in the commit of the record ([Call.Bind]); an approver
// decides it through the approvals API ([Service.HandleDecide]), or the rule's webhook
// through the same path; the next preflight of the same call reads the decision
// ([Service.OfCall]), acts on it once, and marks it used in the commit of its own record. A
// long poll waits for a decision, and a sweep marks those past their time expired or lapsed.
// A [Keeper] keeps them.
package approvals

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/metricx"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
)

// A Keeper keeps the approvals (store.Approvals, in verdictd's bbolt file), each the opaque
// encoding this package gives it. Every write is a compare and set of one approval
// (store.ApprovalWrite), so that a decision, the preflight that uses it and the sweep never
// overwrite one another, on one replica or several; one that goes with a decision record is
// made by the record's commit (convstate.Run.Commit), so that the two are one step.
type Keeper interface {
	// Get returns the approval id, or nil; ByCall those of the call key and Newest those keep
	// accepts (pendingOnly: of the pending ones), newest first, and PendingOf the pending ones
	// of principal, each at most limit; Pending every pending one and Unused every one
	// approved and not yet used, in no particular order.
	Get(ctx context.Context, id string) ([]byte, error)
	ByCall(ctx context.Context, call string, limit int) ([][]byte, error)
	Newest(ctx context.Context, limit int, pendingOnly bool, keep func(value []byte) bool) ([][]byte, error)
	PendingOf(ctx context.Context, principal string, limit int) ([][]byte, error)
	Pending(ctx context.Context) ([][]byte, error)
	Unused(ctx context.Context) ([][]byte, error)
	// Write writes w, or fails with store.ErrApprovalChanged or Admit's error.
	Write(ctx context.Context, w *store.ApprovalWrite) error
	// Watch calls changed at each change another process makes, until ctx ends: the long
	// polls of this one wait for those too. A keeper no other process writes returns at once.
	Watch(ctx context.Context, changed func()) error
	// Claim reports whether this process takes task (one approval's webhook delivery, one
	// sweep): of the processes sharing the keeper, the first to claim it within ttl. A keeper
	// no other process writes gives every task to its own.
	Claim(ctx context.Context, task string, ttl time.Duration) (bool, error)
}

// Options are what a Service is made of.
type Options struct {
	Keeper Keeper
	// InForce returns the policy in force and the digest of server's tool as listed now, ""
	// when it has no usable definition.
	InForce func(server, tool string) (*policy.Policy, string)
	// Authenticate tells who asks the approvals API, or refuses (an *httpx.Error).
	Authenticate func(r *http.Request) (*Viewer, error)
	Now          func() time.Time
	Logger       *slog.Logger
	Metrics      prometheus.Registerer // the series of docs/operations.md that count approvals
	// HTTPClient posts to the webhooks (nil: a client of its own); WebhookInFlight and
	// WebhookQueue bound them (approval_webhooks; 0 for DefaultWebhookInFlight, DefaultWebhookQueue).
	HTTPClient                    *http.Client
	WebhookInFlight, WebhookQueue int
	// WebhookResult, when set, is told each webhook request's result once it is counted.
	WebhookResult func(approvalID, result string)
}

// Service is the approvals of one verdictd: Run sweeps them, Close stops its webhook
// requests.
type Service struct {
	keeper       Keeper
	inForce      func(server, tool string) (*policy.Policy, string)
	authenticate func(r *http.Request) (*Viewer, error)
	now          func() time.Time
	log          *slog.Logger
	// decisions counts verdictd_approvals_total, hooks verdictd_approval_webhook_total.
	decisions, hooks *prometheus.CounterVec
	webhooks         *webhookPool
	// note wakes the long polls when an approval changes; waitsEnded (closed by EndWaits)
	// ends them all at shutdown.
	note       notifier
	waitsEnded chan struct{}
	endWaits   sync.Once
}

// New makes the approvals of o and starts their webhook workers.
func New(o Options) *Service {
	s := &Service{keeper: o.Keeper, inForce: o.InForce, authenticate: o.Authenticate, now: o.Now, log: o.Logger,
		waitsEnded: make(chan struct{}),
		decisions: metricx.CounterVec("verdictd_approvals_total",
			"Console and webhook approvals decided, by decision: approved or denied by an approver or the webhook, expired once past its timeout, lapsed once approved but not used by its use-by time or under another policy version, tool pin or tool definition (expired and lapsed found by the sweep or the next preflight of the call).", "decision"),
		hooks: metricx.CounterVec("verdictd_approval_webhook_total",
			"Pending approvals posted to their tool's approval webhook, by result: approve or deny (recorded), failed (no decision: transport, status, timeout, malformed answer, other digest), ignored (decided, expired or no longer the webhook's meanwhile), dropped (the queue was full, never posted).", "result"),
	}
	metricx.Zero(s.decisions, api.ApprovalApproved, api.ApprovalDenied, api.ApprovalExpired, api.ApprovalLapsed)
	metricx.Zero(s.hooks, webhookApprove, webhookDeny, webhookFailed, webhookIgnored, webhookDropped)
	o.Metrics.MustRegister(s.decisions, s.hooks, metricx.GaugeFunc("verdictd_approvals_pending",
		"Console and webhook approvals pending now (created, not decided, not expired).", s.pending))
	s.startWebhooks(o.HTTPClient, o.WebhookInFlight, o.WebhookQueue, o.WebhookResult)
	return s
}

// maxCallApprovals bounds the approvals of one call a preflight reads: the newest decide.
const maxCallApprovals = 16

// MaxPendingApprovals bounds the approvals one principal may have pending at once. The model
// chooses a call's arguments, and every call with other values is another approval, kept in
// full until it is decided or expires: without a bound one principal's agent could fill the
// file, the console's list and the sweep. A preflight that would create one more is refused
// 429 approval_limit, nothing recorded.
const MaxPendingApprovals = 64

// pendingScan bounds how many entries of a principal's pending index are read: the pending
// ones, and those expired since the last sweep.
const pendingScan = 16 * MaxPendingApprovals

// ErrLimit is the refusal of a preflight that would create one approval too many.
var ErrLimit = httpx.Errorf(http.StatusTooManyRequests, api.CodeApprovalLimit,
	"the principal already has %d console approvals pending, the most allowed: wait until one is decided or expires", MaxPendingApprovals)

// ErrChanged answers a commit that found the approval it would write changed
// (store.ErrApprovalChanged).
var ErrChanged = httpx.Errorf(http.StatusConflict, api.CodeApprovalChanged,
	"the call's approval changed while the preflight was decided; nothing was issued, try again")

// newApprovalID returns "apr_" and 130 random bits (crypto/rand.Text): an id is the only
// name of a pending approval in the console's links, so it must not be guessable.
func newApprovalID() string { return "apr_" + rand.Text() }

// storedApproval is an approval as the keeper keeps it: the approval as the API shows it
// (without may_decide and refusal, which depend on who asks), the channels of the rule it was
// created under, and what it was created under besides its call's values: the digest of the
// tool's definition the call was decided against, the policy version and the tool's pin. An
// approval is of the call as the approver saw it, under the rules then in force: a tool whose
// definition changed since is another tool (an unpinned server can change what the same
// arguments do), and a policy or a pin changed since may not allow what was approved.
type storedApproval struct {
	Approval   api.Approval `json:"approval"`
	Channels   []string     `json:"channels"`
	ToolDigest string       `json:"tool_schema_digest,omitempty"`
	// PolicyVersion and Pin are the policy version and the tool's pin ("" for none) it was
	// created under.
	PolicyVersion string `json:"policy_version,omitempty"`
	Pin           string `json:"pin,omitempty"`
	// Readers are the approvers the rule named by id when it was created (the approval shows
	// its group; these it keeps to itself): with the group, who holds the approver role.
	Readers []string `json:"readers,omitempty"`
	// UseWithinMillis is the rule's use_within when it was created, in milliseconds: an
	// approval is used within it of its decision, or lapses.
	UseWithinMillis int64 `json:"use_within_ms,omitempty"`
	// DecidedGroups are the groups required of the approver when they decided (the rule's
	// as created and as then in force) that their token carried: a rule that names a group
	// later is met by a decision only if it was checked then.
	DecidedGroups []string `json:"decided_groups,omitempty"`

	// raw is the encoding it was read from: a run that changes it writes only if it is still
	// the one stored.
	raw []byte
}

// callKey is what an approval belongs to: the principal, conversation, server and tool of the
// call. The arguments digest tells the calls of one key apart.
func callKey(principal, conversation, server, tool string) string {
	return principal + "\x00" + conversation + "\x00" + server + "\x00" + tool
}

// approvalBinding is what an approved approval stays usable under: the policy version in
// force, the tool's pin in it ("" for none), and the digest of the tool's definition as listed
// now ("" when the tool has no usable definition: nothing can be told of it then).
type approvalBinding struct {
	policyVersion, pin, toolDigest string
}

// bindingOf is the binding of server's tool under p, whose definition has digest toolDigest.
func bindingOf(p *policy.Policy, server, tool, toolDigest string) approvalBinding {
	b := approvalBinding{toolDigest: toolDigest}
	if p != nil {
		b.policyVersion = p.Version
		if pin := p.Pins[server]; pin != nil {
			b.pin = pin.Tools[tool]
		}
	}
	return b
}

// ruleNow is the approval rule of a's tool in the policy in force.
func (s *Service) ruleNow(a *storedApproval) policy.ApprovalRule {
	p, _ := s.inForce(a.Approval.Server, a.Approval.Tool)
	return p.Tool(a.Approval.Server, a.Approval.Tool).ApprovalRule()
}

// of reports whether a is an approval of req's call: the same principal, conversation, server
// and tool.
func (a *storedApproval) of(req *api.Request) bool {
	return a.Approval.Principal == req.Principal && a.Approval.ConversationID == req.ConversationID &&
		a.Approval.Server == req.Server && a.Approval.Tool == req.Tool
}

func (a *storedApproval) key() string {
	return callKey(a.Approval.Principal, a.Approval.ConversationID, a.Approval.Server, a.Approval.Tool)
}

func (a *storedApproval) meta() store.ApprovalMeta {
	return store.ApprovalMeta{ID: a.Approval.ApprovalID, Call: a.key(), Principal: a.Approval.Principal,
		Created: timeOf(a.Approval.CreatedAt), Pending: a.Approval.State == api.ApprovalPending,
		Unused: a.Approval.State == api.ApprovalApproved && a.Approval.UsedBy == ""}
}

// expiresAt is when a pending approval expires, and useBy when an approved one lapses unused.
// An unreadable time has passed, and so has a missing use-by (an approval decided before
// verdictd bound decisions to one): fail closed.
func (a *storedApproval) expiresAt() time.Time { return timeOf(a.Approval.ExpiresAt) }
func (a *storedApproval) useBy() time.Time     { return timeOf(a.Approval.UseBy) }

func timeOf(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s) // the zero time when unreadable
	return t
}

// effectiveState is the approval's state as of now: a pending one past its expiry is expired,
// and an approved one not used by its use-by time has lapsed.
func (a *storedApproval) effectiveState(now time.Time) string {
	switch {
	case a.Approval.State == api.ApprovalPending && !now.Before(a.expiresAt()):
		return api.ApprovalExpired
	case a.Approval.State == api.ApprovalApproved && a.Approval.UsedBy == "" && !now.Before(a.useBy()):
		return api.ApprovalLapsed
	}
	return a.Approval.State
}

// stateUnder is the approval's state as of now under b: besides effectiveState, an approved
// one not yet used has lapsed once the policy version, the tool's pin or the tool's definition
// is another than it was created under (a definition b cannot tell, "", changes nothing here).
func (a *storedApproval) stateUnder(now time.Time, b approvalBinding) string {
	st := a.effectiveState(now)
	if st == api.ApprovalApproved && a.Approval.UsedBy == "" &&
		(a.PolicyVersion != b.policyVersion || a.Pin != b.pin || (b.toolDigest != "" && a.ToolDigest != b.toolDigest)) {
		return api.ApprovalLapsed
	}
	return st
}

// shownState is the approval's state as of now under the policy and the listings in force:
// what the approvals API shows, and what the sweep writes.
func (s *Service) shownState(a *storedApproval, now time.Time) string {
	p, digest := s.inForce(a.Approval.Server, a.Approval.Tool)
	return a.stateUnder(now, bindingOf(p, a.Approval.Server, a.Approval.Tool, digest))
}

func encodeApproval(a *storedApproval) ([]byte, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode approval: %w", err)
	}
	return b, nil
}

func decodeApproval(b []byte) (*storedApproval, error) {
	var a storedApproval
	if err := apijson.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("decode approval: %w", err)
	}
	a.raw = b
	return &a, nil
}

// A Call is the approvals of one call as its preflight read them, under the conversation's
// lock, with the tool's rule and binding of the policy that preflight decides under.
type Call struct {
	s       *Service
	rule    policy.ApprovalRule
	binding approvalBinding
	cands   []*storedApproval
}

// OfCall reads the approvals of req's call for its preflight under p, the tool's definition
// having digest toolDigest ("" when it has none usable): the newest of its key first, when
// the tool takes console approvals, then every one still pending.
func (s *Service) OfCall(ctx context.Context, req *api.Request, p *policy.Policy, toolDigest string) (*Call, error) {
	c := &Call{s: s, rule: p.Tool(req.Server, req.Tool).ApprovalRule(), binding: bindingOf(p, req.Server, req.Tool, toolDigest)}
	var raw [][]byte
	if c.rule.OutOfBand() {
		var err error
		if raw, err = s.keeper.ByCall(ctx, callKey(req.Principal, req.ConversationID, req.Server, req.Tool), maxCallApprovals); err != nil {
			return nil, fmt.Errorf("preflight: read approvals: %w", err)
		}
	}
	// Every pending approval of the call too, however many newer ones it has, and whatever
	// the rule in force (a policy may have dropped console while one was pending, and take it
	// back later): one left out would not be closed by a verdict the host's approval issues,
	// and a decision on it later would approve a call that already ran. The principal's
	// pending ones are bounded.
	pending, err := s.keeper.PendingOf(ctx, req.Principal, pendingScan)
	if err != nil {
		return nil, fmt.Errorf("preflight: read approvals: %w", err)
	}
	raw = append(raw, pending...)
	seen := map[string]bool{}
	c.cands = make([]*storedApproval, 0, len(raw))
	for _, b := range raw {
		a, err := decodeApproval(b)
		if err != nil {
			return nil, fmt.Errorf("preflight: %w", err)
		}
		// The key joins its parts with NUL, which a principal or a conversation id may
		// contain: ("p", "a\x00b") and ("p\x00a", "b") share one. Only an approval of
		// exactly this call is one.
		if !a.of(req) || seen[a.Approval.ApprovalID] {
			continue
		}
		seen[a.Approval.ApprovalID] = true
		c.cands = append(c.cands, a)
	}
	return c, nil
}

// Decisions are the decisions the engine may act on: decided (or expired, or lapsed) and not
// yet used, newest first, so that the engine takes the newest of a digest. An approval
// approves only within its use-by time and under the policy version, tool pin and tool
// definition it was created under: otherwise it has lapsed, and the engine refuses the call
// approval_lapsed, as it refuses an expired one. It approves nothing (the call waits) while
// the tool has no usable definition (a listing that failed, say: that must not use the
// approval up), or when it does not meet the rule in force (a policy may have gained four eyes
// or a group since it was given): a denial counts whatever they are.
func (c *Call) Decisions(now time.Time) []gates.ConsoleDecision {
	var out []gates.ConsoleDecision
	for _, a := range c.cands {
		st := a.stateUnder(now, c.binding)
		if a.Approval.UsedBy != "" || st == api.ApprovalPending {
			continue
		}
		if st == api.ApprovalApproved && (c.binding.toolDigest == "" || !a.meets(c.rule)) {
			continue
		}
		out = append(out, gates.ConsoleDecision{ApprovalID: a.Approval.ApprovalID,
			ArgumentsDigest: a.Approval.ArgumentsDigest, State: st, DecidedBy: a.Approval.DecidedBy})
	}
	return out
}

// meets reports whether a's decision meets rule: not the principal's own under four eyes,
// and given where rule still takes decisions — by the webhook where it takes the webhook's,
// or in the console where it takes the console's, by one who holds its approver role (a
// member of its group, as checked when it was decided, or an approver its readers name).
func (a *storedApproval) meets(rule policy.ApprovalRule) bool {
	switch {
	case rule.FourEyes && a.Approval.DecidedBy == a.Approval.Principal:
		return false
	case a.Approval.DecidedBy == api.DecidedByWebhook:
		return rule.Allows(policy.ChannelWebhook)
	case !rule.Allows(policy.ChannelConsole):
		// An approver's decision, under a rule that no longer takes the console's.
		return false
	case rule.Group == "" && len(rule.Readers) == 0:
		// A console rule that names no approvers binds none here (the loader refuses such a
		// rule: nobody could read or decide its approvals).
		return true
	}
	return rule.Group != "" && (rule.Group == a.Approval.Group || slices.Contains(a.DecidedGroups, rule.Group)) ||
		slices.Contains(rule.Readers, a.Approval.DecidedBy)
}

// A Write is an approval a run writes in the commit of its record (convstate.Write's
// Approval), a compare and set on the approval as the run read it (Prev, nil for a new one),
// so that a decision that landed meanwhile is never overwritten (a denial lost under a verdict
// the host's approval issued).
type Write struct {
	store.ApprovalWrite
	a *storedApproval
	// decided is the state a run acted on, for the metrics: "" for a new pending one.
	decided string
}

// Bind completes rec's console approval before rec is encoded: a decision the run acted on is
// marked used by rec, in the state the run found it (an expiry or a lapse is written then); an
// ask_user run gets the pending approval of its exact call, found among the call's approvals
// (created under its policy version and pin) or new. It returns what to write with the
// record, or nil; once that is committed, Committed tells of it.
func (c *Call) Bind(rec *api.Record, now time.Time) (*Write, error) {
	ra := rec.Approval
	if ra == nil {
		return closeSettled(rec, c.cands, now)
	}
	if ra.ApprovalID != "" {
		i := slices.IndexFunc(c.cands, func(a *storedApproval) bool { return a.Approval.ApprovalID == ra.ApprovalID })
		if i < 0 {
			return nil, errors.New("preflight: the engine acted on an approval it was not given")
		}
		ra.ExpiresAt = c.cands[i].Approval.ExpiresAt
		if !final(rec.Outcome) {
			// The decision settled the approvals, but the call waits on something else (an
			// answer, a lookup, its trigger): the run that ends it acts on the decision.
			return nil, nil
		}
		used := *c.cands[i]
		used.Approval.State = ra.State
		used.Approval.UsedBy = rec.RecordID
		enc, err := encodeApproval(&used)
		if err != nil {
			return nil, err
		}
		w := &Write{ApprovalWrite: store.ApprovalWrite{Meta: used.meta(), Value: enc, Prev: c.cands[i].raw}, a: &used}
		if st := ra.State; st != c.cands[i].Approval.State && (st == api.ApprovalExpired || st == api.ApprovalLapsed) {
			// It expires or lapses now, as this run finds it (the sweep had not come by).
			w.decided = st
		}
		return w, nil
	}
	toolDigest := ""
	if rec.ToolSchemaDigest != nil {
		toolDigest = *rec.ToolSchemaDigest
	}
	b := c.binding
	for _, a := range c.cands {
		if a.Approval.UsedBy == "" && a.effectiveState(now) == api.ApprovalPending && a.Approval.ArgumentsDigest == ra.ArgumentsDigest &&
			a.ToolDigest == toolDigest && a.PolicyVersion == b.policyVersion && a.Pin == b.pin {
			ra.ApprovalID, ra.State, ra.ExpiresAt = a.Approval.ApprovalID, api.ApprovalPending, a.Approval.ExpiresAt
			return nil, nil
		}
	}
	rule := c.rule
	a := &storedApproval{Channels: ra.Channels, ToolDigest: toolDigest, PolicyVersion: b.policyVersion, Pin: b.pin,
		Readers: slices.Clone(rule.Readers), UseWithinMillis: rule.UseWithin.Milliseconds(), Approval: api.Approval{
			ApprovalID:      newApprovalID(),
			State:           api.ApprovalPending,
			RecordID:        rec.RecordID,
			Principal:       rec.Principal,
			ConversationID:  rec.ConversationID,
			Server:          rec.Server,
			Tool:            rec.Tool,
			Arguments:       ra.Arguments,
			ArgumentsDigest: ra.ArgumentsDigest,
			Slots:           approvalSlots(rec),
			Drafts:          approvalDrafts(rec, ra.Arguments),
			Notices:         slices.Clone(rec.Notices),
			FourEyes:        rule.FourEyes,
			Group:           rule.Group,
			CreatedAt:       now.UTC().Format(time.RFC3339Nano),
			ExpiresAt:       now.Add(rule.Timeout).UTC().Format(time.RFC3339Nano),
		}}
	if a.Approval.Notices == nil {
		a.Approval.Notices = []string{}
	}
	ra.ApprovalID, ra.State, ra.ExpiresAt = a.Approval.ApprovalID, api.ApprovalPending, a.Approval.ExpiresAt
	enc, err := encodeApproval(a)
	if err != nil {
		return nil, err
	}
	// A new one counts against its principal's bound, as the commit finds it.
	return &Write{ApprovalWrite: store.ApprovalWrite{Meta: a.meta(), Value: enc, Admit: c.s.admit, Scan: pendingScan}, a: a}, nil
}

// final reports whether a record's outcome ends its call: a console decision is used up only
// by such a record, never by one that waits for more.
func final(outcome string) bool {
	return !slices.Contains([]string{api.OutcomeAskUser, api.OutcomeSystemLookup, api.OutcomeDeferred}, outcome)
}

// closeSettled closes the pending approval of a call that got its verdict without it (the
// host approved it, where the policy lets the host): a decision on it later would approve a
// call that already ran, and would let the same call run again. It reads expired from then
// on, used by the record that issued the verdict.
func closeSettled(rec *api.Record, cands []*storedApproval, now time.Time) (*Write, error) {
	if rec.Outcome != api.OutcomeVerdictIssued || rec.ArgumentsDigest == nil {
		return nil, nil
	}
	for _, a := range cands {
		if a.Approval.UsedBy == "" && a.effectiveState(now) == api.ApprovalPending && a.Approval.ArgumentsDigest == *rec.ArgumentsDigest {
			closed := *a
			closed.Approval.State, closed.Approval.UsedBy = api.ApprovalExpired, rec.RecordID
			b, err := encodeApproval(&closed)
			if err != nil {
				return nil, err
			}
			return &Write{ApprovalWrite: store.ApprovalWrite{Meta: closed.meta(), Value: b, Prev: a.raw}, a: &closed}, nil
		}
	}
	return nil, nil
}

// approvalSlots are the open approvals of rec — approval slots, then checklist items of kind
// confirm — with the question each asks.
func approvalSlots(rec *api.Record) []api.ApprovalSlot {
	out := []api.ApprovalSlot{}
	add := func(id string) {
		as := api.ApprovalSlot{SlotID: id}
		for _, q := range rec.Questions {
			if q.SlotID == id {
				as.Question, as.Value = q.Message, q.Value
			}
		}
		out = append(out, as)
	}
	for _, sl := range rec.Slots {
		if sl.Kind == api.KindApproval && sl.Status == api.StatusUnknown {
			add(sl.SlotID)
		}
	}
	for _, it := range rec.UserChecklist {
		if it.Kind == "confirm" && it.Status == api.StatusUnknown {
			add(it.ItemID)
		}
	}
	return out
}

// approvalDrafts are the drafted fields of the call, in full.
func approvalDrafts(rec *api.Record, args map[string]any) []api.ApprovalDraft {
	out := []api.ApprovalDraft{}
	for _, sl := range rec.Slots {
		if sl.Kind == api.KindValue && sl.Draft != nil {
			out = append(out, api.ApprovalDraft{Field: sl.SlotID, Text: args[sl.SlotID], Digest: sl.Draft.Digest, Bytes: sl.Draft.Bytes})
		}
	}
	return out
}

// admit refuses one more pending approval of a principal whose pending ones, as the commit
// reads them, already number MaxPendingApprovals. Those past their timeout the sweep has not
// marked yet do not count.
func (s *Service) admit(pending [][]byte) error {
	n, err := s.stillPending(pending)
	if err == nil && n >= MaxPendingApprovals {
		return ErrLimit
	}
	return err
}

// stillPending counts the approvals of raw pending as of now; err is the first it cannot read.
func (s *Service) stillPending(raw [][]byte) (n int, err error) {
	now := s.now()
	for _, b := range raw {
		a, derr := decodeApproval(b)
		switch {
		case derr != nil && err == nil:
			err = derr
		case derr == nil && a.effectiveState(now) == api.ApprovalPending:
			n++
		}
	}
	return n, err
}

// Committed counts and announces w, committed with its record.
func (s *Service) Committed(w *Write) {
	if w == nil {
		return
	}
	if w.decided != "" {
		s.decisions.WithLabelValues(w.decided).Inc()
	}
	s.note.notify()
	if w.Prev == nil && slices.Contains(w.a.Channels, string(policy.ChannelWebhook)) {
		// A new pending approval the webhook may decide: asked after the commit, by the pool.
		s.enqueueWebhook(w.a.Approval.ApprovalID)
	}
}

// notifier wakes the long polls of the approvals API when any approval changes: each waiter
// holds the current channel, which a change closes and replaces. It also counts the long polls
// of each approval, so that they stay bounded (MaxApprovalWaits).
type notifier struct {
	mu      sync.Mutex
	ch      chan struct{}
	waiters map[string]int
}

// enter counts one more long poll of approval id, unless it already has MaxApprovalWaits.
func (n *notifier) enter(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waiters[id] >= MaxApprovalWaits {
		return false
	}
	if n.waiters == nil {
		n.waiters = map[string]int{}
	}
	n.waiters[id]++
	return true
}

// leave counts one long poll of approval id fewer.
func (n *notifier) leave(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waiters[id]--; n.waiters[id] <= 0 {
		delete(n.waiters, id)
	}
}

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// pending counts the approvals pending now, for the gauge.
func (s *Service) pending() float64 {
	raw, err := s.keeper.Pending(context.Background())
	if err != nil {
		return 0
	}
	n, _ := s.stillPending(raw) // an unreadable one is not pending
	return float64(n)
}

// sweepEvery is how often pending approvals past their timeout are marked expired, and
// approved ones left unused lapsed.
const sweepEvery = time.Minute

// Run listens to the changes other processes make and, every sweepEvery until ctx ends, marks
// the pending approvals past their timeout expired and the approved ones that lapsed unused
// lapsed (Expire): they read so anyway, but the pending set the gauge counts and the list
// reads stays the size of what is really pending, and verdictd_approvals_total counts each
// expiry and lapse when it happens rather than when its call is made again (which may be never).
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if err := s.keeper.Watch(ctx, s.note.notify); err != nil && ctx.Err() == nil {
			s.log.Error("watch approvals", "error", err.Error())
		}
	})
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		// One sweep a period across the replicas sharing the keeper: each would find the same
		// approvals, and all but one of their writes would fail their compare.
		period := s.now().Truncate(sweepEvery).UTC().Format(time.RFC3339)
		won, err := s.keeper.Claim(ctx, "sweep/"+period, sweepEvery)
		if err == nil && won {
			err = s.Expire(ctx)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Error("expire approvals", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Expire marks expired every pending approval past its timeout, and lapsed every approved one
// not used by its use-by time or no longer of the policy version, tool pin or tool definition
// in force, each by a compare and set on the approval it read (a decision or a preflight that
// landed meanwhile holds).
func (s *Service) Expire(ctx context.Context) error {
	pending, err := s.keeper.Pending(ctx)
	if err != nil {
		return err
	}
	unused, err := s.keeper.Unused(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	var errs []error
	changed := false
	for _, step := range []struct {
		raw      [][]byte
		from, to string
	}{
		{pending, api.ApprovalPending, api.ApprovalExpired},
		{unused, api.ApprovalApproved, api.ApprovalLapsed},
	} {
		for _, b := range step.raw {
			a, err := decodeApproval(b)
			if err != nil {
				// One unreadable approval must not keep the others open past their time (an
				// unreadable one approves nothing: its reads fail closed).
				errs = append(errs, err)
				continue
			}
			if a.Approval.State != step.from || a.Approval.UsedBy != "" || s.shownState(a, now) != step.to {
				continue
			}
			marked := *a
			marked.Approval.State = step.to
			enc, err := encodeApproval(&marked)
			if err == nil {
				err = s.keeper.Write(ctx, &store.ApprovalWrite{Meta: marked.meta(), Value: enc, Prev: a.raw})
			}
			switch {
			case errors.Is(err, store.ErrApprovalChanged):
				continue // decided or used since it was read: that holds
			case err != nil:
				errs = append(errs, fmt.Errorf("approval %s: %w", a.Approval.ApprovalID, err))
				continue
			}
			changed = true
			s.decisions.WithLabelValues(step.to).Inc()
			s.log.Info("approval "+step.to, "approval_id", a.Approval.ApprovalID, "record_id", a.Approval.RecordID)
		}
	}
	// Long polls are woken only by a change: a sweep that changed nothing has nothing to say.
	if changed {
		s.note.notify()
	}
	return errors.Join(errs...)
}
