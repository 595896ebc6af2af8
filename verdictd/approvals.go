package verdictd

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/upstream"
)

// Console approvals (docs/approvals.md): an ask_user record whose open approvals its tool lets
// the console give creates a pending approval of exactly that call, in the commit of the
// record; an approver decides it through the approvals API; the next preflight of the same
// call reads the decision, acts on it once, and marks it used in the commit of its own record.

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

// errApprovalLimit is the refusal of a preflight that would create one approval too many.
var errApprovalLimit = httpx.Errorf(http.StatusTooManyRequests, api.CodeApprovalLimit,
	"the principal already has %d console approvals pending, the most allowed: wait until one is decided or expires", MaxPendingApprovals)

// newApprovalID returns "apr_" and 130 random bits (crypto/rand.Text): an id is the only
// name of a pending approval in the console's links, so it must not be guessable.
func newApprovalID() string { return "apr_" + rand.Text() }

// storedApproval is an approval as verdictd's bbolt file keeps it: the approval as the API
// shows it (without may_decide and refusal, which depend on who asks), the channels of the
// rule it was created under, and what it was created under besides its call's values: the
// digest of the tool's definition the call was decided against, the policy version and the
// tool's pin. An approval is of the call as the approver saw it, under the rules then in
// force: a tool whose definition changed since is another tool (an unpinned server can change
// what the same arguments do), and a policy or a pin changed since may not allow what was
// approved.
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

