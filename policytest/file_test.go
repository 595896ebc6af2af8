package policytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodStep = `
cases:
  - name: one
    principal: u_01
    steps:
      - server: bank
        tool: transfer
        instruction: [{text: "Pay 5 won.", trust: user}]
`

// TestLoadErrors checks that every mistake in a test file is an error at its file, line and
// column, naming the key.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"unknown key", goodStep + "        expct: {outcome: hold}\n", `t.yaml:9:9: cases[0].steps[0]: unknown field "expct" (did you mean "expect"?)`},
		{"no expectation", goodStep, `t.yaml:6:9: cases[0].steps[0]: a step says what it must come to (expect)`},
		{"unknown outcome", goodStep + "        expect: {outcome: verdict}\n", `t.yaml:9:18: cases[0].steps[0].expect.outcome: outcome "verdict": want one of`},
		{"unknown source", goodStep + "        expect: {known: {amount: user}}\n", `t.yaml:9:26: cases[0].steps[0].expect.known.amount: "user": want a source`},
		{"unknown route", goodStep + "        expect: {unknown: {amount: ask}}\n", `cases[0].steps[0].expect.unknown.amount: route "ask"`},
		{"argument without its value", goodStep + "        arguments: {amount: {at: \"5\"}}\n        expect: {}\n", `t.yaml:9:29: cases[0].steps[0].arguments.amount: an argument gives its value`},
		{"unknown argument member", goodStep + "        arguments: {amount: {value: 5, where: \"5\"}}\n        expect: {}\n", `t.yaml:9:29: cases[0].steps[0].arguments.amount: json: unknown field "where"`},
		{"measurement with both", goodStep + "        measured: {balance: {value: 1, error: down}}\n        expect: {}\n", `t.yaml:9:29: cases[0].steps[0].measured.balance: a measurement gives a value or an error, not both`},
		{"call not a mapping", goodStep + "        expect: {call: [1]}\n", `t.yaml:9:18: cases[0].steps[0].expect.call: the call's arguments are a mapping`},
		{"first step without a tool", "cases:\n  - name: one\n    principal: u_01\n    steps:\n      - expect: {}\n", `t.yaml:5:9: cases[0].steps[0]: the first step names the server and the tool`},
		{"case named twice", "cases:\n  - {name: one, principal: u, steps: [{server: bank, tool: t, expect: {}}]}\n  - {name: one, principal: u, steps: [{server: bank, tool: t, expect: {}}]}\n", `t.yaml:3:6: cases[1].name: case "one" is named twice`},
		{"no case", "cases: []\n", `cases: a test file holds at least one case`},
		{"tools file missing", "servers:\n  bank: {tools_file: none.json}\n" + goodStep + "        expect: {}\n", `t.yaml:2:10: servers.bank.tools_file: open`},
		{"console state", goodStep + "        console: {state: yes}\n        expect: {}\n", `t.yaml:9:26: cases[0].steps[0].console.state: want a string, got true`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.yaml")
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil {
				t.Fatalf("loaded:\n%s", tt.file)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n%v\nwant it to contain\n%s", err, tt.want)
			}
		})
	}
}
