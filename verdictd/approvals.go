package verdictd

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
)

// Console approvals (docs/approvals.md): an ask_user record whose open approvals its tool lets
// the console give creates a pending approval of exactly that call, in the commit of the
// record; an approver decides it through the approvals API; the next preflight of the same
// call reads the decision, acts on it once, and marks it used in the commit of its own record.

// maxCallApprovals bounds the approvals of one call a preflight reads: the newest decide.
const maxCallApprovals = 16

// newApprovalID returns "apr_" and 130 random bits (crypto/rand.Text): an id is the only
// name of a pending approval in the console's links, so it must not be guessable.
func newApprovalID() string { return "apr_" + rand.Text() }

// storedApproval is an approval as verdictd's bbolt file keeps it: the approval as the API
// shows it (without may_decide and refusal, which depend on who asks) and the channels of the
// rule it was created under.
type storedApproval struct {
	Approval api.Approval `json:"approval"`
	Channels []string     `json:"channels"`
}

// callKey is what an approval belongs to: the principal, conversation, server and tool of the
// call. The arguments digest tells the calls of one key apart.
func callKey(principal, conversation, server, tool string) string {
	return principal + "\x00" + conversation + "\x00" + server + "\x00" + tool
}

func (a *storedApproval) key() string {
	return callKey(a.Approval.Principal, a.Approval.ConversationID, a.Approval.Server, a.Approval.Tool)
}

func (a *storedApproval) meta() store.ApprovalMeta {
	created, _ := time.Parse(time.RFC3339Nano, a.Approval.CreatedAt)
	return store.ApprovalMeta{ID: a.Approval.ApprovalID, Call: a.key(), Created: created,
		Pending: a.Approval.State == api.ApprovalPending}
}

func (a *storedApproval) expiresAt() time.Time {
	t, err := time.Parse(time.RFC3339Nano, a.Approval.ExpiresAt)
	if err != nil {
		return time.Time{} // an unreadable expiry has expired: fail closed
	}
	return t
}

// effectiveState is the approval's state as of now: a pending one past its expiry is expired.
func (a *storedApproval) effectiveState(now time.Time) string {
	if a.Approval.State == api.ApprovalPending && !now.Before(a.expiresAt()) {
		return api.ApprovalExpired
	}
	return a.Approval.State
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
	return &a, nil
}

// callApprovals are the approvals of a call key, newest first; none when the tool takes no
// console approvals.
func (s *Service) callApprovals(ctx context.Context, pt *policy.Tool, req *api.Request) ([]*storedApproval, error) {
	if !pt.ApprovalRule().Allows(policy.ChannelConsole) {
		return nil, nil
	}
	raw, err := s.approvals.ByCall(ctx, callKey(req.Principal, req.ConversationID, req.Server, req.Tool), maxCallApprovals)
	if err != nil {
		return nil, fmt.Errorf("preflight: read approvals: %w", err)
	}
	out := make([]*storedApproval, 0, len(raw))
	for _, b := range raw {
		a, err := decodeApproval(b)
		if err != nil {
			return nil, fmt.Errorf("preflight: %w", err)
		}
		out = append(out, a)
	}
	return out, nil
}

// consoleDecisions are the decisions among cands a run may act on: decided (or expired) and
// not yet used, newest first, so that the engine takes the newest of a digest.
func consoleDecisions(cands []*storedApproval, now time.Time) []gates.ConsoleDecision {
	var out []gates.ConsoleDecision
	for _, a := range cands {
		st := a.effectiveState(now)
		if a.Approval.UsedBy != "" || st == api.ApprovalPending {
			continue
		}
		out = append(out, gates.ConsoleDecision{ApprovalID: a.Approval.ApprovalID,
			ArgumentsDigest: a.Approval.ArgumentsDigest, State: st, DecidedBy: a.Approval.DecidedBy})
	}
	return out
}

// approvalWrite is an approval a run writes in the commit of its record.
type approvalWrite struct {
	a     *storedApproval
	value []byte
	// decided is the state a run acted on, for the metrics: "" for a new pending one.
	decided string
}

