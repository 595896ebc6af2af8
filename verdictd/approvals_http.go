package verdictd

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/policy"
)

// Bounds of the approvals API.
const (
	// MaxApprovalList is how many approvals one GET /v1/approvals answers, newest first.
	MaxApprovalList = 200
	// MaxApprovalWait bounds a long poll (?wait=).
	MaxApprovalWait = 60 * time.Second
	// maxDecisionBytes bounds a decision's body: a decision and a digest.
	maxDecisionBytes = 4 << 10
	// MaxApprovalWaits bounds the long polls of one approval waiting at once: the gateway
	// waits with one, a console page or two with theirs. With the pending approvals bounded
	// per principal, the long polls are bounded too, whoever opens them; one more is refused
	// 429 too_many_waits.
	MaxApprovalWaits = 8
)

// An approvalViewer is who asks the approvals API: an approver, whose verified token may
// decide, or a caller, which reads the approvals of the principals it may act for.
type approvalViewer struct {
	approver *identity.Principal
	caller   *authority
}

// viewer authenticates a request of the approvals API: a caller token (read-only), else an
// approver token verified against the approvers section. Every refusal is 401 unauthorized,
// but for an issuer that cannot be reached (503 idp_unavailable: nothing was decided).
func (s *Service) viewer(r *http.Request) (*approvalViewer, error) {
	if name, err := s.callers.Check(r); err == nil {
		act, err := s.authority(r.Context(), r.WithContext(withCaller(r.Context(), name)))
		if err != nil {
			return nil, err
		}
		return &approvalViewer{caller: act}, nil
	}
	h := r.Header.Get("Authorization")
	tok, ok := "", len(h) > len("Bearer ") && strings.EqualFold(h[:len("Bearer ")], "Bearer ")
	if ok {
		tok = strings.TrimSpace(h[len("Bearer "):])
	}
	switch {
	case !ok || tok == "":
		return nil, httpx.Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "an approver or caller token is required")
	case s.approvers == nil:
		return nil, httpx.Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "the token is not accepted (this verdictd has no approvers section)")
	}
	p, err := s.approvers.Verify(r.Context(), tok)
	if err != nil {
		reason := identity.ReasonOf(err)
		s.log.Warn("approver token refused", "reason", string(reason), "error", err.Error())
		if reason == identity.IdPUnavailable {
			return nil, httpx.Errorf(http.StatusServiceUnavailable, string(reason), "the approver token's issuer cannot be reached; nothing was decided, try again")
		}
		return nil, httpx.Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "the approver token is refused: %s", reason)
	}
	return &approvalViewer{approver: p}, nil
}

// sees reports whether v may read a: a caller those of the principals it acts for; an
// approver those of its own calls, those it decided, and those whose approver role it holds
// (approverOf); an admin of the approvals API every one, those only a webhook decides
// included. An approval shows a call's arguments in full (amounts, accounts, drafted text): a
// token of the organisation's OpenID Provider that holds none of these reads nothing of it,
// and is not told it exists.
func (s *Service) sees(v *approvalViewer, a *storedApproval) bool {
	if v.approver == nil {
		return v.caller.allows(a.Approval.Principal) == nil
	}
	rule := s.snap.Load().policy.Tool(a.Approval.Server, a.Approval.Tool).ApprovalRule()
	return seenBy(v.approver, a, rule, s.cfg.Approvers.admin(v.approver))
}

// seenBy reports whether approver p, an admin of the approvals API or not, reads a under the
// tool's rule in force.
func seenBy(p *identity.Principal, a *storedApproval, rule policy.ApprovalRule, admin bool) bool {
	switch {
	case p.ID == a.Approval.Principal, a.Approval.DecidedBy != "" && p.ID == a.Approval.DecidedBy:
		return true
	case admin:
		return true
	}
	return approverOf(p, a, rule)
}

// approverOf reports whether p holds the approver role of a under the tool's rule in force:
// the tool takes approvals in the console (as a was created, and by rule), and p carries the
// rule's group or is named in its readers, both as a was created and by rule (the stricter of
// the two holds). Nobody holds the role of an approval only a webhook decides, nor of one
// created under a rule that named no approvers.
func approverOf(p *identity.Principal, a *storedApproval, rule policy.ApprovalRule) bool {
	return slices.Contains(a.Channels, string(policy.ChannelConsole)) && rule.Allows(policy.ChannelConsole) &&
		holdsRole(p, a.Approval.Group, a.Readers) && holdsRole(p, rule.Group, rule.Readers)
}

