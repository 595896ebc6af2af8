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
// does, before the service opens its database or dials a tool server.
func TestDebugListenInUseStopsTheStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	b, _ := json.Marshal(map[string]any{
		"listen":          freeAddr(t),
		"debug_listen":    taken.Addr().String(),
		"data_dir":        filepath.Join(dir, "data"),
		"executor_id":     "executor-bank",
		"trusted_issuers": []map[string]string{{"issuer": "verdictd", "jwks": filepath.Join(dir, "jwks.json")}},
		"receipt_key":     filepath.Join(dir, "signing.jwk"),
		"servers":         map[string]any{"bank": map[string]any{"url": "http://127.0.0.1:9/mcp"}},
		"callers":         []map[string]string{{"name": "gate", "token_sha256": httpx.HashToken("t0k")}},
	})
	config := filepath.Join(dir, "executor.yaml")
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
