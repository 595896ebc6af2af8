package gates

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/api"
)

// consolePolicy takes bank/pay's approvals (a confirmation of the recipient) with rule.
func consolePolicy(rule string) string {
	pol := strings.Replace(draftPolicy, "to_account: {allowed_sources: [user_answer, instruction]}",
		"to_account: {allowed_sources: [user_answer, instruction], confirm: true}", 1)
	pol = pol[:strings.Index(pol, "    drafted:")]
	if rule != "" {
		pol += "    approval: " + rule + "\n"
	}
	return pol
}

var consoleTool = Tool{Name: "pay", InputSchema: json.RawMessage(`{"type":"object","properties":{
	"to_account":{"type":"string"},"amount":{"type":"integer"}},"required":["to_account","amount"]}`)}

func consoleBody(account string, amount int, answers ...map[string]any) string {
	text := fmt.Sprintf("pay %d to %s", amount, account)
	num := fmt.Sprint(amount)
	req := map[string]any{
		"principal": "u", "server": "bank", "tool": "pay", "conversation_id": "c1",
		"instruction": []any{map[string]any{"text": text, "trust": "user"}},
		"intent":      map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 3}}},
		"candidates": []any{
			map[string]any{"field": "amount", "segment": 0, "span": []int{4, 4 + len(num)}, "value": amount},
			map[string]any{"field": "to_account", "segment": 0, "span": []int{8 + len(num), len(text)}, "value": account},
		},
	}
	if len(answers) > 0 {
		req["user_answers"] = answers
	}
	b, _ := json.Marshal(req)
	return string(b)
}

// A console decision settles the call's approvals only for exactly the arguments it binds; a
// denial or an expiry of that call refuses it; the host's own approval counts only where the
// tool takes approvals in the host.
func TestConsoleDecision(t *testing.T) {
	args := map[string]any{"to_account": "110-222-333", "amount": json.Number("900")}
	digest := mustDigest(t, args)
	other := mustDigest(t, map[string]any{"to_account": "110-222-333", "amount": json.Number("901")})
	decided := func(state, d string) []ConsoleDecision {
		return []ConsoleDecision{{ApprovalID: "apr_1", ArgumentsDigest: d, State: state, DecidedBy: "http://op#id2"}}
	}
	tests := []struct {
		name     string
		rule     string
		console  []ConsoleDecision
		host     bool // the host approves the confirmation too
		outcome  string
		source   api.Source
		rejected []string
		approval *api.RecordApproval // without Arguments
	}{
		{"host only: a console decision is not read", "", decided(api.ApprovalApproved, digest), false,
			api.OutcomeAskUser, "", nil, nil},
		{"console: pending", "{channels: [console], group: ops}", nil, false, api.OutcomeAskUser, "", nil,
			&api.RecordApproval{Channels: []string{"console"}, ArgumentsDigest: digest}},
		{"console: approved", "{channels: [console], four_eyes: true, group: ops}", decided(api.ApprovalApproved, digest), false,
			api.OutcomeVerdictIssued, api.SourceConsoleApproval, nil,
			&api.RecordApproval{ApprovalID: "apr_1", State: api.ApprovalApproved, Channels: []string{"console"}, ArgumentsDigest: digest, DecidedBy: "http://op#id2"}},
		{"console: approved for other arguments", "{channels: [console], group: ops}", decided(api.ApprovalApproved, other), false,
			api.OutcomeAskUser, "", nil, &api.RecordApproval{Channels: []string{"console"}, ArgumentsDigest: digest}},
		{"console: denied", "{channels: [console], group: ops}", decided(api.ApprovalDenied, digest), false,
			api.OutcomeRefuse, "", nil,
			&api.RecordApproval{ApprovalID: "apr_1", State: api.ApprovalDenied, Channels: []string{"console"}, ArgumentsDigest: digest, DecidedBy: "http://op#id2"}},
		{"console: denied, though the host approves", "{channels: [host, console], group: ops}", decided(api.ApprovalDenied, digest), true,
			api.OutcomeRefuse, "", nil,
			&api.RecordApproval{ApprovalID: "apr_1", State: api.ApprovalDenied, Channels: []string{"host", "console"}, ArgumentsDigest: digest, DecidedBy: "http://op#id2"}},
		{"console: expired", "{channels: [console], group: ops}", decided(api.ApprovalExpired, digest), false,
			api.OutcomeRefuse, "", nil,
			&api.RecordApproval{ApprovalID: "apr_1", State: api.ApprovalExpired, Channels: []string{"console"}, ArgumentsDigest: digest}},
		{"console: lapsed", "{channels: [console], group: ops}", decided(api.ApprovalLapsed, digest), false,
			api.OutcomeRefuse, "", nil,
			&api.RecordApproval{ApprovalID: "apr_1", State: api.ApprovalLapsed, Channels: []string{"console"}, ArgumentsDigest: digest, DecidedBy: "http://op#id2"}},
		{"console only: the host's approval is refused", "{channels: [console], four_eyes: true, group: ops}", nil, true,
			api.OutcomeAskUser, "", []string{"confirm:to_account:channel_not_allowed"},
			&api.RecordApproval{Channels: []string{"console"}, ArgumentsDigest: digest}},
		{"host and console: the host's approval counts", "{channels: [host, console], group: ops}", nil, true,
			api.OutcomeVerdictIssued, api.SourceUserAnswer, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "console: expired" {
				tt.approval.DecidedBy = "http://op#id2"
			}
			d := newDraftRun(t, consolePolicy(tt.rule), consoleTool)
			first := d.run(consoleBody("110-222-333", 900))
			q := questionOf(first, "confirm:to_account")
			if q == nil || first.Outcome != api.OutcomeAskUser {
				t.Fatalf("first run: %s %+v", first.Outcome, first.Questions)
			}
			d.console = tt.console
			var answers []map[string]any
			if tt.host {
				answers = append(answers, approve(q, "110-222-333"))
			}
			rec := d.run(consoleBody("110-222-333", 900, answers...))
			if rec.Outcome != tt.outcome {
				t.Fatalf("outcome %s (gate %+v), want %s", rec.Outcome, rec.Gate, tt.outcome)
			}
			s := slotOf(rec, "confirm:to_account")
			if tt.source != "" {
				if s.Status != api.StatusKnown || *s.Source != tt.source {
					t.Fatalf("slot %+v, want known from %s", s, tt.source)
				}
				if (tt.source == api.SourceConsoleApproval) != (s.ApprovedBy == "http://op#id2") {
					t.Errorf("approved_by %q", s.ApprovedBy)
				}
			} else if s.Status != api.StatusUnknown {
				t.Fatalf("slot %+v, want unknown", s)
			}
			if got := rejectedReasons(rec); !slices.Equal(got, tt.rejected) {
				t.Errorf("rejected %v, want %v", got, tt.rejected)
			}
			got := rec.Approval
			if got != nil {
				c := *got
				c.Arguments = nil
				got = &c
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.approval) {
				t.Errorf("approval %+v, want %+v", got, tt.approval)
			}
			if rec.Approval != nil && rec.Approval.ApprovalID == "" && mustDigest(t, rec.Approval.Arguments) != digest {
				t.Errorf("a pending approval's arguments %v do not have its digest", rec.Approval.Arguments)
			}
			if rec.Outcome == api.OutcomeRefuse {
				if len(rec.Questions) != 0 || rec.Gate.Kind != api.GateApprovalRefused ||
					len(rec.Unmet) != 1 || rec.Unmet[0].Reason != "approval_"+tt.approval.State {
					t.Errorf("refused record: gate %+v unmet %+v questions %+v", rec.Gate, rec.Unmet, rec.Questions)
				}
			}
		})
	}
}

