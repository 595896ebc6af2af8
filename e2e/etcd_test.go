package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/verdict"
)

// etcdFleet is three executor processes, each with its own records file and bank, sharing one
// issuer and one etcd nonce store.
type etcdFleet struct {
	configs []*execConfig
	clients []*client
	issuer  *issuer
	tsd     string
}

// startEtcdFleet starts three executors sharing the etcd at endpoint. requestTimeout bounds each
// nonce consume: short where a test wants etcd's absence noticed at once, long where the
// property under test is exactly-once and a loaded machine must not turn into refusals.
func startEtcdFleet(t *testing.T, endpoint, requestTimeout string) *etcdFleet {
	t.Helper()
	return startEtcdFleetOn(t, []string{endpoint, endpoint, endpoint}, requestTimeout)
}

// startEtcdFleetOn is startEtcdFleet with one executor per endpoint, each reaching the same
// etcd its own way (directly, or through a proxy).
func startEtcdFleetOn(t *testing.T, endpoints []string, requestTimeout string) *etcdFleet {
	t.Helper()
	f := &etcdFleet{}
	for i, endpoint := range endpoints {
		c := newExecConfig(t)
		if i == 0 {
			f.issuer = c.issuer
		}
		c.issuer = f.issuer
		c.extra = map[string]any{
			"nonce_store": map[string]any{
				"kind": "etcd", "endpoints": []string{endpoint}, "prefix": "/e2e/",
				"request_timeout": requestTimeout,
			},
		}
		c.write(t)
		startExecutor(t, c)
		f.configs = append(f.configs, c)
		f.clients = append(f.clients, newClient(c.addr, callerToken, 30*time.Second))
	}
	f.tsd = toolDigest(t, f.configs[0].addr, "bank", "transfer")
	return f
}

// issued is a verdict signed for the fleet, with the decision record that issued it.
type issued struct {
	signedCall
	canonical string // args as the executor sends them upstream
	decision  map[string]any
}

// sign signs n verdicts for distinct transfers, each with its own decision record id.
func (f *etcdFleet) sign(t *testing.T, n int) []issued {
	t.Helper()
	return f.signWith(t, n, func(*verdict.Claims) {})
}

// signWith is sign with each verdict's claims adjusted by adjust before signing.
func (f *etcdFleet) signWith(t *testing.T, n int, adjust func(*verdict.Claims)) []issued {
	t.Helper()
	out := make([]issued, n)
	for i := range out {
		args := fmt.Appendf(nil, `{"from_account":"1102534471","to_account":"110-222-333","amount":%d}`, 1000+i)
		digest, err := canonical.DigestJSON(args)
		if err != nil {
			t.Fatal(err)
		}
		// What reaches the bank is the canonical form.
		canon, err := canonical.Transform(args)
		if err != nil {
			t.Fatal(err)
		}
		c := f.issuer.claims(t, f.tsd, digest)
		c.Record = fmt.Sprintf("rec_etcd_%04d", i)
		adjust(&c)
		tok, err := verdict.Sign(f.issuer.signer, c)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = issued{
			signedCall: signedCall{token: tok, jti: c.ID, args: args, digest: digest},
			canonical:  string(canon),
			decision: map[string]any{
				"schema_version": "1", "record_id": c.Record, "action_key": c.ActionKey, "phase": c.Phase,
				"principal": c.Subject, "server": c.Server, "tool": c.Tool, "outcome": "verdict_issued",
				"verdict_id": c.ID, "arguments_digest": digest,
				"timestamp": time.Unix(c.IssuedAt, 0).UTC().Format(time.RFC3339Nano),
			},
		}
	}
	return out
}

