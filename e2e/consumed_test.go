package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/verdict"
)

// faultEnv is executor.FaultAfterConsumeEnv, which only a build with the verdict_faults tag has.
const faultEnv = "VERDICT_FAULT_AFTER_CONSUME"

// buildFaultExecutor builds the executor with its test-only fault points.
func buildFaultExecutor(t *testing.T) string {
	t.Helper()
	bin, err := testbin.BuildTags(t.TempDir(), "executor-faults", "github.com/verdictgate/verdict/cmd/executor", "verdict_faults")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// lines returns the lines of a file; a missing file has none.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// consumedKeys returns the jtis consumed under the fleet's prefix, with what each key holds.
func consumedKeys(t *testing.T, endpoint string) map[string]map[string]any {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/e2e/nonce/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, kv := range resp.Kvs {
		var v map[string]any
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(string(kv.Key), "/e2e/nonce/")] = v
	}
	return out
}

// recordsOf reads a running executor's records through its admin export.
func recordsOf(t *testing.T, c *execConfig) []*api.ExecutionRecord {
	t.Helper()
	r := newClient(c.addr, adminToken, 30*time.Second).do(context.Background(), http.MethodGet, "/v1/executions", nil)
	if r.status != http.StatusOK {
		t.Fatalf("export: %d %v %s", r.status, r.err, r.body)
	}
	var out []*api.ExecutionRecord
	err := store.ReadJSONL(bytes.NewReader(r.body), func(line []byte) error {
		x := new(api.ExecutionRecord)
		if err := x.UnmarshalJSON(line); err != nil {
			return err
		}
		out = append(out, x)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// accountsForConsume reports whether x says its verdict was consumed by its executor: an
// attempt (started or finished from started), or a consumed_without_start record.
func accountsForConsume(x *api.ExecutionRecord) bool {
	return x.Decision != api.ExecutionNotExecuted || x.Reason == store.ReasonConsumedWithoutStart
}

// checkEveryConsumeOnRecord: every verdict consumed in etcd has a record of its consume on
// exactly one of the (running) executors.
func checkEveryConsumeOnRecord(t *testing.T, endpoint string, configs []*execConfig) {
	t.Helper()
	on := map[string][]string{}
	for _, c := range configs {
		for _, x := range recordsOf(t, c) {
			if accountsForConsume(x) {
				on[x.VerdictID] = append(on[x.VerdictID], c.addr)
			}
		}
	}
	keys := consumedKeys(t, endpoint)
	for jti := range keys {
		if len(on[jti]) != 1 {
			t.Errorf("verdict %s is consumed in etcd, and on record on %d executors (%v)", jti, len(on[jti]), on[jti])
		}
	}
	for jti := range on {
		if _, ok := keys[jti]; !ok {
			t.Errorf("verdict %s is on record as consumed, but etcd does not hold it", jti)
		}
	}
}

// auditOf audits the decisions of calls against the executors' records (HTTP for a running
// executor, its file otherwise).
func auditOf(t *testing.T, calls []issued, configs []*execConfig, running []bool) *audit.Report {
	t.Helper()
	var jsonl bytes.Buffer
	for _, c := range calls {
		b, err := json.Marshal(c.decision)
		if err != nil {
			t.Fatal(err)
		}
		jsonl.Write(append(b, '\n'))
	}
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	if err := os.WriteFile(path, jsonl.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var executions []audit.Source
	for i, c := range configs {
		if running[i] {
			src, err := audit.ParseSource("http://"+c.addr, audit.SourceOptions{Token: adminToken})
			if err != nil {
				t.Fatal(err)
			}
			executions = append(executions, src)
		} else {
			executions = append(executions, &audit.File{Path: filepath.Join(c.dataDir, "executor.db")})
		}
	}
	rep, err := audit.Run(context.Background(), []audit.Source{&audit.File{Path: path}}, executions, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// present sends a verdict and returns the status and error code.
func present(cl *client, c issued) (int, string) {
	r := cl.do(context.Background(), http.MethodPost, "/v1/execute", executeBody(c.token, c.args))
	return r.status, r.errorCode()
}

// TestEtcdCrashBetweenConsumeAndStart kills an executor with SIGKILL, round after round,
// while several of its requests stand exactly between their etcd consume and their started
// record (a fault point of the test build holds them there and names them), and once while a
// call is under way. Before the killed executor restarts, the verdicts it consumed are on
// record nowhere: presented elsewhere they are replays, and the audit is not clean. Once it
// has restarted (ready means reconciled), every consumed verdict is on record on exactly one
// executor, those that never started answer consumed_not_started everywhere, nothing reached a
// bank, and the audit is clean.
func TestEtcdCrashBetweenConsumeAndStart(t *testing.T) {
	faultBin := buildFaultExecutor(t)
	endpoint := etcdtest.Start(t)
	fault := filepath.Join(t.TempDir(), "consumed")
	t.Setenv(faultEnv, fault) // inherited by both; only the fault build has the fault point

	// a: the fault build; b: the ordinary one, whose bank never answers a transfer.
	a, b := newExecConfig(t), newExecConfig(t, "--hang")
	b.issuer = a.issuer
	configs := []*execConfig{a, b}
	for _, c := range configs {
		c.extra = map[string]any{"nonce_store": map[string]any{
			"kind": "etcd", "endpoints": []string{endpoint}, "prefix": "/e2e/", "request_timeout": "10s",
		}}
		c.write(t)
	}
	startA := func() *daemon {
		return startDaemon(t, faultBin, a.addr, filepath.Join(a.dir, "executor.log"), "serve", "--config", a.path)
	}
	da, db := startA(), startExecutor(t, b)
	fleet := &etcdFleet{configs: configs, issuer: a.issuer, tsd: toolDigest(t, a.addr, "bank", "transfer")}
	ca, cb := newClient(a.addr, callerToken, 60*time.Second), newClient(b.addr, callerToken, 60*time.Second)

	const rounds, perRound = 3, 5
	var all []issued
	for round := range rounds {
		calls := fleet.signWith(t, perRound, func(c *verdict.Claims) { c.Record = fmt.Sprintf("rec_r%d_%s", round, c.Record) })
		all = append(all, calls...)
		before := len(lines(t, fault))
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Go(func() { present(ca, c) }) // held at the fault point until the kill
		}
		waitFor(t, fmt.Sprintf("round %d: %d consumes held before their start", round, perRound), func() bool {
			return len(lines(t, fault)) == before+perRound
		})
		da.kill()
		wg.Wait()

		for _, c := range calls {
			if st, code := present(cb, c); st != http.StatusConflict || code != "replayed" {
				t.Fatalf("round %d, before the restart: %d %s, want 409 replayed", round, st, code)
			}
		}
		rep := auditOf(t, all, configs, []bool{false, true})
		if rep.Clean {
			t.Fatalf("round %d: the audit is clean with %d consumed verdicts on record nowhere", round, perRound)
		}
		for _, an := range rep.Anomalies {
			if an.Kind != audit.ConsumedUnaccounted {
				t.Errorf("round %d: anomaly %+v", round, an)
			}
		}

		da = startA()
		checkEveryConsumeOnRecord(t, endpoint, configs)
		for _, c := range calls {
			for _, cl := range []*client{ca, cb} {
				if st, code := present(cl, c); st != http.StatusConflict || code != "consumed_not_started" {
					t.Fatalf("round %d, after the restart: %d %s, want 409 consumed_not_started", round, st, code)
				}
			}
		}
		if rep := auditOf(t, all, configs, []bool{true, true}); !rep.Clean || rep.Pairs.ConsumedNotStarted != len(all) {
			t.Fatalf("round %d: audit %+v", round, rep)
		}
	}

	// Once during the call: b's bank never answers, so the call is under way when b dies.
	call := fleet.signWith(t, 1, func(c *verdict.Claims) { c.Record = "rec_call" })[0]
	all = append(all, call)
	go present(cb, call)
	waitFor(t, "the transfer to reach b's bank", func() bool { return len(readCallLog(t, b.bankLog)) == 1 })
	db.kill()
	waitForOrphans(t, b.dir)
	db = startExecutor(t, b)
	for _, cl := range []*client{ca, cb} {
		if st, code := present(cl, call); st != http.StatusConflict || code != "replayed" {
			t.Fatalf("the verdict whose call was under way: %d %s, want 409 replayed", st, code)
		}
	}
	checkEveryConsumeOnRecord(t, endpoint, configs)
	rep := auditOf(t, all, configs, []bool{true, true})
	if !rep.Clean || len(rep.OutcomeUnknown) != 1 || rep.OutcomeUnknown[0].VerdictID != call.jti ||
		len(rep.ConsumedNotStarted) != rounds*perRound {
		t.Fatalf("audit: %+v", rep)
	}
	if got := readCallLog(t, a.bankLog); len(got) != 0 {
		t.Errorf("a's bank saw %d calls; none of its verdicts ever started", len(got))
	}
	if got := metric(a.addr, `executor_consumed_without_start_total{found="restart"}`); got != perRound {
		t.Errorf("the last restart recorded %v verdicts consumed without start, want %d", got, perRound)
	}
	_ = db
}

// TestEtcdFrozenConsume: etcd is frozen (SIGSTOP) while an executor consumes a verdict, so the
// consume times out and is refused as nonce_store_unavailable. Whether etcd then applies the
// late transaction when it resumes or the executor's fence gets there first, the verdict ends
// consumed and never started: on record once, refused as consumed_not_started everywhere,
// never run, and the audit is clean.
func TestEtcdFrozenConsume(t *testing.T) {
	srv := etcdtest.NewServer(t)
	fleet := startEtcdFleet(t, srv.Endpoint, "1s")
	// Both expire at once, so they share a lease: the warm-up's lease is the one the frozen
	// consume reuses, and what times out is the consume's own transaction.
	exp := time.Now().Add(50 * time.Second).Unix()
	calls := fleet.signWith(t, 2, func(c *verdict.Claims) { c.Expiry = exp })
	warm, frozen := calls[0], calls[1]
	if st, code := present(fleet.clients[0], warm); st != http.StatusOK {
		t.Fatalf("warm-up: %d %s", st, code)
	}
	srv.Freeze()
	st, code := present(fleet.clients[0], frozen)
	srv.Thaw()
	if st != http.StatusServiceUnavailable || code != "nonce_store_unavailable" {
		t.Fatalf("with etcd frozen: %d %s, want 503 nonce_store_unavailable", st, code)
	}
	waitFor(t, "the unanswered consume to be settled", func() bool {
		for _, x := range recordsOf(t, fleet.configs[0]) {
			if x.VerdictID == frozen.jti && x.Reason == store.ReasonConsumedWithoutStart {
				return true
			}
		}
		return false
	})
	for _, cl := range fleet.clients {
		if st, code := present(cl, frozen); st != http.StatusConflict || code != "consumed_not_started" {
			t.Fatalf("after etcd resumed: %d %s, want 409 consumed_not_started", st, code)
		}
	}
	if arrived := fleet.calledOnce(t); len(arrived) != 1 || !arrived[warm.canonical] {
		t.Errorf("banks saw %v, want the warm-up alone", arrived)
	}
	checkEveryConsumeOnRecord(t, srv.Endpoint, fleet.configs)
	rep := auditOf(t, calls, fleet.configs, []bool{true, true, true})
	if !rep.Clean || rep.Pairs.ConsumedNotStarted != 1 || rep.Pairs.Paired != 1 {
		t.Fatalf("audit: %+v", rep)
	}
	v := consumedKeys(t, srv.Endpoint)[frozen.jti]
	how := "the executor's fence"
	if v["consumed_at"] != v["not_started_at"] {
		how = "etcd applying the late consume"
	}
	t.Logf("the unanswered consume was settled by %s: %v", how, v)
}

// TestEtcdLateConsume: an executor reaches etcd through a proxy that holds its requests and
// drops its cancellations, so its consume times out (503 nonce_store_unavailable) and etcd
// applies it afterwards, before anything else the executor sent meanwhile. The executor finds
// the key its own lost attempt created, records consumed_without_start, and every executor
// refuses the verdict as consumed_not_started; nothing ran, and the audit is clean.
func TestEtcdLateConsume(t *testing.T) {
	endpoint := etcdtest.Start(t)
	proxy := newHoldProxy(t, strings.TrimPrefix(endpoint, "http://"))
	fleet := startEtcdFleetOn(t, []string{proxy.Endpoint(), endpoint, endpoint}, "1s")
	exp := time.Now().Add(50 * time.Second).Unix()
	calls := fleet.signWith(t, 2, func(c *verdict.Claims) { c.Expiry = exp })
	warm, late := calls[0], calls[1]
	if st, code := present(fleet.clients[0], warm); st != http.StatusOK {
		t.Fatalf("warm-up: %d %s", st, code)
	}
	proxy.Hold()
	st, code := present(fleet.clients[0], late)
	proxy.Release()
	if st != http.StatusServiceUnavailable || code != "nonce_store_unavailable" {
		t.Fatalf("with the requests held: %d %s, want 503 nonce_store_unavailable", st, code)
	}
	waitFor(t, "the late consume to be settled", func() bool {
		for _, x := range recordsOf(t, fleet.configs[0]) {
			if x.VerdictID == late.jti && x.Reason == store.ReasonConsumedWithoutStart {
				return true
			}
		}
		return false
	})
	v := consumedKeys(t, endpoint)[late.jti]
	if v["attempt"] == nil || v["consumed_at"] == v["not_started_at"] || v["not_started_at"] == nil {
		t.Fatalf("the key was not created by the late consume and marked after: %v", v)
	}
	for _, cl := range fleet.clients {
		if st, code := present(cl, late); st != http.StatusConflict || code != "consumed_not_started" {
			t.Fatalf("after the late consume: %d %s, want 409 consumed_not_started", st, code)
		}
	}
	if arrived := fleet.calledOnce(t); len(arrived) != 1 || !arrived[warm.canonical] {
		t.Errorf("banks saw %v, want the warm-up alone", arrived)
	}
	checkEveryConsumeOnRecord(t, endpoint, fleet.configs)
	if rep := auditOf(t, calls, fleet.configs, []bool{true, true, true}); !rep.Clean || rep.Pairs.ConsumedNotStarted != 1 {
		t.Fatalf("audit: %+v", rep)
	}
}
