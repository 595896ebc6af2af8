package policy

import (
	"testing"
)

// TestRelayRule: relay takes allow_secrets alone, as a boolean, on a read or reversible tool;
// anything else is an error placed at its line and column.
func TestRelayRule(t *testing.T) {
	const head = "policy_version: v1\nservers:\n  ask: {audience: [x], tools_from: {command: [a]}}\ntools:\n  ask/survey:\n"
	tests := []struct {
		name, tool string
		want       []string // problems after "<file>:"; nil = loads
		allows     bool
	}{
		{"none", "    class: read\n", nil, false},
		{"read, allowed", "    class: read\n    relay: {allow_secrets: true}\n", nil, true},
		{"reversible, allowed", "    class: reversible\n    relay: {allow_secrets: true}\n", nil, true},
		{"said false", "    class: read\n    relay: {allow_secrets: false}\n", nil, false},
		{"irreversible", "    class: irreversible\n    relay: {allow_secrets: true}\n",
			[]string{`7:5: tools["ask/survey"].relay: names nothing: only read and reversible tools relay their server's questions, and this tool is irreversible`}, false},
		{"no class", "    relay: {allow_secrets: true}\n",
			[]string{`6:5: tools["ask/survey"].relay: names nothing: only read and reversible tools relay their server's questions, and this tool is irreversible`}, false},
		{"empty", "    class: read\n    relay: {}\n",
			[]string{`7:5: tools["ask/survey"].relay.allow_secrets: required`}, false},
		{"misspelt", "    class: read\n    relay: {allow_secret: true}\n", []string{
			`7:13: tools["ask/survey"].relay.allow_secret: unknown key (did you mean "allow_secrets"?)`,
			`7:5: tools["ask/survey"].relay.allow_secrets: required`,
		}, false},
		{"not a boolean", "    class: read\n    relay: {allow_secrets: \"yes\"}\n",
			[]string{`7:13: tools["ask/survey"].relay.allow_secrets: want a boolean, got string`}, false},
		{"not a mapping", "    class: read\n    relay: true\n",
			[]string{`7:5: tools["ask/survey"].relay: want a mapping, got boolean`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadOrProblems(t, head+tt.tool, tt.want)
			if p == nil {
				return
			}
			if got := p.Tool("ask", "survey").AllowsSecretQuestions(); got != tt.allows {
				t.Fatalf("AllowsSecretQuestions() = %v, want %v", got, tt.allows)
			}
		})
	}
	if (*Tool)(nil).AllowsSecretQuestions() {
		t.Fatal("a tool without a policy entry allows secret questions")
	}
}
