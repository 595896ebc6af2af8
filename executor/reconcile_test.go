package executor

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/nonce"
	"github.com/verdictgate/verdict/store"
)

const transferJSON = `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`

// readyStatus is the status /readyz answers.
func readyStatus(t *testing.T, e *env) int {
	t.Helper()
	resp, err := http.Get(e.srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestEtcdReconcileEarlierRun: the run before this one of the same records file consumed three
// verdicts in etcd and died. One never got its started record: this run records it as
// consumed_without_start, and every executor then refuses it as consumed_not_started. Another
// was started: its record says what happened, and it stays a replay. So does the third, started
// and finished not_executed because its request never reached the server: its record accounts
// for the consume. A verdict this run consumed is never listed.
func TestEtcdReconcileEarlierRun(t *testing.T) {
	ep := etcdtest.Start(t)
	e := etcdEnv(t, ep)
	other := e.sibling()
	ctx := context.Background()
	inst, err := e.svc.db.FileID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	earlier, err := nonce.NewEtcd(ctx, nonce.EtcdOptions{Endpoints: []string{ep}, Prefix: "/test/", Owner: execID, Instance: inst})
	if err != nil {
		t.Fatal(err)
	}
	defer earlier.Close()
	lost, started, unsent := e.claims(transferArgs), e.claims(transferArgs), e.claims(transferArgs)
	lostTok, startedTok, unsentTok := e.sign(lost), e.sign(started), e.sign(unsent)
	for _, c := range []string{lost.ID, started.ID, unsent.ID} {
		if err := earlier.Consume(ctx, c, time.Unix(lost.Expiry, 0)); err != nil {
			t.Fatal(err)
		}
	}
	// The earlier run's started record of the second, which the recovery at start finished.
	if err := e.svc.execs.Start(ctx, &api.ExecutionRecord{ExecutorID: execID, VerdictID: started.ID, StartedAt: e.now}); err != nil {
		t.Fatal(err)
	}
	// And the third's, finished: its call reached no server.
	x := &api.ExecutionRecord{ExecutorID: execID, VerdictID: unsent.ID, Server: "bank", Tool: "transfer", StartedAt: e.now}
	if err := e.svc.execs.Start(ctx, x); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.execs.FinishStarted(ctx, x, api.ExecutionNotExecuted, api.ExecutionReasonUpstreamUnavailable, "", e.now); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.execs.RecoverStarted(ctx, e.now); err != nil {
		t.Fatal(err)
	}
	if got := readyStatus(t, e); got != http.StatusServiceUnavailable {
		t.Fatalf("readyz before reconciling: %d", got)
	}
	// This run consumes and runs a verdict of its own first.
	ran := e.claims(transferArgs)
	if r := e.execute(e.sign(ran), transferJSON); r.Status != http.StatusOK {
		t.Fatalf("execute: %+v", r)
	}
	for range 2 { // a second pass finds everything accounted for
		if err := e.svc.reconcileEarlierRuns(ctx, e.svc.recon); err != nil {
			t.Fatal(err)
		}
	}
	if got := readyStatus(t, e); got != http.StatusOK {
		t.Fatalf("readyz after reconciling: %d", got)
	}
	xs, err := e.svc.execs.ByVerdict(ctx, lost.ID)
	if err != nil || len(xs) != 1 || xs[0].Decision != api.ExecutionNotExecuted || xs[0].Reason != store.ReasonConsumedWithoutStart {
		t.Fatalf("records of the lost verdict: %+v, %v", xs, err)
	}
	for _, id := range []string{started.ID, ran.ID} {
		if xs, _ := e.svc.execs.ByVerdict(ctx, id); len(xs) != 1 || xs[0].Decision == api.ExecutionNotExecuted {
			t.Errorf("records of %s: %+v", id, xs)
		}
	}
	if xs, _ := e.svc.execs.ByVerdict(ctx, unsent.ID); len(xs) != 1 || xs[0].Reason != api.ExecutionReasonUpstreamUnavailable {
		t.Errorf("records of the unsent verdict: %+v", xs)
	}
	for _, x := range []*env{e, other} {
		if r := x.execute(lostTok, transferJSON); r.Status != http.StatusConflict || r.Error.Code != api.ExecutionReasonConsumedNotStarted {
			t.Errorf("the lost verdict presented again: %+v", r)
		}
		for _, tok := range []string{startedTok, unsentTok} {
			if r := x.execute(tok, transferJSON); r.Status != http.StatusConflict || r.Error.Code != "replayed" {
				t.Errorf("a started verdict presented again: %+v", r)
			}
		}
	}
	if got := len(e.arrivals("transfer")) + len(other.arrivals("transfer")); got != 1 {
		t.Errorf("banks saw %d transfers, want the one this run made", got)
	}
	v, err := readSample(e.srv.URL+"/metrics", func(name string) bool {
		return name == `executor_consumed_without_start_total{found="restart"}`
	})
	if err != nil || v != 1 {
		t.Errorf("executor_consumed_without_start_total{found=restart} = %v, %v; want 1", v, err)
	}
}