// toolDigestOf is the digest of tool's definition, "" when it has no usable one.
func toolDigestOf(tool upstream.Tool, toolErr error) string {
	if toolErr != nil {
		return ""
	}
	return tool.Digest
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

// bindingNow is the binding of server's tool under the policy and the listings in force.
func (s *Service) bindingNow(server, tool string) approvalBinding {
	snap := s.snap.Load()
	t, err := snap.lookup(server, tool)
	return bindingOf(snap.policy, server, tool, toolDigestOf(t, err))
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
	created, _ := time.Parse(time.RFC3339Nano, a.Approval.CreatedAt)
	return store.ApprovalMeta{ID: a.Approval.ApprovalID, Call: a.key(), Principal: a.Approval.Principal,
		Created: created, Pending: a.Approval.State == api.ApprovalPending,
		Unused: a.Approval.State == api.ApprovalApproved && a.Approval.UsedBy == ""}
}

func (a *storedApproval) expiresAt() time.Time {
	t, err := time.Parse(time.RFC3339Nano, a.Approval.ExpiresAt)
	if err != nil {
		return time.Time{} // an unreadable expiry has expired: fail closed
	}
	return t
}

// useBy is when an approved approval lapses unused. An approval without one (decided before
// verdictd bound decisions to a use-by time) has lapsed: fail closed.
func (a *storedApproval) useBy() time.Time {
	t, err := time.Parse(time.RFC3339Nano, a.Approval.UseBy)
	if err != nil {
		return time.Time{}
	}
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
	return a.stateUnder(now, s.bindingNow(a.Approval.Server, a.Approval.Tool))
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

// errApprovalChanged answers a commit that found the approval it would write changed
// (store.ErrApprovalChanged).
var errApprovalChanged = httpx.Errorf(http.StatusConflict, api.CodeApprovalChanged,
	"the call's approval changed while the preflight was decided; nothing was issued, try again")

// callApprovals are the approvals of a call: the newest of its key first, when the tool takes
// console approvals, then every one still pending.
func (s *Service) callApprovals(ctx context.Context, pt *policy.Tool, req *api.Request) ([]*storedApproval, error) {
	var raw [][]byte
	if pt.ApprovalRule().OutOfBand() {
		var err error
		if raw, err = s.approvals.ByCall(ctx, callKey(req.Principal, req.ConversationID, req.Server, req.Tool), maxCallApprovals); err != nil {
			return nil, fmt.Errorf("preflight: read approvals: %w", err)
		}
	}
	// Every pending approval of the call too, however many newer ones it has, and whatever
	// the rule in force (a policy may have dropped console while one was pending, and take it
	// back later): one left out would not be closed by a verdict the host's approval issues,
	// and a decision on it later would approve a call that already ran. The principal's
	// pending ones are bounded.
	pending, err := s.approvals.PendingOf(ctx, req.Principal, pendingScan)
	if err != nil {
		return nil, fmt.Errorf("preflight: read approvals: %w", err)
	}
	raw = append(raw, pending...)
	seen := map[string]bool{}
	out := make([]*storedApproval, 0, len(raw))
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
		out = append(out, a)
	}
	return out, nil
}

// consoleDecisions are the decisions among cands a run may act on: decided (or expired, or
// lapsed) and not yet used, newest first, so that the engine takes the newest of a digest. An
// approval approves only within its use-by time and under the policy version, tool pin and
// tool definition it was created under (b): otherwise it has lapsed, and the engine refuses
// the call approval_lapsed, as it refuses an expired one. It approves nothing (the call waits)
// while the tool has no usable definition (b.toolDigest "", a listing that failed, say: that
// must not use the approval up), or when it does not meet the rule in force (a policy may have
// gained four eyes or a group since it was given): a denial counts whatever they are.
func consoleDecisions(cands []*storedApproval, rule policy.ApprovalRule, b approvalBinding, now time.Time) []gates.ConsoleDecision {
	var out []gates.ConsoleDecision
	for _, a := range cands {
		st := a.stateUnder(now, b)
		if a.Approval.UsedBy != "" || st == api.ApprovalPending {
			continue
		}
		if st == api.ApprovalApproved && (b.toolDigest == "" || !a.meets(rule)) {
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

// approvalWrite is an approval a run writes in the commit of its record, a compare and set
// on the approval as the run read it (Prev, nil for a new one), so that a decision that landed
// meanwhile is never overwritten (a denial lost under a verdict the host's approval issued).
type approvalWrite struct {
	store.ApprovalWrite
	a *storedApproval
	// decided is the state a run acted on, for the metrics: "" for a new pending one.
	decided string
}

// bindApproval completes rec's console approval before rec is encoded: a decision the run
// acted on is marked used by rec, in the state the run found it (an expiry or a lapse is
// written then); an ask_user run gets the pending approval of its exact call, found among
// cands (created under b's policy version and pin) or new. It returns what to write with the
// record, or nil.
func (s *Service) bindApproval(rec *api.Record, cands []*storedApproval, pt *policy.Tool, b approvalBinding, now time.Time) (*approvalWrite, error) {
	ra := rec.Approval
	if ra == nil {
		return closeSettled(rec, cands, now)
	}
	if ra.ApprovalID != "" {
		i := slices.IndexFunc(cands, func(a *storedApproval) bool { return a.Approval.ApprovalID == ra.ApprovalID })
		if i < 0 {
			return nil, errors.New("preflight: the engine acted on an approval it was not given")
		}
		ra.ExpiresAt = cands[i].Approval.ExpiresAt
		if !final(rec.Outcome) {
			// The decision settled the approvals, but the call waits on something else (an
			// answer, a lookup, its trigger): the run that ends it acts on the decision.
			return nil, nil
		}
		used := *cands[i]
		used.Approval.State = ra.State
		used.Approval.UsedBy = rec.RecordID
		enc, err := encodeApproval(&used)
		if err != nil {
			return nil, err
		}
		w := &approvalWrite{ApprovalWrite: store.ApprovalWrite{Meta: used.meta(), Value: enc, Prev: cands[i].raw}, a: &used}
		if st := ra.State; st != cands[i].Approval.State && (st == api.ApprovalExpired || st == api.ApprovalLapsed) {
			// It expires or lapses now, as this run finds it (the sweep had not come by).
			w.decided = st
		}
		return w, nil
	}
	toolDigest := ""
	if rec.ToolSchemaDigest != nil {
		toolDigest = *rec.ToolSchemaDigest
	}
	for _, a := range cands {
		if a.Approval.UsedBy == "" && a.effectiveState(now) == api.ApprovalPending && a.Approval.ArgumentsDigest == ra.ArgumentsDigest &&
			a.ToolDigest == toolDigest && a.PolicyVersion == b.policyVersion && a.Pin == b.pin {
			ra.ApprovalID, ra.State, ra.ExpiresAt = a.Approval.ApprovalID, api.ApprovalPending, a.Approval.ExpiresAt
			return nil, nil
		}
	}
	rule := pt.ApprovalRule()
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
	return &approvalWrite{ApprovalWrite: store.ApprovalWrite{Meta: a.meta(), Value: enc, Admit: s.admitApproval, Scan: pendingScan}, a: a}, nil
}

// final reports whether a record's outcome ends its call: a console decision is used up only
// by such a record, never by one that waits for more.
func final(outcome string) bool {
	switch outcome {
	case api.OutcomeAskUser, api.OutcomeSystemLookup, api.OutcomeDeferred:
		return false
	}
	return true
}

// closeSettled closes the pending approval of a call that got its verdict without it (the
// host approved it, where the policy lets the host): a decision on it later would approve a
// call that already ran, and would let the same call run again. It reads expired from then
// on, used by the record that issued the verdict.
func closeSettled(rec *api.Record, cands []*storedApproval, now time.Time) (*approvalWrite, error) {
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
			return &approvalWrite{ApprovalWrite: store.ApprovalWrite{Meta: closed.meta(), Value: b, Prev: a.raw}, a: &closed}, nil
		}
	}
	return nil, nil
}

// approvalSlots are the open approvals of rec — approval slots, then checklist items of kind
// confirm — with the question each asks.
func approvalSlots(rec *api.Record) []api.ApprovalSlot {
	var ids []string
	for _, sl := range rec.Slots {
		if sl.Kind == api.KindApproval && sl.Status == api.StatusUnknown {
			ids = append(ids, sl.SlotID)
		}
	}
	for _, it := range rec.UserChecklist {
		if it.Kind == "confirm" && it.Status == api.StatusUnknown {
			ids = append(ids, it.ItemID)
		}
	}
	out := make([]api.ApprovalSlot, 0, len(ids))
	for _, id := range ids {
		as := api.ApprovalSlot{SlotID: id}
		for _, q := range rec.Questions {
			if q.SlotID == id {
				as.Question, as.Value = q.Message, q.Value
			}
		}
		out = append(out, as)
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

// admitApproval refuses one more pending approval of a principal whose pending ones, as the
// commit reads them, already number MaxPendingApprovals. Those past their timeout the sweep
// has not marked yet do not count.
func (s *Service) admitApproval(pending [][]byte) error {
	now, n := s.now(), 0
	for _, b := range pending {
		a, err := decodeApproval(b)
		if err != nil {
			return err
		}
		if a.effectiveState(now) == api.ApprovalPending {
			n++
		}
	}
	if n >= MaxPendingApprovals {
		return errApprovalLimit
	}
	return nil
}

// committedApproval counts and announces an approval written with its record.
func (s *Service) committedApproval(w *approvalWrite) {
	if w == nil {
		return
	}
	if w.decided != "" {
		s.metrics.approvals.WithLabelValues(w.decided).Inc()
	}
	s.approvalChanged()
	if w.Prev == nil && slices.Contains(w.a.Channels, string(policy.ChannelWebhook)) {
		// A new pending approval the webhook may decide: asked after the commit, by the pool.
		s.enqueueWebhook(w.a.Approval.ApprovalID)
	}
}

// approvalNotifier wakes the long polls of the approvals API when any approval changes: each
// waiter holds the current channel, which a change closes and replaces. It also counts the
// long polls of each approval, so that they stay bounded (MaxApprovalWaits).
type approvalNotifier struct {
	mu      sync.Mutex
	ch      chan struct{}
	waiters map[string]int
}

// enter counts one more long poll of approval id, unless it already has MaxApprovalWaits.
func (n *approvalNotifier) enter(id string) bool {
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
func (n *approvalNotifier) leave(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waiters[id]--; n.waiters[id] <= 0 {
		delete(n.waiters, id)
	}
}

func (n *approvalNotifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *approvalNotifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

func (s *Service) approvalChanged() { s.approvalNote.notify() }

// pendingApprovals counts the approvals pending now, for the gauge.
func (s *Service) pendingApprovals() float64 {
	raw, err := s.approvals.Pending(context.Background())
	if err != nil {
		return 0
	}
	now, n := s.now(), 0
	for _, b := range raw {
		if a, err := decodeApproval(b); err == nil && a.effectiveState(now) == api.ApprovalPending {
			n++
		}
	}
	return float64(n)
}

// approvalSweep is how often pending approvals past their timeout are marked expired, and
// approved ones left unused lapsed.
const approvalSweep = time.Minute

// sweepApprovals marks, every approvalSweep until ctx ends, the pending approvals past their
// timeout expired and the approved ones that lapsed unused lapsed: they read so anyway, but
// the pending set the gauge counts and the list reads stays the size of what is really
// pending, and verdictd_approvals_total counts each expiry and lapse when it happens rather
// than when its call is made again (which may be never).
func (s *Service) sweepApprovals(ctx context.Context) {
	t := time.NewTicker(approvalSweep)
	defer t.Stop()
	for {
		if err := s.expireApprovals(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("expire approvals", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// expireApprovals marks expired every pending approval past its timeout, and lapsed every
// approved one not used by its use-by time or no longer of the policy version, tool pin or
// tool definition in force, each in a transaction that reads it again (a decision or a
// preflight may have landed meanwhile).
func (s *Service) expireApprovals(ctx context.Context) error {
	pending, err := s.approvals.Pending(ctx)
	if err != nil {
		return err
	}
	unused, err := s.approvals.Unused(ctx)
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
			if s.shownState(a, now) != step.to {
				continue
			}
			marked := false
			err = s.db.Update(ctx, func(tx *bolt.Tx) error {
				marked = false
				cur, err := decodeApproval(s.approvals.GetTx(tx, a.Approval.ApprovalID))
				if err != nil {
					return err
				}
				if cur.Approval.State != step.from || cur.Approval.UsedBy != "" || s.shownState(cur, now) != step.to {
					return nil
				}
				cur.Approval.State = step.to
				enc, err := encodeApproval(cur)
				if err != nil {
					return err
				}
				marked = true
				return s.approvals.PutTx(tx, cur.meta(), enc)
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("approval %s: %w", a.Approval.ApprovalID, err))
				continue
			}
			if marked {
				changed = true
				s.metrics.approvals.WithLabelValues(step.to).Inc()
				s.log.Info("approval "+step.to, "approval_id", a.Approval.ApprovalID, "record_id", a.Approval.RecordID)
			}
		}
	}
	// Long polls are woken only by a change: a sweep that changed nothing has nothing to say.
	if changed {
		s.approvalChanged()
	}
	return errors.Join(errs...)
}
