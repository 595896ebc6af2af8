package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// startTestStack starts the three processes with the bank over stdio, from the repository root.
func startTestStack(t *testing.T, d *demo) {
	t.Helper()
	wd, _ := os.Getwd()
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	err := d.startStack()
	os.Chdir(wd)
	t.Cleanup(d.stop)
	if err != nil {
		t.Fatal(err)
	}
}

// verdictFor settles a transfer preflight in its own conversation and returns the record.
func verdictFor(t *testing.T, d *demo, conversation string) map[string]any {
	t.Helper()
	req, _ := transferRequest(conversation)
	req["new_request"] = true
	rec, err := d.settle(req)
	if err != nil {
		t.Fatal(err)
	}
	if rec["outcome"] != "verdict_issued" {
		t.Fatalf("outcome %v", rec["outcome"])
	}
	return rec
}

func (d *demo) execute(t *testing.T, token string, args any) (int, string) {
	t.Helper()
	status, out, err := d.present(token, args)
	if err != nil {
		t.Fatal(err)
	}
	code, _ := errCode(out).(string)
	if status == 200 {
		code = "executed"
	}
	return status, code
}

func (d *demo) transfers(t *testing.T) int {
	b, _ := os.ReadFile(d.path("bank-calls.jsonl"))
	return strings.Count(string(b), `"tool":"transfer"`)
}

// TestStackRefusesWhatTheVerdictDoesNotBind walks the refusals across the real process boundary
// with the bank over stdio: a tampered verdict, changed arguments, a replay and an expired
// verdict never reach the tool; the one valid call runs once; the audit then catches an
// execution record whose verdict was never issued.
func TestStackRefusesWhatTheVerdictDoesNotBind(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the whole stack")
	}
	d, err := newDemo(false)
	if err != nil {
		t.Fatal(err)
	}
	d.stdio, d.verdictTTL, d.clockSkew = true, "2s", "1s"
	startTestStack(t, d)

	rec := verdictFor(t, d, "c_e2e_1")
	token, args := rec["verdict"].(string), rec["call_arguments"]

	parts := strings.Split(token, ".")
	claims, _ := payload(token)
	claims["sub"] = "u_02"
	forged, _ := json.Marshal(claims)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(forged) + "." + parts[2]
	changed := map[string]any{}
	for k, v := range args.(map[string]any) {
		changed[k] = v
	}
	changed["to_account"] = "220-555-010"

	steps := []struct {
		name   string
		token  string
		args   any
		status int
		code   string
	}{
		{"tampered claims", tampered, args, 403, "bad_signature"},
		{"arguments changed after signing", token, changed, 403, "arguments_mismatch"},
		{"the signed call", token, args, 200, "executed"},
		{"a replay", token, args, 409, "replayed"},
	}
	for _, s := range steps {
		status, code := d.execute(t, s.token, s.args)
		if status != s.status || code != s.code {
			t.Fatalf("%s: %d %s, want %d %s", s.name, status, code, s.status, s.code)
		}
	}

	// A verdict left unused past its expiry plus the executor's skew.
	late := verdictFor(t, d, "c_e2e_2")
	exp, _ := claimInt(late["verdict"].(string), "exp")
	time.Sleep(time.Until(time.Unix(exp+2, 0)))
	if status, code := d.execute(t, late["verdict"].(string), late["call_arguments"]); status != 403 || code != "expired" {
		t.Fatalf("expired verdict: %d %s", status, code)
	}
	if n := d.transfers(t); n != 1 {
		t.Fatalf("the bank saw %d transfers, want 1", n)
	}

	// The audit is clean over the live daemons...
	if out, err := d.auditCmd("--executions", d.executor); err != nil {
		t.Fatalf("audit of the live daemons: %v\n%s", err, out)
	}
	// ...and catches an execution whose verdict was never issued.
	export := d.path("executions.jsonl")
	if err := d.exportExecutions(export); err != nil {
		t.Fatal(err)
	}
	injected := fmt.Sprintf(`{"record_id":"exe_01JINJECTED0000000000000000","actor":"executor","executor_id":"executor-bank","verdict_id":"bmV2ZXItaXNzdWVkLXZlcmRpY3Q","action_key":"u_01:send money:bank/transfer","ref_phase":"at_trigger","ref_record":"rec_nope","principal":"u_01","server":"bank","tool":"transfer","arguments_digest":"sha256:%s","execution_decision":"executed","reason":null,"started_at":"2026-11-30T10:00:00Z","finished_at":"2026-11-30T10:00:01Z","result_digest":null,"verdict":null}`, strings.Repeat("a", 64))
	f, err := os.OpenFile(export, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, injected)
	f.Close()
	out, err := d.auditCmd("--executions", export)
	var ee *exec.ExitError
	if !asExit(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, "execution_without_verdict") {
		t.Fatalf("audit with an injected execution: %v\n%s", err, out)
	}
}

func (d *demo) auditCmd(args ...string) (string, error) {
	all := append([]string{"audit", "--decisions", d.verdictd, "--token", adminToken}, args...)
	out, err := exec.Command(d.path("bin", "verdictd"), all...).CombinedOutput()
	return string(out), err
}

func (d *demo) exportExecutions(path string) error {
	req, _ := http.NewRequest("GET", d.executor+"/v1/executions", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || bytes.Count(b, []byte("\n")) == 0 {
		return fmt.Errorf("export: %d %s", resp.StatusCode, b)
	}
	return os.WriteFile(path, b, 0o600)
}

func claimInt(token, name string) (int64, error) {
	c, err := payload(token)
	if err != nil {
		return 0, err
	}
	n, ok := c[name].(json.Number)
	if !ok {
		return 0, fmt.Errorf("claim %s is %T", name, c[name])
	}
	return n.Int64()
}
