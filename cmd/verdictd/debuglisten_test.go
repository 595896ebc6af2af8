package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/httpx"
)

// A debug_listen address that cannot be bound stops the start at its config key, as listen
// does, before the service opens its database or reads its policy.
func TestDebugListenInUseStopsTheStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	b, _ := json.Marshal(map[string]any{
		"listen":       freePort(t),
		"debug_listen": taken.Addr().String(),
		"data_dir":     filepath.Join(dir, "data"),
		"issuer":       "verdictd",
		"signing_key":  filepath.Join(dir, "signing.jwk"),
		"policy":       filepath.Join(dir, "policy.yaml"),
		"callers":      []map[string]any{{"name": "agent", "token_sha256": httpx.HashToken("agent-token"), "principals": []string{"*"}}},
	})
	config := filepath.Join(dir, "verdictd.yaml")
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run([]string{"serve", "--config", config}, io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), config+":1:") ||
		!strings.Contains(stderr.String(), `debug_listen \"`+taken.Addr().String()+`\" cannot be bound`) ||
		!strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("exit %d\n%s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Error("the data directory was made before the start was refused")
	}
}