// audit pairs the fleet's three record sets, read from the live executors, with the decision
// records of calls, and returns the report.
func (f *etcdFleet) audit(t *testing.T, calls []issued) *audit.Report {
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
	decisions, err := audit.ParseSource(path, audit.SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var executions []audit.Source
	for _, c := range f.configs {
		src, err := audit.ParseSource("http://"+c.addr, audit.SourceOptions{Token: adminToken})
		if err != nil {
			t.Fatal(err)
		}
		executions = append(executions, src)
	}
	rep, err := audit.Run(context.Background(), []audit.Source{decisions}, executions, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clean {
		f.auditCommand(t, path)
	}
	return rep
}

// auditCommand runs `verdictd audit` over the same sources and requires a clean report (exit
// 0).
func (f *etcdFleet) auditCommand(t *testing.T, decisions string) {
	t.Helper()
	args := []string{"audit", "--json", "--token", adminToken, "--decisions", decisions}
	for _, c := range f.configs {
		args = append(args, "--executions", "http://"+c.addr)
	}
	out, err := exec.Command(bins["verdictd"], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("verdictd audit: %v\n%s", err, out)
	}
	var rep struct{ Clean bool }
	if err := json.Unmarshal(out, &rep); err != nil || !rep.Clean {
		t.Fatalf("verdictd audit report (%v):\n%s", err, out)
	}
}

// calledOnce checks the three banks' call logs: no transfer arrived twice, and returns the
// arguments that arrived.
func (f *etcdFleet) calledOnce(t *testing.T) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range f.configs {
		for _, l := range readCallLog(t, c.bankLog) {
			if l.Tool != "transfer" {
				continue
			}
			if seen[l.Arguments] {
				t.Errorf("transfer %s reached a bank twice", l.Arguments)
			}
			seen[l.Arguments] = true
		}
	}
	return seen
}

// TestEtcdSharedNonces: three executor processes share one etcd. 100 verdicts, each submitted
// 20 times at once spread over the three, run exactly 100 times: 1,900 submissions are refused
// as replayed, each bank call is distinct, and the audit over the three record sets is clean.
func TestEtcdSharedNonces(t *testing.T) {
	fleet := startEtcdFleet(t, etcdtest.Start(t), "10s")
	calls := fleet.sign(t, 100)
	const copies = 20
	type answerOf struct {
		status int
		code   string
	}
	got := make([][]answerOf, len(calls))
	for i := range got {
		got[i] = make([]answerOf, copies)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i, c := range calls {
		// The copies of one verdict are released together, so they race each other across
		// the executors.
		release := make(chan struct{})
		for k := range copies {
			wg.Go(func() {
				<-release
				sem <- struct{}{}
				defer func() { <-sem }()
				r := fleet.clients[(i+k)%3].do(context.Background(), http.MethodPost, "/v1/execute", executeBody(c.token, c.args))
				got[i][k] = answerOf{r.status, r.errorCode()}
			})
		}
		close(release)
	}
	wg.Wait()
	executed, replayed := 0, 0
	for i, answers := range got {
		ok := 0
		for _, a := range answers {
			switch {
			case a.status == http.StatusOK:
				ok++
			case a.status == http.StatusConflict && a.code == "replayed":
				replayed++
			default:
				t.Errorf("verdict %d: answer %d %q", i, a.status, a.code)
			}
		}
		if ok != 1 {
			t.Errorf("verdict %d executed %d times", i, ok)
		}
		executed += ok
	}
	if executed != 100 || replayed != 1900 {
		t.Fatalf("executed %d, replayed %d; want 100 and 1,900", executed, replayed)
	}
	if n := len(fleet.calledOnce(t)); n != 100 {
		t.Fatalf("banks saw %d distinct transfers, want 100", n)
	}
	rep := fleet.audit(t, calls)
	if !rep.Clean {
		t.Fatalf("audit not clean: %+v", rep.Anomalies)
	}
	if n := rep.Executions.ByDecision["executed"]; n != 100 {
		t.Errorf("audit counts %d executed", n)
	}
	if n := rep.Executions.RefusalsByReason["replayed"]; n != 1900 {
		t.Errorf("audit counts %d replayed refusals", n)
	}
	if rep.Pairs.Paired != 100 || rep.Pairs.Unpaired != 0 {
		t.Errorf("audit pairs %+v", rep.Pairs)
	}
}

// TestEtcdStoppedMidRun: etcd is killed under load and brought back. While it is down the
// executors refuse with nonce_store_unavailable (503) and call nothing; after it returns, every
// verdict is resubmitted to every executor, and still nothing ran twice: a verdict that never
// met an outage ran exactly once, and the audit is clean.
func TestEtcdStoppedMidRun(t *testing.T) {
	srv := etcdtest.NewServer(t)
	fleet := startEtcdFleet(t, srv.Endpoint, "500ms")
	calls := fleet.sign(t, 300)

	var (
		mu          sync.Mutex
		outage      = map[string]bool{} // verdicts refused as unavailable at least once
		answered    atomic.Int64
		unavailable atomic.Int64
		unexpected  []string
		next        atomic.Int64
		stop        = make(chan struct{})
		wg          sync.WaitGroup
	)
	for w := range 12 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Each verdict is sent twice in a row, to different executors, so replays race
				// fresh calls throughout.
				n := next.Add(1) - 1
				c := calls[(n/2)%int64(len(calls))]
				r := fleet.clients[(int(n)+w)%3].do(context.Background(), http.MethodPost, "/v1/execute", executeBody(c.token, c.args))
				answered.Add(1)
				switch code := r.errorCode(); {
				case r.status == http.StatusOK, r.status == http.StatusConflict && code == "replayed":
				case r.status == http.StatusConflict && code == "consumed_not_started":
					// A consume given up on during the outage, settled since.
					mu.Lock()
					if !outage[c.jti] {
						unexpected = append(unexpected, fmt.Sprintf("%s: consumed_not_started without meeting the outage", c.jti))
					}
					mu.Unlock()
				case r.status == http.StatusServiceUnavailable && code == "nonce_store_unavailable":
					unavailable.Add(1)
					mu.Lock()
					outage[c.jti] = true
					mu.Unlock()
				default:
					mu.Lock()
					unexpected = append(unexpected, fmt.Sprintf("%d %q %v", r.status, code, r.err))
					mu.Unlock()
				}
			}
		})
	}
	giveUp := func() { close(stop); wg.Wait() }
	waitUnderLoad(t, "50 answers before the outage", func() bool { return answered.Load() >= 50 }, giveUp)
	srv.Kill()
	waitUnderLoad(t, "30 refusals during the outage", func() bool { return unavailable.Load() >= 30 }, giveUp)
	srv.Restart()
	after := answered.Load()
	waitUnderLoad(t, "100 answers after etcd returned", func() bool { return answered.Load() >= after+100 }, giveUp)
	close(stop)
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatalf("unexpected answers: %v", unexpected)
	}

	// Every verdict once more to every executor: etcd is back, so 200 or 409 — once each
	// executor's client has reconnected, which the first attempts may still be waiting for.
	for _, c := range calls {
		for _, cl := range fleet.clients {
			var r response
			for range 20 {
				r = cl.do(context.Background(), http.MethodPost, "/v1/execute", executeBody(c.token, c.args))
				if r.status != http.StatusServiceUnavailable {
					break
				}
				unavailable.Add(1)
				outage[c.jti] = true
			}
			if r.status != http.StatusOK && r.status != http.StatusConflict {
				t.Fatalf("after the outage: %d %s", r.status, r.body)
			}
		}
	}

	// Once every executor has settled the consumes it gave up on, a verdict that met the
	// outage and never ran was consumed and never started — by a transaction that committed
	// after its timeout, or by the executor's fence — and says so on every executor.
	fleet.waitSettled(t)
	arrived := fleet.calledOnce(t)
	for _, c := range calls {
		if arrived[c.canonical] {
			continue
		}
		if !outage[c.jti] {
			t.Errorf("verdict %s never met the outage yet never ran", c.jti)
			continue
		}
		for _, cl := range fleet.clients {
			r := cl.do(context.Background(), http.MethodPost, "/v1/execute", executeBody(c.token, c.args))
			if r.status != http.StatusConflict || r.errorCode() != "consumed_not_started" {
				t.Errorf("verdict %s, refused during the outage and never run: %d %s", c.jti, r.status, r.body)
			}
		}
	}
	rep := fleet.audit(t, calls)
	if !rep.Clean {
		t.Fatalf("audit not clean: %+v", rep.Anomalies)
	}
	if n := rep.Executions.ByDecision["executed"]; n != len(arrived) {
		t.Errorf("audit counts %d executed, banks saw %d transfers", n, len(arrived))
	}
	if n := rep.Executions.RefusalsByReason["nonce_store_unavailable"]; int64(n) != unavailable.Load() {
		t.Errorf("audit counts %d nonce_store_unavailable refusals, clients saw %d", n, unavailable.Load())
	}
	t.Logf("%d answers, %d refused while etcd was down (%d verdicts), %d verdicts ran", answered.Load(), unavailable.Load(), len(outage), len(arrived))
}

// waitUnderLoad polls cond for up to a minute while a load runs; on giving up it stops the load
// with giveUp (so no goroutine outlives the test) and fails t.
func waitUnderLoad(t *testing.T, what string, cond func() bool, giveUp func()) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			giveUp()
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor polls cond until it holds, failing t after a minute: it waits on what the daemons
// say (a file, a record, a metric), never on time passing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metric returns the value of one series on an executor's /metrics, or -1.
func metric(addr, series string) float64 {
	r := newClient(addr, "", 10*time.Second).do(context.Background(), http.MethodGet, "/metrics", nil)
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if ok && name == series {
			v, err := strconv.ParseFloat(val, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// waitSettled waits until every executor of the fleet has settled the consumes it gave up on.
func (f *etcdFleet) waitSettled(t *testing.T) {
	t.Helper()
	for _, c := range f.configs {
		waitFor(t, "executor "+c.addr+" to settle its unanswered consumes", func() bool {
			return metric(c.addr, "executor_nonce_unsettled") == 0
		})
	}
}
