package policytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
)

// TestInlineDefinitions runs a call on a tool the policy lists inline in ways verdictd refuses
// to use: the run is decided on the definition verdictd decides on, never on another one.
func TestInlineDefinitions(t *testing.T) {
	const pay = `{"name": "pay", "inputSchema": {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"], "additionalProperties": false}}`
	src := `policy_version: "1"
servers:
  bank:
    audience: [executor-bank]
    tools:
      - ` + pay + `
tools:
  bank/pay:
    class: irreversible
    actions: [pay]
    fields:
      amount: {allowed_sources: [instruction]}
  "bank/#0": {class: irreversible, actions: [pay]}
`
	dir := t.TempDir()
	tests := []struct {
		name   string
		tools  []string
		tool   string
		detail string // the repair's; "" when the call is decided on the definition
		err    string // the step's error: the server lists no such tool
	}{
		{"the definition listed once", []string{pay}, "pay", "", ""},
		{"a duplicated tool", []string{pay, strings.Replace(pay, `"pay"`, `"pay", "description": "Pay."`, 1)}, "pay",
			`tool definition unavailable: tool "pay" is listed more than once`, ""},
		{"a definition that is not an object", []string{`"pay"`}, "#0",
			"tool definition unavailable: tool definition is not a JSON object: json: cannot unmarshal string into Go value of type map[string]json.RawMessage", ""},
		{"a definition that is not an object, called by name", []string{`"pay"`}, "pay", "", `server "bank" lists no tool "pay"`},
		{"a definition with no name", []string{strings.Replace(pay, `"name"`, `"Name"`, 1)}, "#0", "tool definition unavailable: tool definition has no name", ""},
		{"a definition with no name, called by its name's spelling", []string{strings.Replace(pay, `"name"`, `"Name"`, 1)}, "pay", "", `server "bank" lists no tool "pay"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol, err := policy.Parse([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			pol.Servers["bank"].Tools = nil
			for _, d := range tt.tools {
				pol.Servers["bank"].Tools = append(pol.Servers["bank"].Tools, json.RawMessage(d))
			}
			path := filepath.Join(dir, "t.yaml")
			body := `cases:
  - name: pay
    principal: u_01
    steps:
      - server: bank
        tool: "` + tt.tool + `"
        instruction: [{text: "pay 500", trust: user}]
        intent: {when_case: immediate, action: pay}
        arguments: {amount: {value: 500, at: "500"}}
        expect: {}
`
			f, r := loadWith(t, pol, path, body)
			c := f.Cases[0]
			rec, err := r.step(t.Context(), f, c, &conversation{state: newState(c), questions: map[string]api.Question{}}, c.Steps[0])
			switch {
			case tt.err != "":
				if err == nil || err.Error() != tt.err {
					t.Fatalf("got %v, want the error %q", err, tt.err)
				}
			case err != nil:
				t.Fatal(err)
			case tt.detail == "" && rec.Outcome == api.OutcomeDefinitionRepair:
				t.Fatalf("repair of a usable definition: %+v", rec.Gate)
			case tt.detail != "" && (rec.Outcome != api.OutcomeDefinitionRepair || rec.Gate.Kind != api.GateSchemaUnsupported ||
				rec.Gate.Detail != tt.detail || rec.ToolSchemaDigest != nil):
				t.Fatalf("got %s %+v, want definition_repair: %s", rec.Outcome, rec.Gate, tt.detail)
			}
		})
	}
}

// TestInlineServerInTestFile refuses a test file that gives the tools of a server the policy
// lists itself: verdictd decides on the policy's definitions, so a run on the file's would pass
// where production refuses (a tool listed twice, say) or decide on another schema.
func TestInlineServerInTestFile(t *testing.T) {
	pol, err := policy.Parse([]byte(`policy_version: "1"
servers:
  bank:
    audience: [executor-bank]
    tools:
      - {name: pay, inputSchema: {type: object}}
      - {name: pay, inputSchema: {type: object}}
tools:
  bank/pay: {class: irreversible, actions: [pay]}
`))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.yaml")
	body := `servers:
  bank:
    tools: [{name: pay, inputSchema: {type: object}}]
cases:
  - name: pay
    principal: u_01
    steps:
      - server: bank
        tool: pay
        instruction: [{text: "pay", trust: user}]
        intent: {when_case: immediate, action: pay}
        expect: {outcome: verdict_issued}
`
	f, r := loadWith(t, pol, path, body)
	want := path + `: servers.bank: the policy lists the tools of "bank" itself; a test runs on those`
	if _, err := r.Run(t.Context(), f); err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// loadWith writes a test file of body at path and loads it, with a runner of pol.
func loadWith(t *testing.T, pol *policy.Policy, path, body string) (*File, *Runner) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(pol)
	if err != nil {
		t.Fatal(err)
	}
	return f, r
}
