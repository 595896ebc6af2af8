package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

var auditT0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// auditIssued returns a verdict_issued decision record's metadata and JSON.
func auditIssued(t *testing.T, recordID, verdictID string) (store.DecisionMeta, []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"schema_version": "1", "record_id": recordID, "action_key": "u_01:send money:bank/transfer",
		"phase": "at_trigger", "principal": "u_01", "server": "bank", "tool": "transfer",
		"outcome": "verdict_issued", "verdict_id": verdictID, "arguments_digest": "sha256:aa",
		"timestamp": auditT0.Format(time.RFC3339Nano),
	})
	if err != nil {
		t.Fatal(err)
	}
	return store.DecisionMeta{RecordID: recordID, ActionKey: "u_01:send money:bank/transfer",
		Outcome: "verdict_issued", VerdictID: verdictID, Time: auditT0}, body
}

// auditExecuted returns an executed record of the verdict auditIssued(recordID, verdictID)
// issued.
func auditExecuted(recordID, verdictID, ref string) *api.ExecutionRecord {
	return &api.ExecutionRecord{
		RecordID: recordID, ExecutorID: "executor-bank", VerdictID: verdictID,
		ActionKey: "u_01:send money:bank/transfer", RefPhase: "at_trigger", RefRecord: ref,
		Principal: "u_01", Server: "bank", Tool: "transfer", ArgumentsDigest: "sha256:aa",
		StartedAt: auditT0.Add(time.Second),
	}
}

