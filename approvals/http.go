package approvals

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
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

// A Viewer is who asks the approvals API (Options.Authenticate): an approver, whose verified
// token may decide, or a caller, which reads the approvals of the principals it may act for.
type Viewer struct {
	// Approver is the approver's verified token, nil for a caller; Admin says it is an admin
	// of the approvals API.
	Approver *identity.Principal
	Admin    bool
	// ActsFor reports whether a caller may act for principal.
	ActsFor func(principal string) bool
}

// sees reports whether v may read a: a caller those of the principals it acts for; an
// approver those of its own calls, those it decided, and those whose approver role it holds
// (approverOf); an admin of the approvals API every one, those only a webhook decides
// included. An approval shows a call's arguments in full (amounts, accounts, drafted text): a
// token of the organisation's OpenID Provider that holds none of these reads nothing of it,
// and is not told it exists.
func (s *Service) sees(v *Viewer, a *storedApproval) bool {
	if v.Approver == nil {
		return v.ActsFor(a.Approval.Principal)
	}
	return seenBy(v.Approver, a, s.ruleNow(a), v.Admin)
}

// seenBy reports whether approver p, an admin of the approvals API or not, reads a under the
// tool's rule in force.
func seenBy(p *identity.Principal, a *storedApproval, rule policy.ApprovalRule, admin bool) bool {
	return p.ID == a.Approval.Principal || (a.Approval.DecidedBy != "" && p.ID == a.Approval.DecidedBy) || admin ||
		approverOf(p, a, rule)
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
// webhook (approver nil), asked by the webhook pool.
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
	rule := s.ruleNow(a)
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
	var out []string
	for _, g := range []string{a.Approval.Group, s.ruleNow(a).Group} {
		if g != "" && slices.Contains(d.approver.Groups, g) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// view is a as v is shown it: its state as of now under the policy and the listings in force
// and, for an approver, what a decision would get.
func (s *Service) view(a *storedApproval, v *Viewer, now time.Time) api.Approval {
	out := a.Approval
	out.State = s.shownState(a, now)
	out.MayDecide, out.Refusal = false, ""
	if v.Approver != nil {
		if e := s.refusal(a, decider{approver: v.Approver}, now); e != nil {
			out.Refusal = e.Code
		} else {
			out.MayDecide = true
		}
	}
	return out
}

// HandleList answers GET /v1/approvals.
func (s *Service) HandleList(w http.ResponseWriter, r *http.Request) {
	v, err := s.authenticate(r)
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
	raw, err := s.keeper.Newest(r.Context(), MaxApprovalList, state == api.ApprovalPending, func(b []byte) bool {
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
func (s *Service) load(ctx context.Context, id string, v *Viewer) (*storedApproval, error) {
	b, err := s.keeper.Get(ctx, id)
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

// HandleGet answers GET /v1/approvals/{id}, at once or, with ?wait=, once the approval is no
// longer pending (the long poll).
func (s *Service) HandleGet(w http.ResponseWriter, r *http.Request) {
	v, err := s.authenticate(r)
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
			s.note.leave(id)
		}
	}()
	for {
		// The change channel is taken before the read: a change after the read closes it.
		changed := s.note.wait()
		a, err := s.load(r.Context(), id, v)
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
			if !s.note.enter(id) {
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

// EndWaits answers every long poll now, with the approval as it stands: a shutdown waits for
// requests in flight, and a long poll would hold it for up to a minute.
func (s *Service) EndWaits() { s.endWaits.Do(func() { close(s.waitsEnded) }) }

// errNotApprover refuses a decision asked with a caller's token.
var errNotApprover = httpx.Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "a decision needs an approver token; a caller token only reads")

// HandleDecide answers POST /v1/approvals/{id}: an approver's decision (Decide).
func (s *Service) HandleDecide(w http.ResponseWriter, r *http.Request) {
	v, err := s.authenticate(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	if v.Approver == nil {
		httpx.WriteError(w, errNotApprover)
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
	out, err := s.Decide(r.Context(), r.PathValue("id"), v, req)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// Decide records approver v's decision req on approval id, and returns the approval as v is
// then shown it. It is refused (an *httpx.Error) as decide refuses it, and 404 not_found when
// v may not read the approval.
func (s *Service) Decide(ctx context.Context, id string, v *Viewer, req api.DecisionRequest) (api.Approval, error) {
	if v.Approver == nil {
		return api.Approval{}, errNotApprover
	}
	a, err := s.load(ctx, id, v)
	if err != nil {
		return api.Approval{}, err
	}
	decided, err := s.decide(ctx, a, decider{approver: v.Approver}, req)
	if err != nil {
		return api.Approval{}, err
	}
	return s.view(decided, v, s.now()), nil
}

// decide records d's decision req on a, read before: the one path of every decision, an
// approver's or the webhook's. It is refused (an *httpx.Error) when d may not decide a, when
// req names another arguments digest than the pending one, or when a is no longer pending;
// the write is a compare and set on a as read, so of two decisions racing the second gets
// already_decided.
func (s *Service) decide(ctx context.Context, a *storedApproval, d decider, req api.DecisionRequest) (*storedApproval, error) {
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
	now := s.now()
	if a.effectiveState(now) != api.ApprovalPending {
		return nil, s.decidedMeanwhile(ctx, a, d)
	}
	// The rule is read again too: a policy reloaded since the checks above holds.
	if e := s.refusal(a, d, now); e != nil {
		return nil, e
	}
	decided := *a
	decided.DecidedGroups = s.decidedGroups(a, d)
	decided.Approval.State, decided.Approval.DecidedBy = state, d.id()
	decided.Approval.DecidedAt = now.UTC().Format(time.RFC3339Nano)
	if state == api.ApprovalApproved {
		// Used within the rule's use_within of the decision, or it lapses.
		decided.Approval.UseBy = now.Add(time.Duration(a.UseWithinMillis) * time.Millisecond).UTC().Format(time.RFC3339Nano)
	}
	if d.approver == nil {
		decided.Approval.WebhookHost, decided.Approval.DecisionReason = d.webhookHost, d.reason
	}
	enc, err := encodeApproval(&decided)
	if err == nil {
		// A compare and set: of two decisions racing, the second finds the first.
		err = s.keeper.Write(ctx, &store.ApprovalWrite{Meta: decided.meta(), Value: enc, Prev: a.raw})
	}
	switch {
	case errors.Is(err, store.ErrApprovalChanged):
		return nil, s.decidedMeanwhile(ctx, a, d)
	case err != nil:
		s.log.Error("store approval decision", "approval_id", a.Approval.ApprovalID, "error", err.Error())
		return nil, httpx.Errorf(http.StatusServiceUnavailable, api.CodeStoreUnavailable, "the decision could not be recorded")
	}
	s.decisions.WithLabelValues(state).Inc()
	s.note.notify()
	s.log.Info("approval decided", "approval_id", decided.Approval.ApprovalID, "record_id", decided.Approval.RecordID,
		"state", state, "approver", d.id(), "webhook_host", d.webhookHost, "principal", decided.Approval.Principal)
	return &decided, nil
}

// decidedMeanwhile answers a decision of a whose approval was decided or expired between its
// checks and its write, as a fresh check would.
func (s *Service) decidedMeanwhile(ctx context.Context, a *storedApproval, d decider) *httpx.Error {
	if b, err := s.keeper.Get(ctx, a.Approval.ApprovalID); err == nil && b != nil {
		if cur, err := decodeApproval(b); err == nil {
			if e := s.refusal(cur, d, s.now()); e != nil {
				return e
			}
		}
	}
	return httpx.Errorf(http.StatusConflict, api.CodeAlreadyDecided, "the approval was already decided")
}
