package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdict"
)

var binDir string

func TestMain(m *testing.M) {
	var err error
	binDir, err = os.MkdirTemp("", "executor-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, pkg := range []string{"./", "../../examples/bank"} {
		name := filepath.Base(pkg)
		if pkg == "./" {
			name = "executor"
		}
		if _, err := testbin.Build(binDir, name, pkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

func TestUsageAndBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{"-h"}, 0},
		{[]string{"nope"}, 2},
		{[]string{"serve"}, 2},
		{[]string{"serve", "--bogus"}, 2},
		{[]string{"keygen"}, 2},
		{[]string{"keygen", "--out", t.TempDir(), "--alg", "HS256"}, 2},
		{[]string{"serve", "--config", "/nonexistent.yaml"}, 1},
	}
	for _, tt := range tests {
		if got := run(tt.args, io.Discard, io.Discard); got != tt.code {
			t.Errorf("%v: exit %d, want %d", tt.args, got, tt.code)
		}
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proc is a running executor process.
type proc struct {
	cmd  *exec.Cmd
	addr string
}

func start(t *testing.T, config string, addr string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "executor"), "serve", "--config", config)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &proc{cmd: cmd, addr: addr}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return d
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("executor did not become ready")
	return nil
}

// TestKill9BetweenStartedAndOutcome kills the executor while a slow tool call is in flight: at
// restart the record reads outcome_unknown and the verdict cannot run again.
func TestKill9BetweenStartedAndOutcome(t *testing.T) {
	dir := t.TempDir()
	if _, err := keys.Keygen(filepath.Join(dir, "issuer"), jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Keygen(filepath.Join(dir, "receipt"), jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	bankLog := filepath.Join(dir, "bank.log")
	bankCmd := []string{filepath.Join(binDir, "bank"), "--state", filepath.Join(dir, "bank.json"), "--log", bankLog, "--delay", "30s"}
	addr := freeAddr(t)
	cfg := map[string]any{
		"listen":             addr,
		"data_dir":           filepath.Join(dir, "data"),
		"executor_id":        "executor-bank",
		"trusted_issuers":    []map[string]string{{"issuer": "verdictd", "jwks": filepath.Join(dir, "issuer", "jwks.json")}},
		"receipt_key":        filepath.Join(dir, "receipt", "signing.jwk"),
		"servers":            map[string]any{"bank": map[string]any{"command": bankCmd}},
		"callers":            []map[string]string{{"name": "gate", "token_sha256": httpx.HashToken("t0k")}},
		"admin_token_sha256": httpx.HashToken("adm"),
		"call_timeout":       "60s",
	}
	b, _ := json.Marshal(cfg)
	config := filepath.Join(dir, "executor.yaml")
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d := start(t, config, addr)

	// Sign a verdict for the tool as the bank lists it.
	client, err := upstream.Dial(context.Background(), "bank", upstream.Config{Command: []string{filepath.Join(binDir, "bank"), "--state", filepath.Join(dir, "other.json")}}, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := client.Tools(context.Background())
	client.Close()
	if err != nil {
		t.Fatal(err)
	}
	var tsd string
	for _, tl := range tools {
		if tl.Name == "transfer" {
			tsd = tl.Digest
		}
	}
	signer, err := keys.LoadSigner(filepath.Join(dir, "issuer", "signing.jwk"))
	if err != nil {
		t.Fatal(err)
	}
	args := `{"amount":1000,"from_account":"1102534471","to_account":"110-222-333"}`
	digest, _ := canonical.DigestJSON([]byte(args))
	jti, _ := verdict.NewID()
	now := time.Now().Unix()
	tok, err := verdict.Sign(signer, verdict.Claims{
		Issuer: "verdictd", Subject: "u_01", Audience: []string{"executor-bank"}, IssuedAt: now, NotBefore: now, Expiry: now + 300,
		ID: jti, Server: "bank", Tool: "transfer", ToolDigest: tsd, Policy: "p1", Arguments: digest,
		Slots: []verdict.Slot{}, ActionKey: "u_01:send money:bank/transfer", Phase: "at_trigger", Record: "rec_1",
	})
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"verdict":%q,"arguments":%s}`, tok, args)
	post := func(addr string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/execute", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t0k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	go post(addr)
	// Once the bank logged the call, the started record is on disk (it is committed before the
	// call is made).
	waitFor(t, func() bool { return countLines(bankLog) == 1 })
	d.cmd.Process.Kill()
	d.cmd.Wait()

	start(t, config, addr)
	status, out := post(addr)
	if status != 409 {
		t.Fatalf("resubmission after crash: %d %v", status, out)
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/executions?verdict_id="+jti, nil)
	req.Header.Set("Authorization", "Bearer adm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var decisions []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		decisions = append(decisions, fmt.Sprint(rec["execution_decision"], "/", rec["reason"]))
	}
	want := []string{"outcome_unknown/crashed_in_flight", "not_executed/replayed"}
	if fmt.Sprint(decisions) != fmt.Sprint(want) {
		t.Fatalf("records %v, want %v", decisions, want)
	}
	if n := countLines(bankLog); n != 1 {
		t.Fatalf("bank saw %d calls, want 1", n)
	}
}

func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("condition not reached")
}
