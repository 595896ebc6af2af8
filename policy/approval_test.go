package policy

import (
	"reflect"
	"testing"
	"time"
)

func TestApprovalRule(t *testing.T) {
	const head = "policy_version: v1\nservers:\n  bank: {audience: [x], tools_from: {command: [a]}}\ntools:\n  bank/transfer:\n"
	tests := []struct {
		name, tool string
		want       []string // problems after "<file>:"; nil = loads
		rule       ApprovalRule
	}{
		{"none", "    class: irreversible\n", nil, DefaultApprovalRule()},
		{"console and host", "    approval: {channels: [host, console], group: ops}\n", nil,
			ApprovalRule{Channels: []Channel{ChannelHost, ChannelConsole}, Group: "ops", Timeout: DefaultApprovalTimeout, UseWithin: DefaultApprovalTimeout}},
		{"four eyes", "    approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m}\n", nil,
			ApprovalRule{Channels: []Channel{ChannelConsole}, FourEyes: true, Group: "payments-approvers", Timeout: 10 * time.Minute, UseWithin: 10 * time.Minute}},
		{"longest timeout", "    approval: {channels: [console], timeout: 24h, group: ops}\n", nil,
			ApprovalRule{Channels: []Channel{ChannelConsole}, Group: "ops", Timeout: 24 * time.Hour, UseWithin: 24 * time.Hour}},
		{"use within", "    approval: {channels: [console], timeout: 1h, use_within: 2m, group: ops}\n", nil,
			ApprovalRule{Channels: []Channel{ChannelConsole}, Group: "ops", Timeout: time.Hour, UseWithin: 2 * time.Minute}},
		{"use within, default timeout", "    approval: {channels: [console], use_within: 24h, group: ops}\n", nil,
			ApprovalRule{Channels: []Channel{ChannelConsole}, Group: "ops", Timeout: DefaultApprovalTimeout, UseWithin: 24 * time.Hour}},
		{"use within out of bounds", "    approval: {channels: [console], use_within: 9s, group: ops}\n",
			[]string{`6:37: tools["bank/transfer"].approval.use_within: 9s: want from 10s to 24h0m0s`}, ApprovalRule{}},
		{"use within too long", "    approval: {channels: [console], use_within: 25h, group: ops}\n",
			[]string{`6:37: tools["bank/transfer"].approval.use_within: 25h0m0s: want from 10s to 24h0m0s`}, ApprovalRule{}},
		{"use within, not a duration", "    approval: {channels: [console], use_within: 5, group: ops}\n",
			[]string{`6:37: tools["bank/transfer"].approval.use_within: want a string, got number`}, ApprovalRule{}},
		{"use within without console", "    approval: {channels: [host], use_within: 1m}\n",
			[]string{`6:34: tools["bank/transfer"].approval.use_within: names nothing: only console and webhook approvals are used after their decision (channels has neither)`}, ApprovalRule{}},
		{"four eyes with host", "    approval: {channels: [host, console], four_eyes: true, group: ops}\n",
			[]string{`6:43: tools["bank/transfer"].approval.four_eyes: four_eyes with host in channels: the principal would approve their own call in the host`}, ApprovalRule{}},
		{"four eyes without console", "    approval: {four_eyes: true}\n",
			[]string{`6:16: tools["bank/transfer"].approval.four_eyes: four_eyes needs console or webhook in channels: only they tell the approver from the principal`}, ApprovalRule{}},
		{"group without console", "    approval: {channels: [host], group: ops}\n",
			[]string{`6:34: tools["bank/transfer"].approval.group: group needs console in channels: neither the host nor the webhook has an approver token to carry it`}, ApprovalRule{}},
		{"timeout without console", "    approval: {timeout: 5m}\n",
			[]string{`6:16: tools["bank/transfer"].approval.timeout: names nothing: only console and webhook approvals wait (channels has neither)`}, ApprovalRule{}},
		{"bad values", "    approval: {channels: [console, web, console], timeout: 25h, four_eye: true, group: ops}\n", []string{
			`6:65: tools["bank/transfer"].approval.four_eye: unknown key (did you mean "four_eyes"?)`,
			`6:36: tools["bank/transfer"].approval.channels[1]: unknown channel "web" (want host, console or webhook)`,
			`6:41: tools["bank/transfer"].approval.channels[2]: duplicate channel "console"`,
			`6:51: tools["bank/transfer"].approval.timeout: 25h0m0s: want from 10s to 24h0m0s`,
		}, ApprovalRule{}},
		{"webhook", "    approval: {channels: [webhook], four_eyes: true, webhook: \"https://approvals.example/v1/decide\"}\n", nil,
			ApprovalRule{Channels: []Channel{ChannelWebhook}, FourEyes: true, Timeout: DefaultApprovalTimeout, UseWithin: DefaultApprovalTimeout,
				Webhook: "https://approvals.example/v1/decide", WebhookTimeout: DefaultWebhookTimeout}},
		{"webhook and console", "    approval: {channels: [console, webhook], group: ops, webhook: \"http://127.0.0.1:8080/a\", webhook_timeout: 2s, timeout: 1h}\n", nil,
			ApprovalRule{Channels: []Channel{ChannelConsole, ChannelWebhook}, Group: "ops", Timeout: time.Hour, UseWithin: time.Hour,
				Webhook: "http://127.0.0.1:8080/a", WebhookTimeout: 2 * time.Second}},
		{"webhook channel without URL", "    approval: {channels: [webhook]}\n",
			[]string{`6:5: tools["bank/transfer"].approval: webhook in channels needs webhook: the URL asked for the decision`}, ApprovalRule{}},
		{"webhook URL without channel", "    approval: {channels: [console], webhook: \"https://a.example/\", group: ops}\n",
			[]string{`6:37: tools["bank/transfer"].approval.webhook: names nothing: channels has no webhook`}, ApprovalRule{}},
		{"webhook timeout without channel", "    approval: {channels: [console], webhook_timeout: 2s, group: ops}\n",
			[]string{`6:37: tools["bank/transfer"].approval.webhook_timeout: names nothing: channels has no webhook`}, ApprovalRule{}},
		{"group with webhook only", "    approval: {channels: [webhook], group: ops, webhook: \"https://a.example/\"}\n",
			[]string{`6:37: tools["bank/transfer"].approval.group: group needs console in channels: neither the host nor the webhook has an approver token to carry it`}, ApprovalRule{}},
		{"bad webhook URLs", "    approval: {channels: [webhook], webhook: \"http://approvals.example/\", webhook_timeout: 31s}\n", []string{
			`6:37: tools["bank/transfer"].approval.webhook: "http://approvals.example/": plain http only to a loopback host (the request carries every value of the call)`,
			`6:75: tools["bank/transfer"].approval.webhook_timeout: 31s: want from 1s to 30s`,
		}, ApprovalRule{}},
		{"relative webhook", "    approval: {channels: [webhook], webhook: /decide}\n",
			[]string{`6:37: tools["bank/transfer"].approval.webhook: "/decide": want an absolute http(s) URL`}, ApprovalRule{}},
		{"webhook with credentials", "    approval: {channels: [webhook], webhook: \"https://u:p@a.example/\"}\n",
			[]string{`6:37: tools["bank/transfer"].approval.webhook: "https://u:p@a.example/": must not carry credentials`}, ApprovalRule{}},
		{"readers", "    approval: {channels: [console], four_eyes: true, readers: [\"https://op.example#u-7\", \"http://127.0.0.1:9000#id2\"]}\n", nil,
			ApprovalRule{Channels: []Channel{ChannelConsole}, FourEyes: true, Readers: []string{"https://op.example#u-7", "http://127.0.0.1:9000#id2"},
				Timeout: DefaultApprovalTimeout, UseWithin: DefaultApprovalTimeout}},
		{"readers and a group", "    approval: {channels: [console, webhook], group: ops, readers: [\"https://op.example#u-7\"], webhook: \"https://a.example/\"}\n", nil,
			ApprovalRule{Channels: []Channel{ChannelConsole, ChannelWebhook}, Group: "ops", Readers: []string{"https://op.example#u-7"},
				Timeout: DefaultApprovalTimeout, UseWithin: DefaultApprovalTimeout, Webhook: "https://a.example/", WebhookTimeout: DefaultWebhookTimeout}},
		{"console without group or readers", "    approval: {channels: [host, console], timeout: 5m}\n",
			[]string{`6:5: tools["bank/transfer"].approval: console in channels needs group or readers: who may read and decide its approvals (each shows every value of its call)`}, ApprovalRule{}},
		{"bad readers", "    approval: {channels: [console], readers: [u_01, \"https://op.example#\", \"op.example#id2\", \"https://op.example#id2\", \"https://op.example#id2\"]}\n", []string{
			`6:47: tools["bank/transfer"].approval.readers[0]: "u_01": want an approver's id, <issuer>#<sub> (the issuer's URL, "#", the token's subject)`,
			`6:53: tools["bank/transfer"].approval.readers[1]: "https://op.example#": want an approver's id, <issuer>#<sub> (the issuer's URL, "#", the token's subject)`,
			`6:76: tools["bank/transfer"].approval.readers[2]: "op.example#id2": want an approver's id, <issuer>#<sub> (the issuer's URL, "#", the token's subject)`,
			`6:120: tools["bank/transfer"].approval.readers[4]: duplicate reader "https://op.example#id2"`,
		}, ApprovalRule{}},
		{"empty readers", "    approval: {channels: [console], readers: []}\n",
			[]string{`6:37: tools["bank/transfer"].approval.readers: must not be empty (omit it to name nobody)`}, ApprovalRule{}},
		{"readers without console", "    approval: {channels: [webhook], readers: [\"https://op.example#id2\"], webhook: \"https://a.example/\"}\n",
			[]string{`6:37: tools["bank/transfer"].approval.readers: readers needs console in channels: only a console approver has a token to be named by`}, ApprovalRule{}},
		{"empty channels", "    approval: {channels: []}\n",
			[]string{`6:16: tools["bank/transfer"].approval.channels: must not be empty (omit it for [host])`}, ApprovalRule{}},
		{"not a boolean", "    approval: {channels: [console], four_eyes: yes please, group: ops}\n",
			[]string{`6:37: tools["bank/transfer"].approval.four_eyes: want a boolean, got string`}, ApprovalRule{}},
		{"bad duration", "    approval: {channels: [console], timeout: soon, group: ops}\n",
			[]string{`6:37: tools["bank/transfer"].approval.timeout: invalid duration "soon"`}, ApprovalRule{}},
		{"empty group", "    approval: {channels: [console], group: \"\"}\n",
			[]string{`6:37: tools["bank/transfer"].approval.group: must not be empty`}, ApprovalRule{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadOrProblems(t, head+tt.tool, tt.want)
			if p == nil {
				return
			}
			if got := p.Tool("bank", "transfer").ApprovalRule(); !reflect.DeepEqual(got, tt.rule) {
				t.Fatalf("rule %+v, want %+v", got, tt.rule)
			}
		})
	}
	if got := (*Tool)(nil).ApprovalRule(); !reflect.DeepEqual(got, DefaultApprovalRule()) {
		t.Fatalf("a tool without a policy entry: %+v", got)
	}
}

// TestApprovalRuleString: check-policy's line names the webhook without its query, which may
// carry a secret.
func TestApprovalRuleString(t *testing.T) {
	r := ApprovalRule{Channels: []Channel{ChannelConsole, ChannelWebhook}, FourEyes: true, Group: "ops", Readers: []string{"https://op.example#u-7"}, Timeout: time.Hour, UseWithin: 5 * time.Minute,
		Webhook: "https://a.example/decide?token=s3cret", WebhookTimeout: 5 * time.Second}
	const want = "channels console, webhook; four eyes; group ops; readers https://op.example#u-7; webhook https://a.example/decide?… (request timeout 5s); timeout 1h0m0s; use within 5m0s"
	if got := r.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
