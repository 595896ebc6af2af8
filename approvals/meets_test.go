package approvals

import (
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
)

// An approval approves only where the rule in force still takes its decision: the webhook's
// where the rule takes the webhook's, an approver's where it takes the console's and the
// approver holds its role, and never the principal's own under four eyes.
func TestApprovalMeetsTheRuleInForce(t *testing.T) {
	const approver, principal = "https://op.test#ann", "https://op.test#bob"
	console := []policy.Channel{policy.ChannelConsole}
	webhook := []policy.Channel{policy.ChannelWebhook}
	byApprover := func(group string, decidedGroups ...string) *storedApproval {
		return &storedApproval{DecidedGroups: decidedGroups,
			Approval: api.Approval{Principal: principal, DecidedBy: approver, Group: group}}
	}
	byWebhook := &storedApproval{Approval: api.Approval{Principal: principal, DecidedBy: api.DecidedByWebhook}}
	tests := []struct {
		name string
		a    *storedApproval
		rule policy.ApprovalRule
		want bool
	}{
		{"approver in the group", byApprover("pay", "pay"), policy.ApprovalRule{Channels: console, Group: "pay"}, true},
		{"approver named a reader", byApprover(""), policy.ApprovalRule{Channels: console, Readers: []string{approver}}, true},
		{"approver without the role", byApprover("pay", "other"), policy.ApprovalRule{Channels: console, Group: "ops"}, false},
		{"approver, the rule now takes the webhook only", byApprover("pay", "pay"), policy.ApprovalRule{Channels: webhook}, false},
		{"approver, the rule now takes the host only", byApprover("pay", "pay"), policy.ApprovalRule{Channels: []policy.Channel{policy.ChannelHost}}, false},
		{"webhook, the rule takes it", byWebhook, policy.ApprovalRule{Channels: webhook}, true},
		{"webhook, the rule now takes the console only", byWebhook, policy.ApprovalRule{Channels: console, Group: "pay"}, false},
		{"the principal's own under four eyes", &storedApproval{DecidedGroups: []string{"pay"},
			Approval: api.Approval{Principal: approver, DecidedBy: approver, Group: "pay"}},
			policy.ApprovalRule{Channels: console, Group: "pay", FourEyes: true}, false},
	}
	for _, tt := range tests {
		if got := tt.a.meets(tt.rule); got != tt.want {
			t.Errorf("%s: meets = %v, want %v", tt.name, got, tt.want)
		}
	}
}
