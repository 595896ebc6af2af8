package verdictd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/confx"
)

// balanceServer answers the policy's balance measurement. The account "slow" is answered only
// once its request is given up (arrived is signalled first), "late" after a pause, any other at
// once.
func balanceServer(t *testing.T, late time.Duration) (url string, arrived <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("account") {
		case "slow":
			ch <- struct{}{}
			<-r.Context().Done()
			return
		case "late":
			time.Sleep(late)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"balance": 2000000}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

// measuredPolicy is the bank policy with a balance measurement and a condition reading it. The
// measurement's own timeout is longer than any preflight_timeout here: only the preflight's
// deadline can end a slow one.
func measuredPolicy(balanceURL string) string {
	return strings.Replace(bankPolicy, `    notices: ["Check the recipient."]`, `    notices: ["Check the recipient."]
    measurements:
      balance: {http: {url: "`+balanceURL+`/balance?account={{from_account}}", pointer: /balance}, timeout: 40s}
    conditions:
      - {id: balance_covers_amount, expr: "measured.balance >= args.amount"}`, 1)
}

// fromAccount is the landlord request drawing from account.
func fromAccount(t *testing.T, account string) []byte {
	t.Helper()
	req := landlord()
	req["pre_set_data"] = map[string]any{"from_account": map[string]any{"value": account, "trust": "user"}}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPreflightTimeout: a preflight not decided within preflight_timeout is refused with 503
// preflight_timeout and leaves no record; one decided in time is committed and answered. The
// slow one waits on a measurement that answers only once it is given up, so only the deadline
// ends it, however fast or slow the machine; the one decided in time runs under the default
// deadline, after a restart on the same file.
func TestPreflightTimeout(t *testing.T) {
	url, _ := balanceServer(t, 0)
	e := newEnv(t, envOpts{policy: measuredPolicy(url), mutate: func(c *Config) {
		c.PreflightTimeout = confx.Duration(200 * time.Millisecond)
	}})
	status, out := do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", fromAccount(t, "slow"))
	if status != http.StatusServiceUnavailable || !bytes.Contains(out, []byte(`"code":"preflight_timeout"`)) {
		t.Fatalf("slow preflight: %d %s", status, out)
	}
	if ids := e.records(); len(ids) != 0 {
		t.Fatalf("a refused preflight left records %v", ids)
	}

	e.stop()
	e.cfg.PreflightTimeout = 0
	e.start()
	rec := e.preflight(landlord())
	if ids := e.records(); len(ids) != 1 || ids[0] != rec.RecordID {
		t.Fatalf("records %v, want the answered %s alone", ids, rec.RecordID)
	}
	if got := rec.slot("balance_covers_amount"); got == nil || got["status"] != "known" {
		t.Fatalf("balance condition: %v", got)
	}
}

// TestPreflightCutShortCommitsNothing drives the deadline by hand: it passes while the run
// waits on its measurement, which then fails and the run decides definition repair. That
// decision is not committed, and the error says why.
func TestPreflightCutShortCommitsNothing(t *testing.T) {
	url, arrived := balanceServer(t, 0)
	e := newEnv(t, envOpts{policy: measuredPolicy(url)})
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-arrived
		cancel(ErrPreflightTimeout)
	}()
	_, err := e.svc.Preflight(ctx, fromAccount(t, "slow"))
	if !errors.Is(err, ErrPreflightTimeout) {
		t.Fatalf("err = %v, want ErrPreflightTimeout", err)
	}
	if ids := e.records(); len(ids) != 0 {
		t.Fatalf("a preflight decided past its deadline left records %v", ids)
	}
	// The conversation is free again: the same request decided in time is committed.
	res, err := e.svc.Preflight(context.Background(), fromAccount(t, "1102534471"))
	if err != nil {
		t.Fatal(err)
	}
	if ids := e.records(); len(ids) != 1 || ids[0] != res.Record.RecordID {
		t.Fatalf("records %v, want %s", ids, res.Record.RecordID)
	}
}

// TestCommittedRecordIsAnswered: a preflight whose commit ends after the server's write timeout
// still gets its record written to the caller. Without answerWindow the connection's write
// deadline would have passed and the caller would see the connection drop, with the record on
// file.
func TestCommittedRecordIsAnswered(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	url, _ := balanceServer(t, 2*writeTimeout)
	e := newEnv(t, envOpts{policy: measuredPolicy(url)})
	srv := httptest.NewUnstartedServer(e.svc.Handler())
	srv.Config.WriteTimeout = writeTimeout
	srv.Start()
	defer srv.Close()
	status, out := do(t, "POST", srv.URL+"/v1/preflight", callerToken, "application/json", fromAccount(t, "late"))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, out)
	}
	var rec record
	if err := json.Unmarshal(out, &rec); err != nil {
		t.Fatal(err)
	}
	if ids := e.records(); len(ids) != 1 || ids[0] != rec.RecordID {
		t.Fatalf("records %v, want the answered %s", ids, rec.RecordID)
	}
}
