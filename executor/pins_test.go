package executor

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
)

func pinPolicy(digest string) string {
	return `policy_version: "p1"
servers:
  bank: {audience: [executor-bank], tools_from: {command: [bank]}}
pins:
  bank:
    tools: {transfer: "` + digest + `"}
`
}

// A verdict for a tool its pin holds back is refused before its nonce is consumed; pinning the
// listed definition lets the same verdict run.
func TestPinnedToolRefusedUntilRepinned(t *testing.T) {
	e := newEnv(t, envOpts{})
	wrong := "sha256:" + strings.Repeat("0", 64)
	if err := e.svc.loadPins([]byte(pinPolicy(wrong))); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(transferArgs)
	tok := e.sign(e.claims(transferArgs))
	r := e.execute(tok, string(args))
	if r.Status != http.StatusForbidden || r.Error.Code != api.GateDefinitionUnpinned {
		t.Fatalf("held tool: %d %s", r.Status, r.Error.Code)
	}
	if n := len(e.arrivals("transfer")); n != 0 {
		t.Fatalf("the bank got %d transfers from a held tool", n)
	}
	// A broken edit keeps the pins in force.
	if err := e.svc.loadPins([]byte("policy_version: [")); err == nil {
		t.Fatal("a broken policy was accepted")
	}
	if r := e.execute(tok, string(args)); r.Error.Code != api.GateDefinitionUnpinned {
		t.Fatalf("after a broken edit: %d %s", r.Status, r.Error.Code)
	}
	listed, _ := e.svc.catalog.Lookup("bank", "transfer")
	if err := e.svc.loadPins([]byte(pinPolicy(listed.Digest))); err != nil {
		t.Fatal(err)
	}
	if r := e.execute(tok, string(args)); r.Status != http.StatusOK {
		t.Fatalf("after re-pinning: %d %s", r.Status, r.Error.Code)
	}
}

// A policy file that does not load stops the executor's start.
func TestPinsPolicyMustLoad(t *testing.T) {
	e := newEnv(t, envOpts{})
	bad := filepath.Join(e.dir, "policy.yaml")
	if err := os.WriteFile(bad, []byte("policy_version: p1\npins: {nope: {all: true}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := e.svc.cfg
	cfg.DataDir = filepath.Join(e.dir, "data2")
	cfg.Policy = bad
	if _, err := New(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), `unknown server "nope"`) {
		t.Fatalf("New with a broken policy: %v", err)
	}
}
