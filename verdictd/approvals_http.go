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
)

// CodeInvalidRequest answers a malformed query or decision.
const CodeInvalidRequest = "invalid_request"

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

// sees reports whether v may read a: an approver reads every approval (the console lists them
// all, and says what it may not decide), a caller those of the principals it acts for.
func (v *approvalViewer) sees(a *storedApproval) bool {
	return v.approver != nil || v.caller.allows(a.Approval.Principal) == nil
}

// refusal is what a decision of a by approver p would be refused with, or nil: the tool's
// rule (as stored with the approval and as in force now: the stricter of the two holds), four
// eyes, the group, then the approval's state.
func (s *Service) refusal(a *storedApproval, p *identity.Principal, now time.Time) *httpx.Error {
	rule := s.snap.Load().policy.Tool(a.Approval.Server, a.Approval.Tool).ApprovalRule()
	switch {
	case !rule.Allows(policy.ChannelConsole) || !slices.Contains(a.Channels, string(policy.ChannelConsole)):
		return httpx.Errorf(http.StatusForbidden, api.CodeChannelNotAllowed, "the tool does not take its approvals in the console")
	case (a.Approval.FourEyes || rule.FourEyes) && p.ID == a.Approval.Principal:
		return httpx.Errorf(http.StatusForbidden, api.CodeSelfApproval, "four eyes: the approver is the call's principal")
	case a.Approval.Group != "" && !slices.Contains(p.Groups, a.Approval.Group),
		rule.Group != "" && !slices.Contains(p.Groups, rule.Group):
		return httpx.Errorf(http.StatusForbidden, api.CodeApproverNotInGroup, "the approver's token does not carry the group the tool requires")
	}
	switch a.effectiveState(now) {
	case api.ApprovalApproved, api.ApprovalDenied:
		return httpx.Errorf(http.StatusConflict, api.CodeAlreadyDecided, "the approval was already decided")
	case api.ApprovalExpired:
		return httpx.Errorf(http.StatusGone, api.CodeApprovalExpired, "the approval has expired")
	}
	return nil
}

// view is a as v is shown it: its state as of now and, for an approver, what a decision
// would get.
func (s *Service) view(a *storedApproval, v *approvalViewer, now time.Time) api.Approval {
	out := a.Approval
	out.State = a.effectiveState(now)
	out.MayDecide, out.Refusal = false, ""
	if v.approver != nil {
		if e := s.refusal(a, v.approver, now); e != nil {
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
	if !slices.Contains([]string{"", api.ApprovalPending, api.ApprovalApproved, api.ApprovalDenied, api.ApprovalExpired}, state) {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, CodeInvalidRequest, "state: want pending, approved, denied or expired"))
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
		return v.sees(a) && (state == "" || a.effectiveState(now) == state)
	})
	if err = errors.Join(err, bad); err != nil {
		s.log.Error("list approvals", "error", err.Error())
		httpx.WriteError(w, httpx.Errorf(http.StatusServiceUnavailable, CodeStoreFailed, "the approvals could not be read"))
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
		return nil, httpx.Errorf(http.StatusServiceUnavailable, CodeStoreFailed, "the approval could not be read")
	}
	if b == nil {
		return nil, httpx.Errorf(http.StatusNotFound, api.CodeNotFound, "no such approval")
	}
	a, err := decodeApproval(b)
	if err != nil {
		return nil, err
	}
	if !v.sees(a) {
		// Answered like an unknown id: a caller learns nothing of other principals' calls.
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
			httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, CodeInvalidRequest, "wait: want a duration above 0 and at most %s", MaxApprovalWait))
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
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, CodeInvalidRequest, "decision: want approve or deny"))
		return
	}
	if req.ArgumentsDigest == "" {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, CodeInvalidRequest, "arguments_digest is required"))
		return
	}
	a, err := s.loadApproval(r.Context(), r.PathValue("id"), v)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	if e := s.refusal(a, v.approver, s.now()); e != nil {
		s.log.Info("approval decision refused", "approval_id", a.Approval.ApprovalID, "approver", v.approver.ID, "code", e.Code)
		httpx.WriteError(w, e)
		return
	}
	if req.ArgumentsDigest != a.Approval.ArgumentsDigest {
		httpx.WriteError(w, httpx.Errorf(http.StatusConflict, api.CodeApprovalValueMismatch,
			"the arguments digest is not the one pending: the values changed or the page is stale"))
		return
	}
	state := api.ApprovalApproved
	if req.Decision == api.DecisionDeny {
		state = api.ApprovalDenied
	}
	var decided *storedApproval
	err = s.db.Update(r.Context(), func(tx *bolt.Tx) error {
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
		cur.Approval.State, cur.Approval.DecidedBy = state, v.approver.ID
		cur.Approval.DecidedAt = now.UTC().Format(time.RFC3339Nano)
		enc, err := encodeApproval(cur)
		if err != nil {
			return err
		}
		decided = cur
		return s.approvals.PutTx(tx, cur.meta(), enc)
	})
	switch {
	case errors.Is(err, errDecided):
		// Decided or expired between the checks and the commit: answer as a fresh check would.
		if a, lerr := s.loadApproval(r.Context(), a.Approval.ApprovalID, v); lerr == nil {
			if e := s.refusal(a, v.approver, s.now()); e != nil {
				httpx.WriteError(w, e)
				return
			}
		}
		httpx.WriteError(w, httpx.Errorf(http.StatusConflict, api.CodeAlreadyDecided, "the approval was already decided"))
		return
	case err != nil:
		s.log.Error("store approval decision", "approval_id", a.Approval.ApprovalID, "error", err.Error())
		httpx.WriteError(w, httpx.Errorf(http.StatusServiceUnavailable, CodeStoreFailed, "the decision could not be recorded"))
		return
	}
	s.metrics.approvals.WithLabelValues(state).Inc()
	s.approvalChanged()
	s.log.Info("approval decided", "approval_id", decided.Approval.ApprovalID, "record_id", decided.Approval.RecordID,
		"state", state, "approver", v.approver.ID, "principal", decided.Approval.Principal)
	httpx.WriteJSON(w, http.StatusOK, s.view(decided, v, s.now()))
}
