package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testbin"
)

// policy init against the example bank writes a policy check-policy passes; run again it writes
// nothing, and says nothing differs until the server changes, then prints the diff and exits 1,
// never touching the file.
func TestPolicyInit(t *testing.T) {
	dir := t.TempDir()
	bank, err := testbin.Build(dir, "bank", "../../examples/bank")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "servers.yaml")
	declare := func(flags ...string) {
		argv, _ := json.Marshal(append([]string{bank, "--state", filepath.Join(dir, "bank.json")}, flags...))
		doc := "policy_version: \"init.1\"\nservers:\n  bank:\n    audience: [executor-bank]\n    tools_from: {command: " + string(argv) + "}\n"
		if err := os.WriteFile(config, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runCmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	declare()
	out := filepath.Join(dir, "policy.yaml")
	if code, stdout, stderr := runCmd("policy", "init", "--config", config, "--out", out); code != 0 || stdout != "" {
		t.Fatalf("init: %d %q %q", code, stdout, stderr)
	}
	written, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runCmd("check-policy", out); code != 0 || !strings.Contains(stdout, "ok (1 servers, 4 tools)") || strings.Contains(stdout, "warning") {
		t.Fatalf("check-policy of the written policy: %d\n%s%s", code, stdout, stderr)
	}
	// Without --out the same policy goes to stdout.
	if code, stdout, _ := runCmd("policy", "init", "--config", config); code != 0 || stdout != string(written) {
		t.Fatalf("init to stdout: %d, same policy: %t", code, stdout == string(written))
	}
	// Nothing changed: nothing to show, nothing written.
	if code, stdout, stderr := runCmd("policy", "init", "--config", config, "--out", out); code != 0 || stdout != "" || !strings.Contains(stderr, "not written") {
		t.Fatalf("second init: %d %q %q", code, stdout, stderr)
	}
	// The server changes transfer's description.
	declare("--schema-variant", "1")
	code, diff, stderr := runCmd("policy", "init", "--config", config, "--out", out)
	if code != 1 || !strings.HasPrefix(diff, "--- "+out+"\n+++ "+out+" (as written now)\n@@ ") {
		t.Fatalf("init on a changed server: %d\n%s%s", code, diff, stderr)
	}
	for _, want := range []string{
		"\n+    # [Notice] Transfers above 1,000,000 won are reported to the account owner.\n",
		"\n-      transfer: \"sha256:",
		"\n+      transfer: \"sha256:",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("the diff lacks %q:\n%s", want, diff)
		}
	}
	if now, err := os.ReadFile(out); err != nil || !bytes.Equal(now, written) {
		t.Fatalf("the existing policy was touched: %v", err)
	}
}

func TestPolicyInitRefusals(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "servers.yaml")
	if err := os.WriteFile(config, []byte("policy_version: v1\nservers:\n  s: {audience: [e], tools: [{name: t, inputSchema: {type: object}}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("policy_version: v1\nservers:\n  s: {audience: [e], tool_from: {url: \"http://x\"}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"no config", []string{"policy", "init"}, 2, "usage"},
		{"an argument", []string{"policy", "init", "--config", config, "extra"}, 2, "usage"},
		{"unknown subcommand", []string{"policy", "nope"}, 2, `unknown command "nope"`},
		{"no subcommand", []string{"policy"}, 2, "usage"},
		{"config with a mistake", []string{"policy", "init", "--config", bad}, 1, bad + ":3:"},
		{"out a directory", []string{"policy", "init", "--config", config, "--out", dir}, 1, "directory"},
		{"no saved answers", []string{"policy", "init", "--config", config, "--from", filepath.Join(dir, "none")}, 1, "saved tools/list answers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tt.args, &out, &errb); code != tt.code || !strings.Contains(errb.String(), tt.want) {
				t.Fatalf("exit %d, want %d; stderr %q, want %q", code, tt.code, errb.String(), tt.want)
			}
		})
	}
}
