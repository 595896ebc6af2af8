package executor

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
)

// TestRequestDuringShutdownIsRecordedNotExecuted: a request that arrives after Close began,
// while an execution is still in flight, is answered 503 shutting_down with a committed
// not_executed record; the record is readable after a restart, the tool never saw the call,
// and the verdict, whose nonce was never consumed, still runs afterwards.
func TestRequestDuringShutdownIsRecordedNotExecuted(t *testing.T) {
	bankDir := t.TempDir()
	url, bank := startHTTPBank(t, bankDir, "127.0.0.1:0", "--hang")
	e := newEnv(t, envOpts{httpBank: url, callTimeout: 10 * time.Minute})
	e.bankLog = filepath.Join(bankDir, "bank.log")
	// Registered after the env's, so it runs first: a failing test must not leave the
	// env's cleanup waiting on the hanging call.
	t.Cleanup(func() { bank.Process.Kill() })
	args := `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`

	// An execution that stays in flight until the bank goes away holds Close in its drain.
	hanging := e.sign(e.claims(transferArgs))
	inflightDone := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/execute",
			strings.NewReader(`{"verdict":"`+hanging+`","arguments":`+args+`}`))
		req.Header.Set("Authorization", "Bearer "+callerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			inflightDone <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		inflightDone <- resp.StatusCode
	}()
	e.waitArrival("transfer")

	closed := make(chan error, 1)
	svc := e.svc
	go func() { closed <- svc.Close(context.Background()) }()

	// Wait for the drain to begin: a malformed verdict is refused as malformed (403) before,
	// and as shutting_down (503) after. Either way it runs nothing.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r := e.execute("not-a-verdict", `{}`)
		if r.Status == http.StatusServiceUnavailable {
			break
		}
		if r.Status != http.StatusForbidden || r.Error.Code != "malformed" {
			t.Fatalf("before shutdown: %+v", r)
		}
		if time.Now().After(deadline) {
			t.Fatal("the drain never began")
		}
	}

	late := e.sign(e.claims(transferArgs))
	r := e.execute(late, args)
	if r.Status != http.StatusServiceUnavailable || r.Error.Code != api.CodeShuttingDown {
		t.Fatalf("during shutdown: %+v", r)
	}
	x := r.Execution
	recordID, _ := x["record_id"].(string)
	if recordID == "" || x["execution_decision"] != "not_executed" || x["reason"] != api.CodeShuttingDown ||
		x["executor_id"] != execID || x["verdict"] != late || x["verdict_id"] != nil && x["verdict_id"] != "" {
		t.Fatalf("refusal record: %v", x)
	}
	if n := len(e.arrivals("transfer")); n != 1 {
		t.Fatalf("the bank saw %d transfers, want only the one in flight", n)
	}

	// The bank going away ends the call in flight, and with it the drain.
	bank.Process.Kill()
	bank.Wait()
	<-inflightDone
	if err := <-closed; err != nil {
		t.Fatal(err)
	}

	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	waitFree(t, addr)
	startHTTPBank(t, bankDir, addr)
	e.srv.Close()
	e.svc = e.open(svc.cfg)

	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/executions/"+recordID, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stored map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&stored); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("read the record after restart: %d %v", resp.StatusCode, err)
	}
	for _, k := range []string{"record_id", "execution_decision", "reason", "arguments_digest", "verdict", "started_at"} {
		if stored[k] != x[k] {
			t.Errorf("%s after restart: %v, answered %v", k, stored[k], x[k])
		}
	}

	if r := e.execute(late, args); r.Status != http.StatusOK {
		t.Fatalf("the verdict refused during shutdown, after restart: %+v", r)
	}
}
