package verdictd

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/approvals"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
)

// decideAs records approver p's decision on approval id through the path every decision takes,
// and returns the approval as p is shown it.
func (e *env) decideAs(p *identity.Principal, id, decision string) api.Approval {
	e.t.Helper()
	d, err := e.svc.approvals.Decide(e.t.Context(), id, &approvals.Viewer{Approver: p}, api.DecisionRequest{Decision: decision, ArgumentsDigest: e.stored(id).ArgumentsDigest})
	if err != nil {
		e.t.Fatalf("decide %s: %v", id, err)
	}
	return d
}

// stored is approval id as the file holds it.
func (e *env) stored(id string) api.Approval {
	e.t.Helper()
	b, err := e.svc.db.Approvals().Get(e.t.Context(), id)
	if err != nil || b == nil {
		e.t.Fatalf("approval %s: %v", id, err)
	}
	var a struct {
		Approval api.Approval `json:"approval"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		e.t.Fatal(err)
	}
	return a.Approval
}

// TestConsoleApprovalLapses: an approval is used within the rule's use_within of its decision,
// or it lapses: it reads lapsed, the next preflight of its call is refused approval_lapsed
// (as an expired one is refused approval_expired) and marks it so, and the same call made
// again waits for a new approval. The sweep marks one lapsed unused, once. An approval decided
// under one policy version lapses once another is in force, however soon it is used. The
// clock is the service's own.
func TestConsoleApprovalLapses(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	advance := func(d time.Duration) { offset.Add(int64(d)) }
	const rule = "approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m}"
	pol := strings.Replace(consolePolicy, rule, "approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m, use_within: 2m}", 1)
	e := newEnv(t, envOpts{policy: pol, now: now})
	approver := &identity.Principal{ID: "https://op.test#id2", Groups: []string{"payments-approvers"}}
	lapsed := func(what string, rec *record) {
		t.Helper()
		var m struct {
			Unmet []struct {
				SlotID string `json:"slot_id"`
				Reason string `json:"reason"`
			} `json:"unmet"`
		}
		if err := json.Unmarshal(rec.raw, &m); err != nil {
			t.Fatal(err)
		}
		if rec.Outcome != api.OutcomeRefuse || rec.Gate.Kind != api.GateApprovalRefused || rec.Gate.Detail != api.CodeApprovalLapsed ||
			rec.Verdict != nil || len(m.Unmet) != 1 || m.Unmet[0].SlotID != api.ApprovalSlotID || m.Unmet[0].Reason != api.CodeApprovalLapsed {
			t.Fatalf("%s: %s %+v\n%s", what, rec.Outcome, rec.Gate, rec.raw)
		}
		if ra := recordApproval(t, rec); ra.State != api.ApprovalLapsed {
			t.Errorf("%s: the record's approval %+v", what, ra)
		}
	}

	// Used after its use-by time: refused, and marked lapsed by the refusal.
	first := recordApproval(t, e.preflight(payCall("u_01", 900)))
	decided := e.decideAs(approver, first.ApprovalID, api.DecisionApprove)
	at, err := time.Parse(time.RFC3339Nano, decided.DecidedAt)
	if err != nil {
		t.Fatal(err)
	}
	if decided.State != api.ApprovalApproved || decided.UseBy != at.Add(2*time.Minute).Format(time.RFC3339Nano) {
		t.Fatalf("decided %s, use by %q (decided at %s)", decided.State, decided.UseBy, decided.DecidedAt)
	}
	advance(2 * time.Minute)
	var a api.Approval
	e.approvalCall("GET", "/v1/approvals/"+first.ApprovalID, callerToken, nil, &a)
	if a.State != api.ApprovalLapsed {
		t.Fatalf("past its use-by the approval reads %s", a.State)
	}
	var list api.ApprovalList
	if e.approvalCall("GET", "/v1/approvals?state=lapsed", callerToken, nil, &list); len(list.Approvals) != 1 || list.Approvals[0].ApprovalID != first.ApprovalID {
		t.Errorf("lapsed list %+v", list.Approvals)
	}
	refused := e.preflight(payCall("u_01", 900))
	lapsed("used after its use-by", refused)
	if e.approvalCall("GET", "/v1/approvals/"+first.ApprovalID, callerToken, nil, &a); a.State != api.ApprovalLapsed || a.UsedBy != refused.RecordID {
		t.Errorf("after the refusal: %s used by %q, want lapsed, used by %s", a.State, a.UsedBy, refused.RecordID)
	}
	if got := e.metric(`verdictd_approvals_total{decision="lapsed"}`); got != 1 {
		t.Errorf("lapsed approvals %v, want 1", got)
	}

	// Acted on once: the same call waits for a new approval, which the sweep marks lapsed
	// once left unused past its use-by; the preflight then refuses it without counting again.
	second := recordApproval(t, e.preflight(payCall("u_01", 900)))
	if second.ApprovalID == first.ApprovalID || second.State != api.ApprovalPending {
		t.Fatalf("after the refusal: %+v", second)
	}
	e.decideAs(approver, second.ApprovalID, api.DecisionApprove)
	if err := e.svc.approvals.Expire(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := e.stored(second.ApprovalID).State; st != api.ApprovalApproved {
		t.Fatalf("the sweep changed an approval within its use-by: %s", st)
	}
	advance(2*time.Minute + time.Second)
	for range 2 {
		if err := e.svc.approvals.Expire(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if st := e.stored(second.ApprovalID).State; st != api.ApprovalLapsed {
		t.Fatalf("after the sweep the approval is stored %s", st)
	}
	if got := e.metric(`verdictd_approvals_total{decision="lapsed"}`); got != 2 {
		t.Errorf("lapsed approvals after the sweep %v, want 2", got)
	}
	lapsed("swept lapsed", e.preflight(payCall("u_01", 900)))
	if got := e.metric(`verdictd_approvals_total{decision="lapsed"}`); got != 2 {
		t.Errorf("lapsed approvals after the refusal %v, want 2", got)
	}

	// Within its use-by, under the policy it was created under, it approves.
	third := recordApproval(t, e.preflight(payCall("u_01", 900)))
	e.decideAs(approver, third.ApprovalID, api.DecisionApprove)
	advance(2*time.Minute - time.Second)
	if issued := e.preflight(payCall("u_01", 900)); issued.Outcome != api.OutcomeVerdictIssued {
		t.Fatalf("within its use-by: %s %+v\n%s", issued.Outcome, issued.Gate, issued.raw)
	}

	// Another policy version in force: an approval decided under the old one lapses at once.
	fourth := recordApproval(t, e.preflight(payCall("u_01", 900)))
	e.decideAs(approver, fourth.ApprovalID, api.DecisionApprove)
	e.writePolicy(strings.Replace(pol, "2026-12-02.1", "2026-12-02.2", 1), "")
	if err := e.svc.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if e.approvalCall("GET", "/v1/approvals/"+fourth.ApprovalID, callerToken, nil, &a); a.State != api.ApprovalLapsed {
		t.Errorf("under another policy version the approval reads %s", a.State)
	}
	lapsed("used under another policy version", e.preflight(payCall("u_01", 900)))
	if got := e.metric(`verdictd_approvals_total{decision="lapsed"}`); got != 3 {
		t.Errorf("lapsed approvals %v, want 3", got)
	}
	// A lapsed approval is decided: a decision on it is refused already_decided.
	_, err = e.svc.approvals.Decide(t.Context(), fourth.ApprovalID, &approvals.Viewer{Approver: approver},
		api.DecisionRequest{Decision: api.DecisionApprove, ArgumentsDigest: fourth.ArgumentsDigest})
	if he, ok := errors.AsType[*httpx.Error](err); !ok || he.Code != api.CodeAlreadyDecided {
		t.Errorf("a decision on a lapsed approval: %v, want already_decided", err)
	}
}
