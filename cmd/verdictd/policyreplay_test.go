package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyReplay runs verdictd policy replay on a JSONL export: its exit status and what it
// prints. What a replay decides is tested on a real run in verdictd (TestReplayRecordedRun).
func TestPolicyReplay(t *testing.T) {
	pol := filepath.Join("..", "..", "examples", "policy.yaml")
	dir := t.TempDir()
	// A record kept without its capture, and one whose capture was masked on export.
	export := filepath.Join(dir, "records.jsonl")
	lines := `{"schema_version":"1","record_id":"rec_1","action_key":null,"principal":"u_01","server":"bank","tool":"transfer","outcome":"ask_user","timestamp":"2026-01-05T09:00:00.000Z"}
{"schema_version":"1","record_id":"rec_2","action_key":null,"principal":"u_01","server":"bank","tool":"get_balance","outcome":"not_gated","timestamp":"2026-01-05T09:00:01.000Z","capture":"***"}
`
	if err := os.WriteFile(export, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("policy_version: 1\nservers: {}\ntools: {bank/x: {class: maybe}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{"nothing replayable", []string{"--policy", pol, "--records", export}, 0,
			"2 records, 0 replayed, 2 not replayable, 0 changed", ""},
		{"one tool", []string{"--policy", pol, "--records", export, "--tool", "bank/get_balance"}, 0,
			"1 records, 0 replayed, 1 not replayable", ""},
		{"since", []string{"--policy", pol, "--records", export, "--since", "2026-01-05T09:00:01Z"}, 0, "1 records", ""},
		{"json", []string{"--policy", pol, "--records", export, "--format", "json"}, 0, `"reason": "masked"`, ""},
		{"no records", []string{"--policy", pol}, 2, "", "--policy and --records are required"},
		{"bad since", []string{"--policy", pol, "--records", export, "--since", "yesterday"}, 2, "", "RFC 3339"},
		{"unknown format", []string{"--policy", pol, "--records", export, "--format", "xml"}, 2, "", "unknown format"},
		{"a policy that does not load", []string{"--policy", broken, "--records", export}, 2, "", "broken.yaml"},
		{"a source that does not read", []string{"--policy", pol, "--records", filepath.Join(dir, "none")}, 2, "", "none"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"policy", "replay"}, tt.args...), &stdout, &stderr); code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, &stdout, &stderr)
			}
			if !strings.Contains(stdout.String(), tt.out) || !strings.Contains(stderr.String(), tt.err) {
				t.Errorf("stdout does not say %q or stderr %q:\n%s\n%s", tt.out, tt.err, &stdout, &stderr)
			}
		})
	}
}
