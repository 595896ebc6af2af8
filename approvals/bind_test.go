package approvals

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
)

// stored is an approval of principal's call with digest, in state, given for the tool
// definition toolDigest under policy version v1 and no pin; expires is its expiry and, once
// approved, its use-by time.
func stored(id, state, toolDigest string, expires time.Time) *storedApproval {
	return &storedApproval{Channels: []string{"console"}, ToolDigest: toolDigest, PolicyVersion: "v1", UseWithinMillis: time.Hour.Milliseconds(),
		Approval: api.Approval{
			ApprovalID: id, State: state, Principal: "https://op.test#id1", ArgumentsDigest: "sha256:aa",
			DecidedBy: "https://op.test#id2", FourEyes: true, Group: "payments-approvers",
			ExpiresAt: expires.UTC().Format(time.RFC3339Nano), UseBy: expires.UTC().Format(time.RFC3339Nano),
		}}
}

// TestConsoleDecisionsBind: an approval approves only under what it was created under — the
// tool definition (the same arguments may do something else under another), the policy
// version and the tool's pin — and only until its use-by time; otherwise it has lapsed, and
// the run is given the lapse, which refuses the call as an expiry does. A tool without a
// usable definition now is not told apart: the approval approves nothing, and is not used
// up. A denial or an expiry refuses whatever the binding.
func TestConsoleDecisionsBind(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	rule := policy.ApprovalRule{Channels: []policy.Channel{policy.ChannelConsole}, FourEyes: true, Group: "payments-approvers"}
	same := approvalBinding{policyVersion: "v1", toolDigest: "sha256:def1"}
	with := func(f func(*approvalBinding)) approvalBinding { b := same; f(&b); return b }
	for _, tc := range []struct {
		name    string
		cand    *storedApproval
		binding approvalBinding
		want    string // the state the run is given, "" for none
	}{
		{"approved, within its use-by, as bound", stored("a", api.ApprovalApproved, "sha256:def1", later), same, api.ApprovalApproved},
		{"approved, at its use-by", stored("a", api.ApprovalApproved, "sha256:def1", now), same, api.ApprovalLapsed},
		{"approved, without a use-by", func() *storedApproval {
			a := stored("a", api.ApprovalApproved, "sha256:def1", later)
			a.Approval.UseBy = ""
			return a
		}(), same, api.ApprovalLapsed},
		{"approved, definition changed", stored("a", api.ApprovalApproved, "sha256:def1", later),
			with(func(b *approvalBinding) { b.toolDigest = "sha256:def2" }), api.ApprovalLapsed},
		{"approved, policy version changed", stored("a", api.ApprovalApproved, "sha256:def1", later),
			with(func(b *approvalBinding) { b.policyVersion = "v2" }), api.ApprovalLapsed},
		{"approved, the tool pinned since", stored("a", api.ApprovalApproved, "sha256:def1", later),
			with(func(b *approvalBinding) { b.pin = "sha256:def1" }), api.ApprovalLapsed},
		{"approved, tool without a usable definition", stored("a", api.ApprovalApproved, "sha256:def1", later),
			with(func(b *approvalBinding) { b.toolDigest = "" }), ""},
		{"approved before definitions were bound", stored("a", api.ApprovalApproved, "", later), same, api.ApprovalLapsed},
		{"approved before policies were bound", func() *storedApproval {
			a := stored("a", api.ApprovalApproved, "sha256:def1", later)
			a.PolicyVersion = ""
			return a
		}(), same, api.ApprovalLapsed},
		{"approved and used", func() *storedApproval {
			a := stored("a", api.ApprovalApproved, "sha256:def1", now)
			a.Approval.UsedBy = "rec_1"
			return a
		}(), same, ""},
		{"lapsed by the sweep", stored("a", api.ApprovalLapsed, "sha256:def1", later), same, api.ApprovalLapsed},
		{"denied, definition changed", stored("a", api.ApprovalDenied, "sha256:def1", later),
			with(func(b *approvalBinding) { b.toolDigest = "sha256:def2" }), api.ApprovalDenied},
		{"denied, policy version changed", stored("a", api.ApprovalDenied, "sha256:def1", now),
			with(func(b *approvalBinding) { b.policyVersion = "v2" }), api.ApprovalDenied},
		{"expired, definition changed", stored("a", api.ApprovalPending, "sha256:def1", now),
			with(func(b *approvalBinding) { b.toolDigest = "sha256:def2" }), api.ApprovalExpired},
		{"pending", stored("a", api.ApprovalPending, "sha256:def1", later), same, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&Call{rule: rule, binding: tc.binding, cands: []*storedApproval{tc.cand}}).Decisions(now)
			switch {
			case tc.want == "" && len(got) != 0:
				t.Fatalf("decisions %+v, want none", got)
			case tc.want != "" && (len(got) != 1 || got[0].State != tc.want):
				t.Fatalf("decisions %+v, want one %s", got, tc.want)
			}
		})
	}
}