// holdsRole reports whether p carries group (when there is one) or is named in readers.
func holdsRole(p *identity.Principal, group string, readers []string) bool {
	return (group != "" && slices.Contains(p.Groups, group)) || slices.Contains(readers, p.ID)
}

// A decider is who decides an approval: an approver through the approvals API, or the tool's
// webhook (approver nil), asked by verdictd itself.
type decider struct {
	approver *identity.Principal
	// webhookHost is the host of the webhook's URL and reason the reason it gave, recorded
	// with its decision.
	webhookHost, reason string
}

// id is the decision's decided_by: the approver's id, or DecidedByWebhook.
func (d decider) id() string {
	if d.approver == nil {
		return api.DecidedByWebhook
	}
	return d.approver.ID
}

// refusal is what a decision of a by d would be refused with, or nil: the tool's rule (as
// stored with the approval and as in force now: the stricter of the two holds) must take
// approvals where d gives them; an approver must meet four eyes and hold the approver role
// (approverOf: the webhook is not the principal, and a group or readers bind console
// approvers only); then the approval's state.
func (s *Service) refusal(a *storedApproval, d decider, now time.Time) *httpx.Error {
	rule := s.snap.Load().policy.Tool(a.Approval.Server, a.Approval.Tool).ApprovalRule()
	if d.approver == nil {
		if !rule.Allows(policy.ChannelWebhook) || !slices.Contains(a.Channels, string(policy.ChannelWebhook)) {
			return httpx.Errorf(http.StatusForbidden, api.CodeChannelNotAllowed, "the tool does not take its approvals from a webhook")
		}
		return stateRefusal(a, now)
	}
	p := d.approver
	switch {
	case !rule.Allows(policy.ChannelConsole) || !slices.Contains(a.Channels, string(policy.ChannelConsole)):
		return httpx.Errorf(http.StatusForbidden, api.CodeChannelNotAllowed, "the tool does not take its approvals in the console")
	case (a.Approval.FourEyes || rule.FourEyes) && p.ID == a.Approval.Principal:
		return httpx.Errorf(http.StatusForbidden, api.CodeSelfApproval, "four eyes: the approver is the call's principal")
	case !approverOf(p, a, rule):
		return httpx.Errorf(http.StatusForbidden, api.CodeApproverNotInGroup,
			"the approver does not hold the tool's approver role: their token does not carry its group, and its readers do not name them")
	}
	return stateRefusal(a, now)
}

// stateRefusal refuses a decision of an approval that is no longer pending.
func stateRefusal(a *storedApproval, now time.Time) *httpx.Error {
	switch a.effectiveState(now) {
	case api.ApprovalApproved, api.ApprovalDenied, api.ApprovalLapsed:
		return httpx.Errorf(http.StatusConflict, api.CodeAlreadyDecided, "the approval was already decided")
	case api.ApprovalExpired:
		return httpx.Errorf(http.StatusGone, api.CodeApprovalExpired, "the approval has expired")
	}
	return nil
}

