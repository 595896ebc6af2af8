package main

import (
	"bytes"
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
	"syscall"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/store"
)

// buildServeBinaries builds verdictd and the example bank server into a test directory.
func buildServeBinaries(t *testing.T) (verdictdBin, bankBin string) {
	t.Helper()
	dir := t.TempDir()
	for name, pkg := range map[string]string{"verdictd": ".", "bank": "../../examples/bank"} {
		if _, err := testbin.Build(dir, name, pkg); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "verdictd"), filepath.Join(dir, "bank")
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
		{[]string{"serve", "-h"}, 0},
		{[]string{"serve", "--bogus"}, 2},
		{[]string{"serve", "--config", "/nonexistent.yaml"}, 1},
		{[]string{"keygen"}, 2},
		{[]string{"keygen", "--out", t.TempDir(), "--alg", "HS256"}, 2},
		{[]string{"check-policy"}, 2},
		{[]string{"check-policy", "a", "b"}, 2},
		{[]string{"check-policy", "--bogus", "x"}, 2},
	}
	for _, tt := range tests {
		if got := run(tt.args, io.Discard, io.Discard); got != tt.code {
			t.Errorf("%v: exit %d, want %d", tt.args, got, tt.code)
		}
	}
}

func TestKeygenWritesKeyAndJWKS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var out bytes.Buffer
	if code := run([]string{"keygen", "--out", dir}, &out, io.Discard); code != 0 {
		t.Fatalf("keygen exit %d", code)
	}
	fi, err := os.Stat(filepath.Join(dir, "signing.jwk"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing.jwk: %v %v", err, fi)
	}
	if _, err := os.Stat(filepath.Join(dir, "jwks.json")); err != nil {
		t.Fatal(err)
	}
	// Never overwrites a key.
	if code := run([]string{"keygen", "--out", dir}, io.Discard, io.Discard); code != 1 {
		t.Fatalf("second keygen exit %d, want 1", code)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

const e2ePolicy = `policy_version: "%s"
servers:
  bank:
    audience: [executor-bank]
    tools_from: {command: ["%s", "--state", "%s"]}
tools:
  bank/transfer:
    class: irreversible
    actions: ["send money"]
  bank/schedule_transfer: {class: irreversible, actions: ["schedule a transfer"]}
  bank/get_balance: {class: read}
  bank/list_transactions: {class: read}
`

// TestServeProcess runs the built verdictd against the built bank server: it serves
// preflights, refuses callers without a token, keeps its policy through a broken reload,
// picks up a good one on SIGHUP, and exits cleanly on SIGTERM leaving a bbolt file that
// reopens with every record in it.
func TestServeProcess(t *testing.T) {
	verdictdBin, bankBin := buildServeBinaries(t)
	dir := t.TempDir()
	if code := run([]string{"keygen", "--out", filepath.Join(dir, "keys")}, io.Discard, os.Stderr); code != 0 {
		t.Fatal("keygen failed")
	}
	policyPath := filepath.Join(dir, "policy.yaml")
	writePolicy := func(body string) {
		tmp := policyPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, policyPath); err != nil {
			t.Fatal(err)
		}
	}
	writePolicy(fmt.Sprintf(e2ePolicy, "v1", bankBin, filepath.Join(dir, "bank.json")))
	addr := freePort(t)
	cfg := map[string]any{
		"listen":             addr,
		"data_dir":           filepath.Join(dir, "data"),
		"issuer":             "verdictd-e2e",
		"signing_key":        filepath.Join(dir, "keys", "signing.jwk"),
		"policy":             policyPath,
		"verdict_ttl":        "30s",
		"callers":            []map[string]any{{"name": "agent", "token_sha256": httpx.HashToken("agent-token"), "principals": []string{"*"}}},
		"admin_token_sha256": httpx.HashToken("admin-token"),
		"limits":             map[string]int{"max_body_bytes": 4096},
		"policy_poll":        "1h", // reloads in this test come from SIGHUP only
	}
	b, _ := json.Marshal(cfg)
	config := filepath.Join(dir, "verdictd.yaml")
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	cmd := exec.Command(verdictdBin, "serve", "--config", config)
	cmd.Stderr = &syncWriter{w: &logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})
	base := "http://" + addr
	waitUntil(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	req := `{"principal":"u_01","conversation_id":"c1","server":"bank","tool":"transfer",
	  "instruction":[{"text":"send money to my landlord, 500,000 won","trust":"user"}],
	  "intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,10]}},
	  "candidates":[{"field":"amount","segment":0,"span":[27,34],"value":500000}],
	  "pre_set_data":{"from_account":{"value":"1102534471","trust":"user"}}}`
	if code, _ := call(t, "POST", base+"/v1/preflight", "", req); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := call(t, "POST", base+"/v1/preflight", "wrong", req); code != 401 {
		t.Fatalf("wrong token: %d", code)
	}
	if code, body := call(t, "POST", base+"/v1/preflight", "agent-token", `{"principal":`+strings.Repeat(" ", 5000)+`"u"}`); code != 413 {
		t.Fatalf("oversized body: %d %s", code, body)
	}
	code, body := call(t, "POST", base+"/v1/preflight", "agent-token", req)
	if code != 200 {
		t.Fatalf("preflight: %d %s", code, body)
	}
	var rec struct {
		RecordID      string `json:"record_id"`
		Outcome       string `json:"outcome"`
		PolicyVersion string `json:"policy_version"`
	}
	json.Unmarshal(body, &rec)
	if rec.Outcome != "ask_user" || rec.PolicyVersion != "v1" {
		t.Fatalf("record: %s", body)
	}

	// A broken policy on SIGHUP keeps v1; a good one puts v2 in force.
	writePolicy("policy_version: v2\nservers: {bank: {audience: []}}\nbogus_key: 1\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, func() bool { return metricValue(t, base, `verdictd_policy_reloads_total{result="error"}`) == 1 })
	if v := metricValue(t, base, `verdictd_policy_info{version="v1"}`); v != 1 {
		t.Fatalf("policy v1 not in force after a broken reload: %v", v)
	}
	writePolicy(fmt.Sprintf(e2ePolicy, "v2", bankBin, filepath.Join(dir, "bank.json")))
	cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, func() bool { return metricValue(t, base, `verdictd_policy_info{version="v2"}`) == 1 })
	code, body = call(t, "POST", base+"/v1/preflight", "agent-token", req)
	if code != 200 || !strings.Contains(string(body), `"policy_version":"v2"`) {
		t.Fatalf("preflight after reload: %d %s", code, body)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	// Logs are JSON lines and never carry argument values or tokens.
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %s", line)
		}
		for _, secret := range []string{"1102534471", "500000", "agent-token", "admin-token", "landlord"} {
			if strings.Contains(line, secret) {
				t.Errorf("log line leaks %q: %s", secret, line)
			}
		}
	}

	db, err := store.Open(filepath.Join(dir, "data", "verdictd.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("reopen bbolt file: %v", err)
	}
	defer db.Close(context.Background())
	if _, err := db.Decisions().Get(context.Background(), rec.RecordID); err != nil {
		t.Fatalf("record after restart: %v", err)
	}
	n := 0
	db.Decisions().Since(context.Background(), time.Time{}, func(*store.Decision) error { n++; return nil })
	if n != 2 {
		t.Fatalf("%d records on file, want 2", n)
	}
}

func TestCheckPolicy(t *testing.T) {
	_, bankBin := buildServeBinaries(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", fmt.Sprintf(e2ePolicy, "v1", bankBin, filepath.Join(dir, "bank.json")))
	tests := []struct {
		name string
		path string
		code int
		want []string // substrings of stdout
	}{
		{"good policy lists the bank's tools", good, 0, []string{"policy v1: ok", "transfer", "get_balance"}},
		{"file errors carry their paths", write("bad.yaml", "policy_version: v1\nservers: {bank: {audience: []}}\nbogus: 1\n"), 1,
			[]string{"bad.yaml:2:18: servers.bank.audience: must name at least one executor", "bad.yaml:3:1: bogus: unknown key"}},
		{"unusable tool definitions are listed", write("inline.yaml", `policy_version: v1
servers:
  s:
    audience: [x]
    tools:
      - {name: ok, inputSchema: {type: object, properties: {a: {type: string}}, required: [a]}}
      - {name: noschema, description: "no schema at all"}
      - {name: irreducible, inputSchema: {type: object, not: {required: [a]}}}
      - {name: badlabel, description: "[required] a", inputSchema: {type: object}}
tools:
  s/missing: {class: irreversible}
`), 1, []string{`["noschema"]`, `["irreducible"]`, `["badlabel"]`, `tools["s/missing"]`}},
		{"an unreachable server is a problem", write("down.yaml", `policy_version: v1
servers:
  gone: {audience: [x], tools_from: {command: ["/nonexistent/server"]}}
`), 1, []string{"servers.gone.tools_from"}},
		{"a server that exits names its stderr", write("stderr.yaml", `policy_version: v1
servers:
  fs:
    audience: [x]
    tools_from: {command: [sh, -c, "echo 'Error: /srv/data: ENOENT' >&2; echo 'None of the specified directories are accessible' >&2; exit 1"]}
`), 1, []string{"stderr.yaml:5:5: servers.fs.tools_from: the server did not list its tools",
			"\n  fs stderr: Error: /srv/data: ENOENT\n  fs stderr: None of the specified directories are accessible\n"}},
		{"a condition that does not compile is listed", write("cel.yaml", `policy_version: v1
servers:
  s:
    audience: [x]
    tools:
      - {name: t, inputSchema: {type: object, properties: {a: {type: integer}}, required: [a]}}
tools:
  s/t:
    conditions:
      - {id: c1, expr: "args.a >>> 1"}
`), 1, []string{`tools["s/t"].conditions[0].expr`}},
		{"a fields entry naming no argument is a problem", write("typo.yaml", `policy_version: v1
servers:
  fs:
    audience: [x]
    tools:
      - {name: write_file, inputSchema: {type: object, properties: {path: {type: string}, content: {type: string}}, required: [path, content]}}
tools:
  fs/write_file:
    class: irreversible
    actions: ["write the file"]
    fields:
      pth: {confirm: true, allowed_sources: [user_answer]}
`), 1, []string{`tools["fs/write_file"]: fields.pth names no argument of the tool (did you mean "path"?)`}},
		{"unclassified tools are warned about", write("unclassified.yaml", `policy_version: v1
servers:
  s:
    audience: [x]
    tools:
      - {name: classified, inputSchema: {type: object}}
      - {name: unnamed, inputSchema: {type: object}}
      - {name: noclass, inputSchema: {type: object}}
tools:
  s/classified: {class: read}
  s/noclass: {notices: ["hi"]}
`), 0, []string{`warning: tools["s/unnamed"]: the policy does not name this tool`,
			`warning: tools["s/noclass"]: no class: treated as irreversible, and with no actions or approver it can never be approved`,
			"policy v1: ok"}},
		{"approval rules are shown", write("approvals.yaml", `policy_version: v1
servers:
  bank:
    audience: [x]
    tools:
      - {name: transfer, inputSchema: {type: object}}
      - {name: pay, inputSchema: {type: object}}
tools:
  bank/transfer:
    class: irreversible
    actions: ["send money"]
    approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m, use_within: 5m}
  bank/pay:
    class: irreversible
    actions: ["pay"]
    approval: {channels: [host, console], readers: ["https://op.example#u-7"]}
`), 0, []string{"policy v1: ok",
			"  approval of bank/pay: channels host, console; readers https://op.example#u-7; timeout 15m0s; use within 15m0s\n",
			"  approval of bank/transfer: channels console; four eyes; group payments-approvers; timeout 10m0s; use within 5m0s\n"}},
		{"relay rules are shown", write("relays.yaml", `policy_version: v1
servers:
  bank:
    audience: [x]
    tools:
      - {name: login_check, inputSchema: {type: object}}
      - {name: survey, inputSchema: {type: object}}
tools:
  bank/login_check:
    class: read
    relay: {allow_secrets: true}
  bank/survey:
    class: reversible
    relay: {allow_secrets: false}
`), 0, []string{"policy v1: ok",
			"  relay of bank/login_check: questions asking for secrets are relayed\n",
			"  relay of bank/survey: questions asking for secrets are refused (the default)\n"}},
		{"a relay rule on a gated tool is a problem", write("gatedrelay.yaml", `policy_version: v1
servers:
  bank:
    audience: [x]
    tools:
      - {name: transfer, inputSchema: {type: object}}
tools:
  bank/transfer:
    class: irreversible
    actions: ["send money"]
    relay: {allow_secrets: true}
`), 1, []string{`gatedrelay.yaml:11:5: tools["bank/transfer"].relay: names nothing: only read and reversible tools relay their server's questions, and this tool is irreversible`}},
		{"four eyes with the host channel is a problem", write("foureyes.yaml", `policy_version: v1
servers:
  bank:
    audience: [x]
    tools:
      - {name: transfer, inputSchema: {type: object}}
tools:
  bank/transfer:
    class: irreversible
    actions: ["send money"]
    approval: {channels: [host, console], four_eyes: true, group: ops}
`), 1, []string{`tools["bank/transfer"].approval.four_eyes: four_eyes with host in channels`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run([]string{"check-policy", "--timeout", "10s", tt.path}, &out, &errb)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out.String(), errb.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if tt.name == "unclassified tools are warned about" && strings.Contains(out.String(), `s/classified`) {
				t.Errorf("a classified tool is warned about:\n%s", out.String())
			}
			if tt.name == "unusable tool definitions are listed" && strings.Contains(out.String(), `["ok"]`) {
				t.Errorf("a usable tool is listed as a problem:\n%s", out.String())
			}
		})
	}
}

func call(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func metricValue(t *testing.T, base, series string) float64 {
	t.Helper()
	_, body := call(t, "GET", base+"/metrics", "", "")
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, series+" ") {
			var v float64
			fmt.Sscan(strings.TrimPrefix(line, series+" "), &v)
			return v
		}
	}
	return -1
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatal("condition not reached")
}

// check-policy --previous warns about a changed file that keeps its policy_version.
func TestCheckPolicyPreviousVersion(t *testing.T) {
	dir := t.TempDir()
	pol := func(version, class string) string {
		return "policy_version: " + version + "\nservers:\n  s:\n    audience: [x]\n    tools:\n      - {name: t, inputSchema: {type: object}}\ntools:\n  s/t: {class: " + class + "}\n"
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := write("old.yaml", pol("v1", "read"))
	tests := []struct {
		name, body string
		warn       bool
	}{
		{"same file", pol("v1", "read"), false},
		{"changed under the same version", pol("v1", "reversible"), true},
		{"changed with a new version", pol("v2", "reversible"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run([]string{"check-policy", "--previous", old, write("new.yaml", tt.body)}, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
			}
			if got := strings.Contains(out.String(), "warning: policy_version: the file differs"); got != tt.warn {
				t.Fatalf("warning %v, want %v:\n%s", got, tt.warn, out.String())
			}
		})
	}
}