// TestBindApprovalKeepsTheBinding: a call whose tool definition, policy version or tool pin
// changed while its approval was pending gets a new approval, bound to what it now has; the
// pending one of the old binding is not reused.
func TestBindApprovalKeepsTheBinding(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	pt := h.pol.Tool("bank", "transfer")
	old := stored("apr_old", api.ApprovalPending, "sha256:def1", now.Add(time.Hour))
	for _, tc := range []struct {
		name    string
		binding approvalBinding
		reuse   bool
	}{
		{"as bound", approvalBinding{policyVersion: "v1", toolDigest: "sha256:def1"}, true},
		{"another definition", approvalBinding{policyVersion: "v1", toolDigest: "sha256:def2"}, false},
		{"another policy version", approvalBinding{policyVersion: "v2", toolDigest: "sha256:def1"}, false},
		{"pinned since", approvalBinding{policyVersion: "v1", pin: "sha256:def1", toolDigest: "sha256:def1"}, false},
	} {
		d := tc.binding.toolDigest
		rec := &api.Record{RecordID: "rec_1", Principal: old.Approval.Principal, Outcome: api.OutcomeAskUser, ToolSchemaDigest: &d,
			Approval: &api.RecordApproval{Channels: []string{"console"}, ArgumentsDigest: "sha256:aa", Arguments: map[string]any{}}}
		w, err := (&Call{s: h.s, rule: pt.ApprovalRule(), binding: tc.binding, cands: []*storedApproval{old}}).Bind(rec, now)
		if err != nil {
			t.Fatal(err)
		}
		if reused := rec.Approval.ApprovalID == "apr_old"; reused != tc.reuse {
			t.Errorf("%s: approval %s, reuse want %v", tc.name, rec.Approval.ApprovalID, tc.reuse)
		}
		if !tc.reuse && (w == nil || w.a.ToolDigest != d || w.a.PolicyVersion != tc.binding.policyVersion || w.a.Pin != tc.binding.pin ||
			w.a.UseWithinMillis != pt.ApprovalRule().UseWithin.Milliseconds()) {
			t.Errorf("%s: new approval %+v, want it bound to %+v", tc.name, w, tc.binding)
		}
	}
}