// auditFiles writes a verdictd bbolt file with issued verdicts v1 and v2 and an executor
// bbolt file with the given executions, each finished as executed.
func auditFiles(t *testing.T, execs ...*api.ExecutionRecord) (decisions, executions string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	decisions, executions = filepath.Join(dir, "verdictd.db"), filepath.Join(dir, "executor.db")
	ddb, err := store.Open(decisions, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"1", "2"} {
		meta, body := auditIssued(t, "rec_"+id, "v"+id)
		if err := ddb.Decisions().Append(ctx, meta, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := ddb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	xdb, err := store.Open(executions, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range execs {
		if err := xdb.Executions().Start(ctx, x); err != nil {
			t.Fatal(err)
		}
		if _, err := xdb.Executions().Finish(ctx, x.RecordID, api.ExecutionExecuted, "", "sha256:rr", auditT0.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := xdb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return decisions, executions
}

func runAudit(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = audit(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestAuditExitCodes(t *testing.T) {
	clean, cleanX := auditFiles(t, auditExecuted("exe_1", "v1", "rec_1"))
	bad, badX := auditFiles(t, auditExecuted("exe_1", "v1", "rec_1"), auditExecuted("exe_2", "v_never", "rec_9"))
	junk := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(junk, bytes.Repeat([]byte{0xff}, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"clean", []string{"--decisions", clean, "--executions", cleanX}, 0, "clean: no anomaly", ""},
		{"an execution without a verdict", []string{"--decisions", bad, "--executions", badX}, 1, "execution_without_verdict: verdict v_never", ""},
		{"help", []string{"-h"}, 0, "", "usage: verdictd audit"},
		{"no flags", nil, 2, "", "both --decisions and --executions are required"},
		{"no executions", []string{"--decisions", clean}, 2, "", "required"},
		{"unknown flag", []string{"--decisions", clean, "--executions", cleanX, "--since", "1h"}, 2, "", "flag provided but not defined"},
		{"stray argument", []string{"--decisions", clean, "--executions", cleanX, "extra"}, 2, "", `unexpected argument "extra"`},
		{"token twice", []string{"--decisions", clean, "--executions", cleanX, "--token", "a", "--token-file", junk}, 2, "", "not both"},
		{"negative grace", []string{"--decisions", clean, "--executions", cleanX, "--started-grace", "-1s"}, 2, "", "negative"},
		{"plain HTTP to another host", []string{"--decisions", "http://verdictd.example:8080", "--executions", cleanX}, 2, "", "in clear"},
		{"missing file", []string{"--decisions", clean + ".missing", "--executions", cleanX}, 2, "", "no such file"},
		{"not a record file", []string{"--decisions", clean, "--executions", junk}, 2, "", "not a bbolt file or a JSONL export"},
		{"missing CA bundle", []string{"--decisions", clean, "--executions", cleanX, "--cacert", junk + ".pem"}, 2, "", "CA bundle"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			if !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stdout:\n%s\nstderr:\n%s\nwant %q / %q", stdout, stderr, tc.stdout, tc.stderr)
			}
			if tc.code == 2 && tc.name != "help" && stdout != "" {
				t.Errorf("a failed audit printed a report:\n%s", stdout)
			}
		})
	}
}

func TestAuditJSON(t *testing.T) {
	d, x := auditFiles(t, auditExecuted("exe_1", "v1", "rec_1"), auditExecuted("exe_2", "v_never", "rec_9"))
	code, stdout, stderr := runAudit("--decisions", d, "--executions", x, "--json")
	if code != 1 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var report struct {
		Clean     bool `json:"clean"`
		Anomalies []struct {
			Kind             string   `json:"kind"`
			VerdictID        string   `json:"verdict_id"`
			ExecutionRecords []string `json:"execution_records"`
			Message          string   `json:"message"`
		} `json:"anomalies"`
		Decisions struct {
			Total     int            `json:"total"`
			ByOutcome map[string]int `json:"by_outcome"`
		} `json:"decisions"`
		Pairs struct {
			Paired            int `json:"paired"`
			IssuedNotExecuted int `json:"issued_not_executed"`
			Unpaired          int `json:"unpaired"`
		} `json:"pairs"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON value:\n%s", stdout)
	}
	if err := json.Unmarshal(raw, &report); err != nil {
		t.Fatal(err)
	}
	if report.Clean || len(report.Anomalies) != 1 || report.Anomalies[0].Kind != "execution_without_verdict" ||
		report.Anomalies[0].VerdictID != "v_never" || report.Anomalies[0].ExecutionRecords[0] != "exe_2" ||
		report.Anomalies[0].Message == "" {
		t.Errorf("anomalies = %+v", report.Anomalies)
	}
	if report.Decisions.Total != 2 || report.Pairs.Paired != 1 || report.Pairs.IssuedNotExecuted != 1 || report.Pairs.Unpaired != 1 {
		t.Errorf("report = %s", stdout)
	}
}

// TestAuditMergesRepeatedSources reads two executors' files: each alone is clean, together they
// show one verdict executed twice.
func TestAuditMergesRepeatedSources(t *testing.T) {
	d, xa := auditFiles(t, auditExecuted("exe_a", "v1", "rec_1"))
	_, xb := auditFiles(t, auditExecuted("exe_b", "v1", "rec_1"))
	for _, x := range []string{xa, xb} {
		if code, _, stderr := runAudit("--decisions", d, "--executions", x); code != 0 {
			t.Fatalf("%s alone: exit %d: %s", x, code, stderr)
		}
	}
	code, stdout, stderr := runAudit("--decisions", d, "--executions", xa, "--executions", xb)
	if code != 1 || !strings.Contains(stdout, "executed_more_than_once: verdict v1") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestAuditLockedFile opens the decision file as verdictd serve holds it; the audit must fail
// and point at the HTTP endpoint.
func TestAuditLockedFile(t *testing.T) {
	d, x := auditFiles(t, auditExecuted("exe_1", "v1", "rec_1"))
	db, err := store.Open(d, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	code, stdout, stderr := runAudit("--decisions", d, "--executions", x)
	if code != 2 || stdout != "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	for _, want := range []string{"locked", "--decisions https://HOST:PORT", "did not run to the end"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// auditDaemon serves one record endpoint from a bbolt file, behind an admin token.
func auditDaemon(t *testing.T, path, endpoint, token string) *httptest.Server {
	t.Helper()
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"code":"unauthorized","message":"the admin token is required"}}`)
			return
		}
		since, err := time.Parse(time.RFC3339, r.URL.Query().Get("since"))
		if err != nil || r.URL.Path != endpoint {
			http.NotFound(w, r)
			return
		}
		// The daemons' own export path: the body, then the completion trailers.
		if endpoint == "/v1/records" {
			store.ServeExport(w, func(out io.Writer) (int, error) {
				return db.Decisions().ExportJSONLCount(r.Context(), out, since, nil)
			})
		} else {
			store.ServeExport(w, func(out io.Writer) (int, error) {
				return db.Executions().ExportJSONLCount(r.Context(), out, since, nil)
			})
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestAuditHTTPSources(t *testing.T) {
	d, x := auditFiles(t, auditExecuted("exe_1", "v1", "rec_1"))
	verdictd := auditDaemon(t, d, "/v1/records", "verdictd-admin")
	executor := auditDaemon(t, x, "/v1/executions", "executor-admin")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("verdictd-admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"a token for each daemon", []string{"--decisions-token", "verdictd-admin", "--executions-token", "executor-admin"}, 0, ""},
		{"a token file and an override", []string{"--token-file", tokenFile, "--executions-token", "executor-admin"}, 0, ""},
		{"one token for both", []string{"--token", "verdictd-admin"}, 2, "401"},
		{"no token", nil, 2, "admin token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--decisions", verdictd.URL, "--executions", executor.URL}, tc.args...)
			code, stdout, stderr := runAudit(args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			if strings.Contains(stderr, "-admin") {
				t.Errorf("stderr shows a token:\n%s", stderr)
			}
		})
	}
}

// TestAuditBinary runs the built command as an operator would: the exit status is the verdict.
func TestAuditBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "verdictd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	clean, cleanX := auditFiles(t, auditExecuted("exe_1", "v1", "rec_1"))
	_, twice := auditFiles(t, auditExecuted("exe_2", "v1", "rec_1"))
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"audit", "--decisions", clean, "--executions", cleanX}, 0},
		{[]string{"audit", "--decisions", clean, "--executions", cleanX, "--executions", twice, "--json"}, 1},
		{[]string{"audit", "--decisions", clean}, 2},
		{[]string{"audit", "--decisions", clean, "--executions", cleanX + ".missing"}, 2},
	}
	for _, tc := range tests {
		cmd := exec.Command(bin, tc.args...)
		out, err := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		if code != tc.code {
			t.Errorf("verdictd %s: exit %d (%v), want %d\n%s", strings.Join(tc.args, " "), code, err, tc.code, out)
		}
	}
}