// decidedGroups are the groups required of a's approver (as created, and by the rule in
// force) that d's token carries: what a decision records it was checked against. The webhook
// carries none.
func (s *Service) decidedGroups(a *storedApproval, d decider) []string {
	if d.approver == nil {
		return nil
	}
	rule := s.snap.Load().policy.Tool(a.Approval.Server, a.Approval.Tool).ApprovalRule()
	var out []string
	for _, g := range []string{a.Approval.Group, rule.Group} {
		if g != "" && slices.Contains(d.approver.Groups, g) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// view is a as v is shown it: its state as of now under the policy and the listings in force
// and, for an approver, what a decision would get.
func (s *Service) view(a *storedApproval, v *approvalViewer, now time.Time) api.Approval {
	out := a.Approval
	out.State = s.shownState(a, now)
	out.MayDecide, out.Refusal = false, ""
	if v.approver != nil {
		if e := s.refusal(a, decider{approver: v.approver}, now); e != nil {
			out.Refusal = e.Code
		} else {
			out.MayDecide = true
		}
	}
	return out
}

func (s *Service) handleListApprovals(w http.ResponseWriter, r *http.Request) {
	v, err := s.viewer(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	state := r.URL.Query().Get("state")
	if !slices.Contains([]string{"", api.ApprovalPending, api.ApprovalApproved, api.ApprovalDenied, api.ApprovalExpired, api.ApprovalLapsed}, state) {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "state: want pending, approved, denied, expired or lapsed"))
		return
	}
	now := s.now()
	var bad error
	raw, err := s.approvals.Newest(r.Context(), MaxApprovalList, state == api.ApprovalPending, func(b []byte) bool {
		a, err := decodeApproval(b)
		if err != nil {
			bad = err
			return false
		}
		return s.sees(v, a) && (state == "" || s.shownState(a, now) == state)
	})
	if err = errors.Join(err, bad); err != nil {
		s.log.Error("list approvals", "error", err.Error())
		httpx.WriteError(w, httpx.Errorf(http.StatusServiceUnavailable, api.CodeStoreUnavailable, "the approvals could not be read"))
		return
	}
	out := api.ApprovalList{Approvals: make([]api.Approval, 0, len(raw))}
	for _, b := range raw {
		a, _ := decodeApproval(b) // decoded above
		out.Approvals = append(out.Approvals, s.view(a, v, now))
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// load reads the approval id for v: nil (404) when there is none or v may not read it.
func (s *Service) loadApproval(ctx context.Context, id string, v *approvalViewer) (*storedApproval, error) {
	b, err := s.approvals.Get(ctx, id)
	if err != nil {
		return nil, httpx.Errorf(http.StatusServiceUnavailable, api.CodeStoreUnavailable, "the approval could not be read")
	}
	if b == nil {
		return nil, httpx.Errorf(http.StatusNotFound, api.CodeNotFound, "no such approval")
	}
	a, err := decodeApproval(b)
	if err != nil {
		return nil, err
	}
	if !s.sees(v, a) {
		// Answered like an unknown id: whoever holds an id (a link the gateway gave out, say)
		// but may not read it learns nothing of the call, not even that it exists.
		return nil, httpx.Errorf(http.StatusNotFound, api.CodeNotFound, "no such approval")
	}
	return a, nil
}

func (s *Service) handleGetApproval(w http.ResponseWriter, r *http.Request) {
	v, err := s.viewer(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	var wait time.Duration
	if q := r.URL.Query().Get("wait"); q != "" {
		if wait, err = time.ParseDuration(q); err != nil || wait <= 0 || wait > MaxApprovalWait {
			httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "wait: want a duration above 0 and at most %s", MaxApprovalWait))
			return
		}
	}
	id := r.PathValue("id")
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	entered := false
	defer func() {
		if entered {
			s.approvalNote.leave(id)
		}
	}()
	for {
		// The change channel is taken before the read: a change after the read closes it.
		changed := s.approvalNote.wait()
		a, err := s.loadApproval(r.Context(), id, v)
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		now := s.now()
		if timer == nil || a.effectiveState(now) != api.ApprovalPending {
			httpx.WriteJSON(w, http.StatusOK, s.view(a, v, now))
			return
		}
		if !entered {
			if !s.approvalNote.enter(id) {
				httpx.WriteError(w, httpx.Errorf(http.StatusTooManyRequests, api.CodeTooManyWaits,
					"the approval already has %d long polls waiting; wait with one of them, or ask without wait", MaxApprovalWaits))
				return
			}
			entered = true
		}
		expiry := time.NewTimer(a.expiresAt().Sub(now))
		select {
		case <-changed:
		case <-expiry.C:
		case <-timer:
			timer = nil
		case <-s.waitsEnded:
			timer = nil
		case <-r.Context().Done():
			expiry.Stop()
			return
		}
		expiry.Stop()
	}
}

// errDecided is the cause of a decision whose approval was decided between its checks and
// its commit.
var errDecided = errors.New("approval decided meanwhile")

func (s *Service) handleDecide(w http.ResponseWriter, r *http.Request) {
	v, err := s.viewer(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	if v.approver == nil {
		httpx.WriteError(w, httpx.Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "a decision needs an approver token; a caller token only reads"))
		return
	}
	body, err := httpx.ReadBody(w, r, maxDecisionBytes)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	var req api.DecisionRequest
	if err := httpx.DecodeStrict(body, &req); err != nil {
		httpx.WriteError(w, err)
		return
	}
	if req.Decision != api.DecisionApprove && req.Decision != api.DecisionDeny {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "decision: want approve or deny"))
		return
	}
	if req.ArgumentsDigest == "" {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "arguments_digest is required"))
		return
	}
	a, err := s.loadApproval(r.Context(), r.PathValue("id"), v)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	decided, err := s.decideApproval(r.Context(), a, decider{approver: v.approver}, req)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, s.view(decided, v, s.now()))
}