// TestConsoleDecisionsMeetTheRuleInForce: a decision given under a looser rule approves
// nothing once the policy gains four eyes or a group the approver was not checked against;
// a denial refuses whatever the rule.
func TestConsoleDecisionsMeetTheRuleInForce(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	console := []policy.Channel{policy.ChannelConsole}
	mk := func(state, decidedBy, group string, decidedGroups ...string) *storedApproval {
		a := stored("a", state, "sha256:def1", now.Add(time.Hour))
		a.Approval.DecidedBy, a.Approval.FourEyes, a.Approval.Group, a.DecidedGroups = decidedBy, false, group, decidedGroups
		return a
	}
	const self, other = "https://op.test#id1", "https://op.test#id2"
	for _, tc := range []struct {
		name string
		cand *storedApproval
		rule policy.ApprovalRule
		want bool
	}{
		{"self-approved, no four eyes then or now", mk(api.ApprovalApproved, self, ""), policy.ApprovalRule{Channels: console}, true},
		{"self-approved, four eyes since", mk(api.ApprovalApproved, self, ""), policy.ApprovalRule{Channels: console, FourEyes: true}, false},
		{"another approved, four eyes since", mk(api.ApprovalApproved, other, ""), policy.ApprovalRule{Channels: console, FourEyes: true}, true},
		{"no group then, a group since", mk(api.ApprovalApproved, other, ""), policy.ApprovalRule{Channels: console, Group: "g"}, false},
		{"one group then, another since", mk(api.ApprovalApproved, other, "g1", "g1"), policy.ApprovalRule{Channels: console, Group: "g2"}, false},
		{"the group since, checked when decided", mk(api.ApprovalApproved, other, "", "g"), policy.ApprovalRule{Channels: console, Group: "g"}, true},
		{"the group then and now", mk(api.ApprovalApproved, other, "g"), policy.ApprovalRule{Channels: console, Group: "g"}, true},
		{"a group in another case", mk(api.ApprovalApproved, other, "", "G"), policy.ApprovalRule{Channels: console, Group: "g"}, false},
		{"a reader the rule names", mk(api.ApprovalApproved, other, ""), policy.ApprovalRule{Channels: console, Readers: []string{other}}, true},
		{"a reader the rule no longer names", mk(api.ApprovalApproved, other, ""), policy.ApprovalRule{Channels: console, Readers: []string{self}}, false},
		{"a member of the group, readers named since", mk(api.ApprovalApproved, other, "g"), policy.ApprovalRule{Channels: console, Readers: []string{self}}, false},
		{"the webhook, the rule still takes it", mk(api.ApprovalApproved, api.DecidedByWebhook, "g"),
			policy.ApprovalRule{Channels: []policy.Channel{policy.ChannelConsole, policy.ChannelWebhook}, Group: "g2"}, true},
		{"the webhook, the rule no longer takes it", mk(api.ApprovalApproved, api.DecidedByWebhook, ""), policy.ApprovalRule{Channels: console, Group: "g"}, false},
		{"self-denied, four eyes since", mk(api.ApprovalDenied, self, ""), policy.ApprovalRule{Channels: console, FourEyes: true}, true},
		{"denied, a group since", mk(api.ApprovalDenied, other, ""), policy.ApprovalRule{Channels: console, Group: "g"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&Call{rule: tc.rule, binding: approvalBinding{policyVersion: "v1", toolDigest: "sha256:def1"}, cands: []*storedApproval{tc.cand}}).Decisions(now)
			if (len(got) == 1) != tc.want {
				t.Fatalf("decisions %+v, want one: %v", got, tc.want)
			}
		})
	}
}

// TestApprovalWriteIsCompareAndSet: a run writes the approval it read only if it is still the
// one stored. A call the host approved while an approver denied it in the console must not
// overwrite the denial with "closed by the verdict": the commit fails, nothing is issued,
// and the preflight made again finds the denial.
func TestApprovalWriteIsCompareAndSet(t *testing.T) {
	h := newHarness(t)
	keeper, ctx := h.s.keeper, t.Context()
	now := time.Now()
	for _, tc := range []struct {
		name      string
		meanwhile string // the state an approver decides between the run's read and its commit; "" for none
		wantErr   bool
	}{
		{"nothing meanwhile", "", false},
		{"denied meanwhile", api.ApprovalDenied, true},
		{"approved meanwhile", api.ApprovalApproved, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pending := stored("apr_"+strings.ReplaceAll(tc.name, " ", "_"), api.ApprovalPending, "sha256:def1", now.Add(time.Hour))
			pending.Approval.CreatedAt = now.UTC().Format(time.RFC3339Nano)
			enc, err := encodeApproval(pending)
			if err != nil {
				t.Fatal(err)
			}
			if err := keeper.Write(ctx, &store.ApprovalWrite{Meta: pending.meta(), Value: enc, Admit: h.s.admit, Scan: pendingScan}); err != nil {
				t.Fatal(err)
			}
			b, err := keeper.Get(ctx, pending.Approval.ApprovalID)
			if err != nil {
				t.Fatal(err)
			}
			read, err := decodeApproval(b)
			if err != nil {
				t.Fatal(err)
			}
			if tc.meanwhile != "" {
				decided := *read
				decided.Approval.State, decided.Approval.DecidedBy = tc.meanwhile, "https://op.test#id2"
				denc, err := encodeApproval(&decided)
				if err != nil {
					t.Fatal(err)
				}
				if err := keeper.Write(ctx, &store.ApprovalWrite{Meta: decided.meta(), Value: denc, Prev: b}); err != nil {
					t.Fatal(err)
				}
			}
			digest := read.Approval.ArgumentsDigest
			rec := &api.Record{RecordID: "rec_v", Outcome: api.OutcomeVerdictIssued, ArgumentsDigest: &digest}
			w, err := closeSettled(rec, []*storedApproval{read}, now)
			if err != nil || w == nil {
				t.Fatalf("closeSettled: %v, %v", w, err)
			}
			err = keeper.Write(ctx, &w.ApprovalWrite)
			if got := errors.Is(err, store.ErrApprovalChanged); got != tc.wantErr {
				t.Fatalf("commit: %v, want approval_changed: %v", err, tc.wantErr)
			}
			after, _ := keeper.Get(ctx, pending.Approval.ApprovalID)
			a, err := decodeApproval(after)
			if err != nil {
				t.Fatal(err)
			}
			want := api.ApprovalExpired
			if tc.meanwhile != "" {
				want = tc.meanwhile
			}
			if a.Approval.State != want {
				t.Errorf("stored state %s, want %s", a.Approval.State, want)
			}
		})
	}
}

