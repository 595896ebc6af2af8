package policytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorldAnswers runs a policy whose tool is listed inline, measures a balance and asks a
// webhook for C3: each step's fixed measurement and approver answer decide, a missing one
// fails closed, and an answer to a slot nobody asked about fails the case.
func TestWorldAnswers(t *testing.T) {
	dir := t.TempDir()
	pol := `policy_version: "1"
servers:
  bank:
    audience: [executor-bank]
    tools:
      - name: pay
        inputSchema: {type: object, properties: {amount: {type: integer}}, required: [amount], additionalProperties: false}
tools:
  bank/pay:
    class: irreversible
    approver: {webhook: "https://approver.example/c3"}
    fields:
      amount: {allowed_sources: [instruction]}
    measurements:
      balance: {http: {url: "http://127.0.0.1:9/balance", pointer: "/balance"}, timeout: 1s}
    conditions:
      - {id: covered, expr: "measured.balance >= args.amount"}
`
	tests := `cases:
  - name: %s
    principal: u_01
    steps:
      - server: bank
        tool: pay
        instruction: [{text: "pay 500", trust: user}]
        intent: {when_case: immediate, action: pay}
        arguments: {amount: {value: 500, at: "500"}}
%s`
	cases := []struct {
		name, steps, want string
	}{
		{"covered", "        approver: {approved: true}\n        measured: {balance: {value: 900}}\n        expect: {outcome: verdict_issued, known: {covered: measured_data}, call: {amount: 500}}\n", ""},
		{"not covered", "        approver: {approved: true}\n        measured: {balance: {value: 100}}\n        expect: {outcome: hold, unmet: [covered]}\n", ""},
		{"lookup failed", "        approver: {approved: true}\n        measured: {balance: {error: down}}\n        expect: {outcome: definition_repair}\n", ""},
		{"no measurement given", "        approver: {approved: true}\n        expect: {outcome: definition_repair}\n", ""},
		{"no approver answer", "        measured: {balance: {value: 900}}\n        expect: {outcome: ask_user, gate: tool_undetermined}\n", ""},
		{"approver says no", "        approver: {approved: false, reason: \"not this tool\"}\n        expect: {outcome: ask_user, gate: tool_undetermined}\n", ""},
		{"answer to nothing asked", "        approver: {approved: true}\n        measured: {balance: {value: 900}}\n        expect: {}\n      - answers: {amount: 5}\n        expect: {}\n",
			`step 2 (` + filepath.Join(dir, "t.yaml") + `:13):` + "\n        no step before asked about \"amount\""},
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "t.yaml")
			body := strings.Replace(strings.Replace(tests, "%s", tt.name, 1), "%s", tt.steps, 1)
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := RunFiles(t.Context(), filepath.Join(dir, "policy.yaml"), []string{path}, true)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			rep.Write(&text, FormatText)
			if tt.want == "" && rep.Failed > 0 {
				t.Fatalf("failed:\n%s", text.String())
			}
			if tt.want != "" && (rep.Failed == 0 || !strings.Contains(text.String(), tt.want)) {
				t.Fatalf("want a failure saying %q:\n%s", tt.want, text.String())
			}
		})
	}
}