// decideApproval records d's decision req on a, read before: the one path of every decision, an
// approver's or the webhook's. It is refused (an *httpx.Error) when d may not decide a, when
// req names another arguments digest than the pending one, or when a is no longer pending;
// the write is a compare and set in one transaction, so of two decisions racing the second
// gets already_decided.
func (s *Service) decideApproval(ctx context.Context, a *storedApproval, d decider, req api.DecisionRequest) (*storedApproval, error) {
	if e := s.refusal(a, d, s.now()); e != nil {
		s.log.Info("approval decision refused", "approval_id", a.Approval.ApprovalID, "approver", d.id(), "code", e.Code)
		return nil, e
	}
	if req.ArgumentsDigest != a.Approval.ArgumentsDigest {
		return nil, httpx.Errorf(http.StatusConflict, api.CodeApprovalValueMismatch,
			"the arguments digest is not the one pending: the values changed or the page is stale")
	}
	state := api.ApprovalApproved
	if req.Decision == api.DecisionDeny {
		state = api.ApprovalDenied
	}
	var decided *storedApproval
	err := s.db.Update(ctx, func(tx *bolt.Tx) error {
		// Read again in the transaction: of two decisions racing, the second finds the first.
		b := s.approvals.GetTx(tx, a.Approval.ApprovalID)
		cur, err := decodeApproval(b)
		if err != nil {
			return err
		}
		now := s.now()
		if cur.effectiveState(now) != api.ApprovalPending || cur.Approval.ArgumentsDigest != req.ArgumentsDigest {
			return errDecided
		}
		// The rule is read again too: a policy reloaded since the checks above holds.
		if e := s.refusal(cur, d, now); e != nil {
			return e
		}
		cur.DecidedGroups = s.decidedGroups(cur, d)
		cur.Approval.State, cur.Approval.DecidedBy = state, d.id()
		cur.Approval.DecidedAt = now.UTC().Format(time.RFC3339Nano)
		if state == api.ApprovalApproved {
			// Used within the rule's use_within of the decision, or it lapses.
			cur.Approval.UseBy = now.Add(time.Duration(cur.UseWithinMillis) * time.Millisecond).UTC().Format(time.RFC3339Nano)
		}
		if d.approver == nil {
			cur.Approval.WebhookHost, cur.Approval.DecisionReason = d.webhookHost, d.reason
		}
		enc, err := encodeApproval(cur)
		if err != nil {
			return err
		}
		decided = cur
		return s.approvals.PutTx(tx, cur.meta(), enc)
	})
	var refused *httpx.Error
	switch {
	case errors.As(err, &refused):
		return nil, refused
	case errors.Is(err, errDecided):
		// Decided or expired between the checks and the commit: answer as a fresh check would.
		if b, gerr := s.approvals.Get(ctx, a.Approval.ApprovalID); gerr == nil && b != nil {
			if cur, derr := decodeApproval(b); derr == nil {
				if e := s.refusal(cur, d, s.now()); e != nil {
					return nil, e
				}
			}
		}
		return nil, httpx.Errorf(http.StatusConflict, api.CodeAlreadyDecided, "the approval was already decided")
	case err != nil:
		s.log.Error("store approval decision", "approval_id", a.Approval.ApprovalID, "error", err.Error())
		return nil, httpx.Errorf(http.StatusServiceUnavailable, api.CodeStoreUnavailable, "the decision could not be recorded")
	}
	s.metrics.approvals.WithLabelValues(state).Inc()
	s.approvalChanged()
	s.log.Info("approval decided", "approval_id", decided.Approval.ApprovalID, "record_id", decided.Approval.RecordID,
		"state", state, "approver", d.id(), "webhook_host", d.webhookHost, "principal", decided.Approval.Principal)
	return decided, nil
}