// TestPendingApprovalsPerPrincipal: a principal whose agent varies a call's values to make
// approval after approval gets at most MaxPendingApprovals pending at once; the next is
// refused approval_limit, nothing written. Those expired, decided, or of another principal
// do not count.
func TestPendingApprovalsPerPrincipal(t *testing.T) {
	h := newHarness(t)
	keeper, ctx := h.s.keeper, t.Context()
	now := time.Now()
	create := func(principal, id string, expires time.Time) error {
		a := stored(id, api.ApprovalPending, "sha256:def1", expires)
		a.Approval.Principal, a.Approval.CreatedAt = principal, now.UTC().Format(time.RFC3339Nano)
		enc, err := encodeApproval(a)
		if err != nil {
			t.Fatal(err)
		}
		return keeper.Write(ctx, &store.ApprovalWrite{Meta: a.meta(), Value: enc, Admit: h.s.admit, Scan: pendingScan})
	}
	const p1, p2 = "https://op.test#id1", "https://op.test#id2"
	// Expired ones the sweep has not come by yet do not count.
	for i := range 3 {
		if err := create(p1, fmt.Sprintf("apr_expired_%d", i), now.Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range MaxPendingApprovals {
		if err := create(p1, fmt.Sprintf("apr_p1_%d", i), now.Add(time.Hour)); err != nil {
			t.Fatalf("pending approval %d: %v", i, err)
		}
	}
	if err := create(p1, "apr_p1_over", now.Add(time.Hour)); !errors.Is(err, ErrLimit) {
		t.Fatalf("one approval too many: %v, want approval_limit", err)
	}
	if b, _ := keeper.Get(ctx, "apr_p1_over"); b != nil {
		t.Error("the refused approval was written")
	}
	if err := create(p2, "apr_p2_0", now.Add(time.Hour)); err != nil {
		t.Errorf("another principal: %v", err)
	}
	// One decided frees a place.
	b, _ := keeper.Get(ctx, "apr_p1_0")
	a, err := decodeApproval(b)
	if err != nil {
		t.Fatal(err)
	}
	a.Approval.State = api.ApprovalDenied
	enc, _ := encodeApproval(a)
	if err := keeper.Write(ctx, &store.ApprovalWrite{Meta: a.meta(), Value: enc, Prev: b}); err != nil {
		t.Fatal(err)
	}
	if err := create(p1, "apr_p1_after", now.Add(time.Hour)); err != nil {
		t.Errorf("after a decision: %v", err)
	}
}

// TestCallApprovalsAreOfExactlyTheCall: a principal or a conversation id may hold a NUL byte,
// the separator of the call key, so two calls can share a key. The approval of one is never
// read for the other: an approval decided for principal p in conversation "a\x00b" approves
// nothing of principal "p\x00a" in conversation "b".
func TestCallApprovalsAreOfExactlyTheCall(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	a := stored("apr_nul", api.ApprovalApproved, "sha256:def1", now.Add(time.Hour))
	a.Approval.Principal, a.Approval.ConversationID, a.Approval.Server, a.Approval.Tool = "p", "a\x00b", "bank", "transfer"
	a.Approval.CreatedAt = now.UTC().Format(time.RFC3339Nano)
	h.put(t, a)
	for _, tc := range []struct {
		principal, conversation string
		want                    int
	}{
		{"p", "a\x00b", 1},
		{"p\x00a", "b", 0},
	} {
		req := &api.Request{Principal: tc.principal, ConversationID: tc.conversation, Server: "bank", Tool: "transfer"}
		if callKey(req.Principal, req.ConversationID, req.Server, req.Tool) != a.key() {
			t.Fatalf("%q/%q: the keys differ, the case tests nothing", tc.principal, tc.conversation)
		}
		got, err := h.s.OfCall(t.Context(), req, h.pol, "sha256:def1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got.cands) != tc.want {
			t.Errorf("principal %q, conversation %q: %d approvals, want %d", tc.principal, tc.conversation, len(got.cands), tc.want)
		}
	}
}

// TestCallApprovalsIncludeEveryPending: a call whose agent made many approvals with other
// values in the same conversation still finds its oldest pending one, so that a verdict the
// host's approval issues closes it, and no approver can approve later a call that already ran.
func TestCallApprovalsIncludeEveryPending(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	put := func(id, state, digest string, created time.Time) {
		a := stored(id, state, "sha256:def1", now.Add(time.Hour))
		a.Approval.ConversationID, a.Approval.Server, a.Approval.Tool = "c", "bank", "transfer"
		a.Approval.ArgumentsDigest, a.Approval.CreatedAt = digest, created.UTC().Format(time.RFC3339Nano)
		if state != api.ApprovalPending {
			a.Approval.UsedBy = "rec_" + id
		}
		h.put(t, a)
	}
	put("apr_old", api.ApprovalPending, "sha256:old", now.Add(-time.Minute))
	for i := range 2 * maxCallApprovals {
		put(fmt.Sprintf("apr_new_%02d", i), api.ApprovalDenied, fmt.Sprintf("sha256:%02d", i), now.Add(time.Duration(i)*time.Millisecond))
	}
	req := &api.Request{Principal: "https://op.test#id1", ConversationID: "c", Server: "bank", Tool: "transfer"}
	c, err := h.s.OfCall(t.Context(), req, h.pol, "sha256:def1")
	if err != nil {
		t.Fatal(err)
	}
	digest := "sha256:old"
	w, err := closeSettled(&api.Record{RecordID: "rec_v", Outcome: api.OutcomeVerdictIssued, ArgumentsDigest: &digest}, c.cands, now)
	if err != nil || w == nil || w.a.Approval.ApprovalID != "apr_old" {
		t.Fatalf("the verdict closes %+v (%v), want apr_old", w, err)
	}
}

// TestApprovalLongPollsBounded: an approval has at most MaxApprovalWaits long polls waiting;
// one more is refused 429 too_many_waits at once, a read without wait still answers, and a
// long poll that ends gives its place back.
func TestApprovalLongPollsBounded(t *testing.T) {
	h := newHarness(t)
	a := stored("apr_wait", api.ApprovalPending, "sha256:def1", time.Now().Add(time.Hour))
	h.put(t, a)
	path, note := "/v1/approvals/"+a.Approval.ApprovalID, &h.s.note
	for range MaxApprovalWaits {
		if !note.enter(a.Approval.ApprovalID) {
			t.Fatal("a place refused below the bound")
		}
	}
	if status, code, _ := h.get(t, path+"?wait=60s"); status != 429 || code != api.CodeTooManyWaits {
		t.Fatalf("one long poll too many: %d %s, want 429 too_many_waits", status, code)
	}
	if status, code, got := h.get(t, path); status != 200 || got.State != api.ApprovalPending {
		t.Fatalf("a read without wait: %d %s %+v", status, code, got)
	}
	note.leave(a.Approval.ApprovalID)
	if status, code, got := h.get(t, path+"?wait=1ms"); status != 200 || got.State != api.ApprovalPending {
		t.Fatalf("a long poll with a place: %d %s %+v", status, code, got)
	}
	// It gave its place back: one place is free, and only one.
	if !note.enter(a.Approval.ApprovalID) || note.enter(a.Approval.ApprovalID) {
		t.Error("the ended long poll did not give back exactly its place")
	}
}