// No console decision approves any call but the one whose arguments digest it binds: whatever
// the call's values and the decision's digest, the approval slot is known from the console
// exactly when the two digests are equal, and a verdict follows only then.
func TestConsoleDecisionBindsTheDigest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		amount := rapid.IntRange(1, 99999).Draw(t, "amount")
		account := rapid.SampledFrom([]string{"110-222-333", "220-555-010"}).Draw(t, "account")
		dAmount := rapid.IntRange(1, 99999).Draw(t, "decided_amount")
		dAccount := rapid.SampledFrom([]string{"110-222-333", "220-555-010"}).Draw(t, "decided_account")
		if rapid.Bool().Draw(t, "same") {
			dAmount, dAccount = amount, account
		}
		decided := mustDigest(t, map[string]any{"to_account": dAccount, "amount": json.Number(fmt.Sprint(dAmount))})
		current := mustDigest(t, map[string]any{"to_account": account, "amount": json.Number(fmt.Sprint(amount))})
		d := newDraftRun(t, consolePolicy("{channels: [console], four_eyes: true, group: ops}"), consoleTool)
		d.console = []ConsoleDecision{{ApprovalID: "apr_1", ArgumentsDigest: decided, State: api.ApprovalApproved, DecidedBy: "http://op#id2"}}
		rec := d.run(consoleBody(account, amount))
		s := slotOf(rec, "confirm:to_account")
		fromConsole := s.Status == api.StatusKnown && *s.Source == api.SourceConsoleApproval
		if fromConsole != (decided == current) {
			t.Fatalf("decision for %s settled the call %s: %v", decided, current, fromConsole)
		}
		if (rec.Outcome == api.OutcomeVerdictIssued) != (decided == current) {
			t.Fatalf("outcome %s for a decision on %s and a call %s", rec.Outcome, decided, current)
		}
	})
}

// A checklist item of kind confirm approves the call too: for a tool without approval slots,
// the console decision of exactly the call settles it, and without one the run waits for it.
func TestConsoleDecisionSettlesTheChecklist(t *testing.T) {
	pol := strings.Replace(consolePolicy("{channels: [console], group: ops}"), ", confirm: true}", "}", 1)
	body := func() string {
		var req map[string]any
		_ = json.Unmarshal([]byte(consoleBody("110-222-333", 900)), &req)
		req["user_checklist"] = []any{map[string]any{"id": "chk_name", "kind": "confirm", "description": "the name is right"}}
		b, _ := json.Marshal(req)
		return string(b)
	}
	d := newDraftRun(t, pol, consoleTool)
	first := d.run(body())
	if first.Outcome != api.OutcomeAskUser || first.Approval == nil || first.Approval.ArgumentsDigest == "" {
		t.Fatalf("without a decision: %s %+v", first.Outcome, first.Approval)
	}
	d.console = []ConsoleDecision{{ApprovalID: "apr_1", ArgumentsDigest: first.Approval.ArgumentsDigest, State: api.ApprovalApproved, DecidedBy: "http://op#id2"}}
	rec := d.run(body())
	if rec.Outcome != api.OutcomeVerdictIssued || len(rec.UserChecklist) != 1 {
		t.Fatalf("with the decision: %s %+v", rec.Outcome, rec.UserChecklist)
	}
	if c := rec.UserChecklist[0]; c.Status != api.StatusKnown || *c.Source != api.SourceConsoleApproval || c.ApprovedBy != "http://op#id2" {
		t.Errorf("checklist item %+v", c)
	}
}
