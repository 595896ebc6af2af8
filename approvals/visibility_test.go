package approvals

import (
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/policy"
)

// TestApprovalVisibility: an approver token reads an approval only with a role for it — the
// call's principal, the one who decided it, the tool's approver role (its group, or named in
// its readers, as the approval was created and by the rule in force), or an admin of the
// approvals API — and decides only with the approver role. An approval only a webhook decides
// has no approver role: an admin reads it, nobody decides it in the console. One created under
// a rule that named no approvers is read by nobody else.
func TestApprovalVisibility(t *testing.T) {
	const (
		principal = "https://op.test#id1"
		member    = "https://op.test#id2"
		reader    = "https://op.test#id3"
		outsider  = "https://op.test#id4"
		adminID   = "https://op.test#id5"
	)
	console := []policy.Channel{policy.ChannelConsole}
	webhook := []policy.Channel{policy.ChannelWebhook}
	byGroup := policy.ApprovalRule{Channels: console, FourEyes: true, Group: "payments-approvers"}
	byReaders := policy.ApprovalRule{Channels: console, FourEyes: true, Readers: []string{reader}}
	webhookOnly := policy.ApprovalRule{Channels: webhook, FourEyes: true, Webhook: "https://hook.test/"}
	// created is an approval pending under rule.
	created := func(rule policy.ApprovalRule) *storedApproval {
		a := stored("apr_v", api.ApprovalPending, "sha256:def1", time.Now().Add(time.Hour))
		a.Channels, a.Approval.Group, a.Readers, a.Approval.DecidedBy = nil, rule.Group, rule.Readers, ""
		for _, c := range rule.Channels {
			a.Channels = append(a.Channels, string(c))
		}
		return a
	}
	decidedBy := func(a *storedApproval, id string) *storedApproval {
		a.Approval.State, a.Approval.DecidedBy = api.ApprovalApproved, id
		return a
	}
	who := func(id string, groups ...string) *identity.Principal {
		return &identity.Principal{ID: id, Groups: groups}
	}
	for _, tc := range []struct {
		name       string
		a          *storedApproval
		inForce    policy.ApprovalRule
		p          *identity.Principal
		admin      bool
		sees, role bool
	}{
		{"a member of the group", created(byGroup), byGroup, who(member, "payments-approvers"), false, true, true},
		{"a token without the group", created(byGroup), byGroup, who(outsider, "other"), false, false, false},
		{"a token named in no rule", created(byGroup), byGroup, who(outsider), false, false, false},
		{"the group in another case", created(byGroup), byGroup, who(outsider, "Payments-Approvers"), false, false, false},
		{"the call's principal", created(byGroup), byGroup, who(principal), false, true, false},
		{"the principal in the group", created(byGroup), byGroup, who(principal, "payments-approvers"), false, true, true},
		{"the one who decided, since out of the group", decidedBy(created(byGroup), outsider), byGroup, who(outsider), false, true, false},
		{"an admin", created(byGroup), byGroup, who(adminID), true, true, false},
		{"a reader by id", created(byReaders), byReaders, who(reader), false, true, true},
		{"a reader's id at another issuer", created(byReaders), byReaders, who("https://other.test#id3"), false, false, false},
		{"a member of a group, where readers are named", created(byReaders), byReaders, who(member, "payments-approvers"), false, false, false},
		{"a reader no longer named", created(byReaders), byGroup, who(reader), false, false, false},
		{"a member of a group named since", created(byReaders), byGroup, who(member, "payments-approvers"), false, false, false},
		{"a member, the tool's console dropped since", created(byGroup), webhookOnly, who(member, "payments-approvers"), false, false, false},
		{"webhook only: a member of any group", created(webhookOnly), webhookOnly, who(member, "payments-approvers"), false, false, false},
		{"webhook only: an admin", created(webhookOnly), webhookOnly, who(adminID), true, true, false},
		{"webhook only: its principal", created(webhookOnly), webhookOnly, who(principal), false, true, false},
		{"created under a rule naming nobody", created(policy.ApprovalRule{Channels: console}), byGroup, who(member, "payments-approvers"), false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := seenBy(tc.p, tc.a, tc.inForce, tc.admin); got != tc.sees {
				t.Errorf("reads it: %v, want %v", got, tc.sees)
			}
			if got := approverOf(tc.p, tc.a, tc.inForce); got != tc.role {
				t.Errorf("holds the approver role: %v, want %v", got, tc.role)
			}
		})
	}
}

// TestApprovalRefusalNeedsTheRole: on the service, with the policy in force, a decision of an
// approver without the tool's approver role is refused approver_not_in_group, whatever else
// it may read; an admin reads the approval and may not decide it by that alone.
func TestApprovalRefusalNeedsTheRole(t *testing.T) {
	h := newHarness(t)
	a := stored("apr_role", api.ApprovalPending, "sha256:def1", time.Now().Add(time.Hour))
	a.Approval.DecidedBy, a.Approval.Server, a.Approval.Tool = "", "bank", "transfer"
	h.put(t, a)
	for _, tc := range []struct {
		name  string
		p     *identity.Principal
		admin bool
		sees  bool
		code  string // "" for a decision taken
	}{
		{"a member of the group", &identity.Principal{ID: "https://op.test#id2", Groups: []string{"payments-approvers"}}, false, true, ""},
		{"an admin", &identity.Principal{ID: "https://op.test#id5", Groups: []string{"verdict-admins"}}, true, true, api.CodeApproverNotInGroup},
		{"the principal", &identity.Principal{ID: "https://op.test#id1"}, false, true, api.CodeSelfApproval},
		{"a token without a role", &identity.Principal{ID: "https://op.test#id4", Groups: []string{"other"}}, false, false, api.CodeApproverNotInGroup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := h.s.sees(&Viewer{Approver: tc.p, Admin: tc.admin}, a); got != tc.sees {
				t.Errorf("reads it: %v, want %v", got, tc.sees)
			}
			code := ""
			if r := h.s.refusal(a, decider{approver: tc.p}, h.s.now()); r != nil {
				code = r.Code
			}
			if code != tc.code {
				t.Errorf("a decision: %q, want %q", code, tc.code)
			}
		})
	}
}
