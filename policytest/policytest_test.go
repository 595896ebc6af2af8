package policytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	examplePolicy = filepath.Join("..", "examples", "policy.yaml")
	exampleTests  = filepath.Join("..", "examples", "policy_test.yaml")
)

// TestExamplePolicy runs the example bank policy's tests: every case passes, and they exercise
// everything the coverage counts.
func TestExamplePolicy(t *testing.T) {
	rep, err := RunFiles(t.Context(), examplePolicy, []string{exampleTests}, true)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	rep.Write(&text, FormatText)
	if rep.Failed > 0 || rep.Passed == 0 {
		t.Fatalf("the example policy's tests fail:\n%s", text.String())
	}
	if !rep.Coverage.Complete(100) {
		t.Errorf("the example policy's tests do not cover it whole:\n%s", text.String())
	}
	t.Log(text.String())
}

// TestBrokenPolicyFails breaks the example policy the ways a careless edit would, and checks
// that its tests then fail, naming a case the edit breaks with a diff of what it expected.
func TestBrokenPolicyFails(t *testing.T) {
	original, err := os.ReadFile(examplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	const transferCase = "a transfer from the user's words is confirmed, reviewed and approved"
	tests := []struct {
		name     string
		old, new string
		failing  string // a case that must fail
		diff     string // what its diff must show
	}{
		{"a fields source removed", "amount: {allowed_sources: [user_answer, instruction]}", "amount: {allowed_sources: [user_answer]}",
			transferCase, "known.amount:\n          - instruction\n          + unknown, route ask_user"},
		{"a condition inverted", `expr: "args.amount <= 5000000"`, `expr: "args.amount > 5000000"`,
			"a transfer above 5,000,000 won is held", "outcome:\n          - hold\n          + ask_user"},
		{"a tool reclassified read", "bank/transfer:\n    class: irreversible", "bank/transfer:\n    class: read",
			transferCase, "outcome:\n          - ask_user\n          + not_gated (gate not_gated: class read)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Count(string(original), tt.old) != 1 {
				t.Fatalf("the example policy does not hold %q once", tt.old)
			}
			path := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(string(original), tt.old, tt.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := RunFiles(t.Context(), path, []string{exampleTests}, false)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			if err := rep.Write(&text, FormatText); err != nil {
				t.Fatal(err)
			}
			out := text.String()
			if rep.Failed == 0 {
				t.Fatalf("the tests pass on the broken policy:\n%s", out)
			}
			if !strings.Contains(out, "--- FAIL: "+tt.failing+" (") || !strings.Contains(out, tt.diff) {
				t.Errorf("the report does not name case %q with the diff\n%s\n---\n%s", tt.failing, tt.diff, out)
			}
		})
	}
}
