package gates

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
)

// An offered value from last time is confirmed by an approval of exactly the value the question
// showed: if the executed baseline changes between the question and the answer, "keep" still
// settles the shown value, and an approval echoing the new baseline is no answer to it.
func TestPriorKeepIsTheShownValue(t *testing.T) {
	pol := strings.Replace(draftPolicy, "to_account: {allowed_sources: [user_answer, instruction]}",
		"to_account: {allowed_sources: [user_answer, instruction, prior_state]}", 1)
	pol = pol[:strings.Index(pol, "    conditions:")] // the memo's condition needs a memo
	body := func(answers ...map[string]any) string {
		req := map[string]any{
			"principal": "u", "server": "bank", "tool": "pay", "conversation_id": "c1",
			"instruction": []any{map[string]any{"text": "pay 900 again", "trust": "user"}},
			"intent":      map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 3}}},
			"candidates": []any{
				map[string]any{"field": "amount", "segment": 0, "span": []int{4, 7}, "value": 900},
				map[string]any{"field": "to_account", "value": "999-888-777"},
			},
		}
		if len(answers) > 0 {
			req["user_answers"] = answers
		}
		b, _ := json.Marshal(req)
		return string(b)
	}
	tests := []struct {
		name     string
		echo     string // the value the approval echoes
		status   string
		rejected []string
	}{
		{"keep the shown value", "110-222-333", api.StatusKnown, nil},
		{"echo the new baseline", "440-555-666", api.StatusUnknown, []string{"to_account:approval_value_mismatch"}},
		{"echo the model's value", "999-888-777", api.StatusUnknown, []string{"to_account:approval_value_mismatch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Without a drafted memo in the call: the memo is optional here.
			tool := Tool{Name: "pay", InputSchema: json.RawMessage(`{"type":"object","properties":{
				"to_account":{"type":"string"},"amount":{"type":"integer"},"memo":{"type":"string"}},
				"required":["to_account","amount"]}`)}
			d := newDraftRun(t, pol, tool)
			d.st.SetPrior("u:pay:bank/pay", map[string]any{"to_account": "110-222-333"})
			first := d.run(body())
			q := questionOf(first, "to_account")
			if q == nil || q.Kind != api.QuestionValue || q.Value != "110-222-333" {
				t.Fatalf("offer = %+v (outcome %s, gate %+v, questions %+v)", q, first.Outcome, first.Gate, first.Questions)
			}
			d.st.SetPrior("u:pay:bank/pay", map[string]any{"to_account": "440-555-666"})
			rec := d.run(body(approve(q, tt.echo)))
			s := slotOf(rec, "to_account")
			if s.Status != tt.status {
				t.Fatalf("to_account = %+v", s)
			}
			if got := rejectedReasons(rec); !slices.Equal(got, tt.rejected) {
				t.Errorf("rejected %v, want %v", got, tt.rejected)
			}
			if tt.status == api.StatusKnown {
				if s.Value != "110-222-333" || *s.Source != api.SourceUserAnswer || *s.OriginSource != api.SourcePriorState {
					t.Errorf("to_account = %+v, want the shown value, answered, first from prior_state", s)
				}
			}
		})
	}
}

// An approval counts only for the value its question showed: echoing the call's current value
// under a question that showed another approves nothing the user saw.
func TestApprovalIsOfTheShownValue(t *testing.T) {
	pol := strings.Replace(draftPolicy, "to_account: {allowed_sources: [user_answer, instruction]}",
		"to_account: {allowed_sources: [user_answer, instruction], confirm: true}", 1)
	pol = pol[:strings.Index(pol, "    drafted:")]
	tool := Tool{Name: "pay", InputSchema: json.RawMessage(`{"type":"object","properties":{
		"to_account":{"type":"string"},"amount":{"type":"integer"}},"required":["to_account","amount"]}`)}
	body := func(account string, answers ...map[string]any) string {
		text := "pay 900 to " + account
		req := map[string]any{
			"principal": "u", "server": "bank", "tool": "pay", "conversation_id": "c1",
			"instruction": []any{map[string]any{"text": text, "trust": "user"}},
			"intent":      map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 3}}},
			"candidates": []any{
				map[string]any{"field": "amount", "segment": 0, "span": []int{4, 7}, "value": 900},
				map[string]any{"field": "to_account", "segment": 0, "span": []int{11, len(text)}, "value": account},
			},
		}
		if len(answers) > 0 {
			req["user_answers"] = answers
		}
		b, _ := json.Marshal(req)
		return string(b)
	}
	tests := []struct {
		name, account, echo string
		status              string
		rejected            []string
	}{
		{"the shown value", "110-222-333", "110-222-333", api.StatusKnown, nil},
		{"the current value under a question that showed another", "220-555-010", "220-555-010", api.StatusUnknown,
			[]string{"confirm:to_account:approval_value_mismatch"}},
		{"the shown value after the value changed", "220-555-010", "110-222-333", api.StatusUnknown,
			[]string{"confirm:to_account:approval_value_mismatch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDraftRun(t, pol, tool)
			q := questionOf(d.run(body("110-222-333")), "confirm:to_account")
			if q == nil || q.Value != "110-222-333" {
				t.Fatalf("confirmation = %+v", q)
			}
			rec := d.run(body(tt.account, approve(q, tt.echo)))
			if s := slotOf(rec, "confirm:to_account"); s.Status != tt.status {
				t.Fatalf("confirmation slot = %+v", s)
			}
			if got := rejectedReasons(rec); !slices.Equal(got, tt.rejected) {
				t.Errorf("rejected %v, want %v", got, tt.rejected)
			}
		})
	}
}
