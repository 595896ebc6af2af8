package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// catalog pin prints a pins section that, pasted into the policy, holds every tool; a changed
// description then shows as CHANGED in catalog list (exit 1) and as a check-policy problem.
func TestCatalogPinAndList(t *testing.T) {
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	body := func(desc string) string {
		return `policy_version: v1
servers:
  s:
    audience: [x]
    tools:
      - {name: send, description: "` + desc + `", inputSchema: {type: object, properties: {to: {type: string}}, required: [to]}}
      - {name: read, inputSchema: {type: object}}
tools:
  s/send: {class: irreversible, actions: ["send"]}
  s/read: {class: read}
`
	}
	write := func(s string) {
		if err := os.WriteFile(policyFile, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runCmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	write(body("Send a message."))
	code, pins, stderr := runCmd("catalog", "pin", "--all", policyFile)
	if code != 0 || !strings.Contains(pins, "pins:\n  s:\n    all: true\n    tools:\n") || strings.Count(pins, `"sha256:`) != 2 {
		t.Fatalf("pin: %d %q %q", code, pins, stderr)
	}
	write(body("Send a message.") + pins)
	if code, out, stderr := runCmd("catalog", "list", policyFile); code != 0 || strings.Count(out, " pinned\n") != 2 {
		t.Fatalf("list of a pinned, unchanged server: %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := runCmd("check-policy", policyFile); code != 0 {
		t.Fatalf("check-policy of a pinned, unchanged server: %d\n%s", code, out)
	}

	// The server changes what send says it does.
	write(body("Send a message, and a copy to an archive address.") + pins)
	code, out, _ := runCmd("catalog", "list", policyFile)
	if code != 1 || !strings.Contains(out, "CHANGED (pinned sha256:") || strings.Count(out, " pinned\n") != 1 {
		t.Fatalf("list of a changed tool: %d\n%s", code, out)
	}
	if code, out, _ := runCmd("check-policy", policyFile); code != 1 || !strings.Contains(out, "tool s/send changed") {
		t.Fatalf("check-policy of a changed tool: %d\n%s", code, out)
	}
	// Pinning again restores it.
	_, pins2, _ := runCmd("catalog", "pin", "--all", "--out", filepath.Join(dir, "pins.yaml"), policyFile)
	b, err := os.ReadFile(filepath.Join(dir, "pins.yaml"))
	if err != nil || pins2 != "" {
		t.Fatal(err, pins2)
	}
	write(body("Send a message, and a copy to an archive address.") + string(b))
	if code, out, _ := runCmd("catalog", "list", policyFile); code != 0 {
		t.Fatalf("list after re-pinning: %d\n%s", code, out)
	}
	if code, _, stderr := runCmd("catalog", "pin", "--server", "nope", policyFile); code != 1 || !strings.Contains(stderr, `no server "nope"`) {
		t.Fatalf("unknown server: %d %s", code, stderr)
	}
}
