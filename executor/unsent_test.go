package executor

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/testing/conntest"
)

// TestCallToAKilledServerIsNotExecuted: the bank, reached over streamable HTTP, is killed
// between two calls. The next verdict is consumed and its call started, but the request
// reaches no server (the kept connection is closed, a new one refused): the record is
// not_executed, upstream_unavailable, not outcome_unknown, and no receipt is signed, since
// nothing happened. The verdict is used: presented again it is a replay.
func TestCallToAKilledServerIsNotExecuted(t *testing.T) {
	bankDir := t.TempDir()
	url, cmd := startHTTPBank(t, bankDir, "127.0.0.1:0")
	// Bounds the wait for a reconnect, when the connection was found lost first: that call
	// is not sent either.
	e := newEnv(t, envOpts{httpBank: url, callTimeout: 5 * time.Second})
	e.bankLog = bankDir + "/bank.log"
	if r := e.execute(e.sign(e.claims(transferArgs)), transferJSON); r.Status != http.StatusOK {
		t.Fatalf("before the kill: %+v", r)
	}
	cmd.Process.Kill()
	cmd.Wait()
	// Every kept connection to the bank is known closed first: a call that took one whose
	// end had not reached this machine could not tell whether the bank read it. The executor's
	// connections to a plain http server are kept by package plainhttp, which looks at a kept
	// connection before it writes on it: the kernel's having the bank's FIN is enough.
	conntest.WaitPeerClosed(t, strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"))

	c := e.claims(transferArgs)
	tok := e.sign(c)
	r := e.execute(tok, transferJSON)
	if r.Status != http.StatusBadGateway || r.Execution["execution_decision"] != "not_executed" ||
		r.Execution["reason"] != api.ExecutionReasonUpstreamUnavailable || r.Error.Code != api.ExecutionReasonUpstreamUnavailable || r.Receipt != "" {
		t.Fatalf("a call to a killed server: %+v", r)
	}
	xs, err := e.svc.execs.ByVerdict(context.Background(), c.ID)
	if err != nil || len(xs) != 1 || xs[0].Decision != api.ExecutionNotExecuted || xs[0].Reason != api.ExecutionReasonUpstreamUnavailable ||
		xs[0].Server != "bank" || xs[0].Tool != "transfer" {
		t.Fatalf("records of the verdict: %+v, %v", xs, err)
	}
	if r := e.execute(tok, transferJSON); r.Status != http.StatusConflict || r.Error.Code != "replayed" {
		t.Fatalf("the verdict presented again: %+v", r)
	}
	if got := e.arrivals("transfer"); len(got) != 1 {
		t.Fatalf("bank saw %d transfers, want the one before the kill", len(got))
	}
	for series, want := range map[string]float64{
		`executor_executions_total{decision="not_executed"}`:    1,
		`executor_executions_total{decision="outcome_unknown"}`: 0,
	} {
		if v, err := readSample(e.srv.URL+"/metrics", func(name string) bool { return name == series }); err != nil || v != want {
			t.Errorf("%s: %v, %v; want %v", series, v, err, want)
		}
	}
}

// TestServerDyingWithTheCallIsOutcomeUnknown: the bank reads the call (its log says so), then
// is killed before it answers. The call may have run: outcome_unknown, connection_lost, as
// always.
func TestServerDyingWithTheCallIsOutcomeUnknown(t *testing.T) {
	bankDir := t.TempDir()
	url, cmd := startHTTPBank(t, bankDir, "127.0.0.1:0", "--hang") // transfer never answers
	e := newEnv(t, envOpts{httpBank: url})
	e.bankLog = bankDir + "/bank.log"
	replies := make(chan reply, 1)
	go func() { replies <- e.execute(e.sign(e.claims(transferArgs)), transferJSON) }()
	e.waitArrival("transfer")
	cmd.Process.Kill()
	cmd.Wait()
	r := <-replies
	if r.Status != http.StatusGatewayTimeout || r.Execution["execution_decision"] != "outcome_unknown" || r.Execution["reason"] != api.ExecutionReasonConnectionLost {
		t.Fatalf("a call the bank read before it died: %+v", r)
	}
}