// bindApproval completes rec's console approval before rec is encoded: a decision the run
// acted on is marked used by rec; an ask_user run gets the pending approval of its exact
// call, found among cands or new. It returns what to write with the record, or nil.
func (s *Service) bindApproval(rec *api.Record, cands []*storedApproval, pt *policy.Tool, now time.Time) (*approvalWrite, error) {
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
		used.Approval.State = used.effectiveState(now)
		used.Approval.UsedBy = rec.RecordID
		b, err := encodeApproval(&used)
		if err != nil {
			return nil, err
		}
		w := &approvalWrite{a: &used, value: b}
		if cands[i].Approval.State == api.ApprovalPending {
			// It expires now, as this run finds it (the sweep had not come by).
			w.decided = used.Approval.State
		}
		return w, nil
	}
	for _, a := range cands {
		if a.Approval.UsedBy == "" && a.effectiveState(now) == api.ApprovalPending && a.Approval.ArgumentsDigest == ra.ArgumentsDigest {
			ra.ApprovalID, ra.State, ra.ExpiresAt = a.Approval.ApprovalID, api.ApprovalPending, a.Approval.ExpiresAt
			return nil, nil
		}
	}
	rule := pt.ApprovalRule()
	a := &storedApproval{Channels: ra.Channels, Approval: api.Approval{
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
	b, err := encodeApproval(a)
	if err != nil {
		return nil, err
	}
	return &approvalWrite{a: a, value: b}, nil
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
			return &approvalWrite{a: &closed, value: b}, nil
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

// putApprovalTx writes w in tx, the transaction of its record.
func (s *Service) putApprovalTx(tx *bolt.Tx, w *approvalWrite) error {
	if w == nil {
		return nil
	}
	return s.approvals.PutTx(tx, w.a.meta(), w.value)
}

// committedApproval counts and announces an approval written with its record.
func (s *Service) committedApproval(w *approvalWrite) {
	if w == nil {
		return
	}
	if w.decided == api.ApprovalExpired {
		s.metrics.approvals.WithLabelValues(api.ApprovalExpired).Inc()
	}
	s.approvalChanged()
}

// approvalNotifier wakes the long polls of the approvals API when any approval changes: each
// waiter holds the current channel, which a change closes and replaces.
type approvalNotifier struct {
	mu sync.Mutex
	ch chan struct{}
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

// approvalSweep is how often pending approvals past their timeout are marked expired.
const approvalSweep = time.Minute

// sweepApprovals marks expired, every approvalSweep until ctx ends, the pending approvals
// past their timeout: they read expired anyway, but the pending set the gauge counts and the
// list reads stays the size of what is really pending, and verdictd_approvals_total counts
// each expiry when it happens rather than when its call is made again (which may be never).
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

// expireApprovals marks expired every pending approval past its timeout, each in a
// transaction that reads it again (a decision may have landed meanwhile).
func (s *Service) expireApprovals(ctx context.Context) error {
	raw, err := s.approvals.Pending(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	for _, b := range raw {
		a, err := decodeApproval(b)
		if err != nil {
			return err
		}
		if a.effectiveState(now) != api.ApprovalExpired {
			continue
		}
		expired := false
		err = s.db.Update(ctx, func(tx *bolt.Tx) error {
			expired = false
			cur, err := decodeApproval(s.approvals.GetTx(tx, a.Approval.ApprovalID))
			if err != nil {
				return err
			}
			if cur.Approval.State != api.ApprovalPending || cur.effectiveState(now) != api.ApprovalExpired {
				return nil
			}
			cur.Approval.State = api.ApprovalExpired
			enc, err := encodeApproval(cur)
			if err != nil {
				return err
			}
			expired = true
			return s.approvals.PutTx(tx, cur.meta(), enc)
		})
		if err != nil {
			return err
		}
		if expired {
			s.metrics.approvals.WithLabelValues(api.ApprovalExpired).Inc()
			s.log.Info("approval expired", "approval_id", a.Approval.ApprovalID, "record_id", a.Approval.RecordID)
		}
	}
	if len(raw) > 0 {
		s.approvalChanged()
	}
	return nil
}
