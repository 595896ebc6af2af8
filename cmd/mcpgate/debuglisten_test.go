package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A debug_listen address that cannot be bound stops the start at its config key, as listen
// does, before the gateway reads its policy or state key.
func TestDebugListenInUseStopsTheStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	config := filepath.Join(dir, "mcpgate.yaml")
	body := "listen: 127.0.0.1:0\ndebug_listen: " + taken.Addr().String() + "\npolicy: " + filepath.Join(dir, "policy.yaml") +
		"\nverdictd: {url: \"http://127.0.0.1:1\", token: t}\nexecutor: {url: \"http://127.0.0.1:2\", token: t}\n" +
		"state_key_file: " + filepath.Join(dir, "state.key") + "\nprincipals: {u_01: {token_sha256: \"" + strings.Repeat("0", 64) + "\"}}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"serve", "--config", config}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), config+":2:1: ") ||
		!strings.Contains(stderr.String(), `debug_listen \"`+taken.Addr().String()+`\" cannot be bound`) ||
		!strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("exit %d\n%s", code, stderr.String())
	}
}
