package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/store"
)

// crashKills is how many times the crash tests kill a daemon under load.
const crashKills = 5

// signedCall is a verdict signed by the test and the exact call it authorizes.
type signedCall struct {
	token  string
	jti    string
	args   []byte
	digest string
}

// answer is what a client was told: status 0 means no answer (the executor was down or died
// mid-request).
type answer struct {
	status int
	code   string // the error code of a refusal
}

// answers collects what clients were told, per verdict id.
type answers struct {
	mu sync.Mutex
	m  map[string][]answer
}

func (a *answers) add(jti string, r response) {
	an := answer{status: r.status}
	if r.status >= 400 {
		an.code = r.errorCode()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.m[jti] = append(a.m[jti], an)
}

func (a *answers) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}

// load submits verdicts from workers goroutines until stop is closed: mostly fresh ones, and a
// quarter of the time one already submitted recently, which races a replay against a call that
// may still be in flight.
func load(addr string, calls []signedCall, workers int, got *answers, stop <-chan struct{}) *sync.WaitGroup {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
	)
	pick := func(rng *rand.Rand) *signedCall {
		mu.Lock()
		defer mu.Unlock()
		if next > 0 && (next == len(calls) || rng.IntN(4) == 0) {
			lo := max(0, next-32)
			return &calls[lo+rng.IntN(next-lo)]
		}
		next++
		return &calls[next-1]
	}
	c := newClient(addr, callerToken, 30*time.Second)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-stop:
					return
				default:
				}
				sc := pick(rng)
				r := c.do(context.Background(), http.MethodPost, "/v1/execute", executeBody(sc.token, sc.args))
				got.add(sc.jti, r)
				if r.status == 0 {
					// The executor is down: wait for the restart rather than spin.
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	return &wg
}

// TestExecutorCrash kills an executor process with SIGKILL at random moments while clients post
// verdicts (a quarter of them duplicates) and the bank's transfers are slow enough for kills to
// land mid-call, restarts it each time, and then checks the executor's file, the nonce store and
// the bank's own call log against each other.
func TestExecutorCrash(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("waits for orphaned MCP servers through /proc")
	}
	c := newExecConfig(t, "--delay", "15ms")
	c.write(t)
	d := startExecutor(t, c)
	tsd := toolDigest(t, c.addr, "bank", "transfer")

	calls := make([]signedCall, 4000)
	byDigest := map[string]int{}
	for i := range calls {
		args := fmt.Appendf(nil, `{"amount":%d,"from_account":"1102534471","memo":"crash %d","to_account":"220-555-010"}`, 1+i%7, i)
		tok, jti := c.issuer.sign(t, tsd, args)
		digest, _ := canonical.DigestJSON(args)
		calls[i] = signedCall{token: tok, jti: jti, args: args, digest: digest}
		byDigest[digest] = i
	}

	got := &answers{m: map[string][]answer{}}
	stop := make(chan struct{})
	wg := load(c.addr, calls, 16, got, stop)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for kill := range crashKills {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		d.kill()
		t.Logf("kill %d: %d verdicts answered so far", kill+1, got.len())
		if kill < crashKills-1 {
			d = startExecutor(t, c)
		}
	}
	close(stop)
	wg.Wait()

	// The last restart recovers what the last kill left in flight, before it accepts requests.
	d = startExecutor(t, c)
	if n := countStarted(t, c.addr); n != 0 {
		t.Errorf("after the last restart %d records are still started", n)
	}
	// Every verdict whose submission got no answer is submitted again: it runs now only if no
	// earlier attempt consumed it.
	cl := newClient(c.addr, callerToken, 30*time.Second)
	for i := range calls {
		sc := &calls[i]
		if slices.Contains(got.m[sc.jti], answer{}) {
			got.add(sc.jti, cl.do(context.Background(), http.MethodPost, "/v1/execute", executeBody(sc.token, sc.args)))
		}
	}
	d.stop(t)
	waitForOrphans(t, c.dir)

	recs, nonces := readExecutorFile(t, filepath.Join(c.dataDir, executor.DBFile))
	checkExecutionInvariants(t, calls, byDigest, recs, nonces, got, readCallLog(t, c.bankLog))
}

// countStarted reads the execution records through the admin export and counts those still
// started.
func countStarted(t *testing.T, addr string) int {
	t.Helper()
	cl := newClient(addr, adminToken, 30*time.Second)
	r := cl.do(context.Background(), http.MethodGet, "/v1/executions", nil)
	if r.status != http.StatusOK {
		t.Fatalf("export: %d %v %s", r.status, r.err, r.body)
	}
	n := 0
	err := store.ReadJSONL(bytes.NewReader(r.body), func(line []byte) error {
		var x struct {
			Decision string `json:"execution_decision"`
		}
		if err := json.Unmarshal(line, &x); err != nil {
			return err
		}
		if x.Decision == string(api.ExecutionStarted) {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readExecutorFile opens the executor's bbolt file read-only after the executor stopped, checks
// bbolt's own consistency, and returns every execution record and every consumed nonce.
func readExecutorFile(t tb, path string) ([]*api.ExecutionRecord, map[string]bool) {
	t.Helper()
	db, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("the executor's file does not open cleanly: %v", err)
	}
	defer db.Close(context.Background())
	ctx := context.Background()
	nonces := map[string]bool{}
	err = db.View(ctx, func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		b := tx.Bucket([]byte("nonces"))
		if b == nil {
			return fmt.Errorf("no nonces bucket")
		}
		n := 0
		err := b.ForEach(func(k, _ []byte) error {
			if len(k) <= 8 {
				return fmt.Errorf("nonce key %x has no jti", k)
			}
			nonces[string(k[8:])] = true // exp (8 bytes) ‖ jti, see nonce/bolt.go
			n++
			return nil
		})
		if uint64(n) != b.Sequence() {
			t.Errorf("nonce count %d, bucket sequence %d", n, b.Sequence())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*api.ExecutionRecord
	if err := db.Executions().Since(ctx, time.Time{}, func(x *api.ExecutionRecord) error {
		recs = append(recs, x)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs, nonces
}

// checkExecutionInvariants checks what the executor recorded against its nonce store, against
// what its clients were told and against what reached the tool.
func checkExecutionInvariants(t *testing.T, calls []signedCall, byDigest map[string]int, recs []*api.ExecutionRecord,
	nonces map[string]bool, got *answers, calllog []callLogLine) {
	t.Helper()
	attempts := map[string]*api.ExecutionRecord{} // verdict id → its one non-refusal record
	decisions := map[string]int{}
	for _, x := range recs {
		decisions[string(x.Decision)+"/"+x.Reason]++
		switch x.Decision {
		case api.ExecutionStarted:
			t.Errorf("record %s of verdict %s is still started", x.RecordID, x.VerdictID)
		case api.ExecutionNotExecuted:
			// shutting_down: a request that reached the executor after a graceful stop began
			// (refused before verification, so it has no verdict id and nothing ran).
			if x.Reason != "replayed" && x.Reason != "catalog_unavailable" && x.Reason != "shutting_down" {
				t.Errorf("valid verdict %s refused with %q", x.VerdictID, x.Reason)
			}
			continue
		}
		if prev, dup := attempts[x.VerdictID]; dup {
			t.Errorf("verdict %s has two execution records: %s (%s) and %s (%s)", x.VerdictID, prev.RecordID, prev.Decision, x.RecordID, x.Decision)
		}
		attempts[x.VerdictID] = x
		if !nonces[x.VerdictID] {
			t.Errorf("verdict %s was %s but its nonce is not consumed", x.VerdictID, x.Decision)
		}
	}
	for jti := range nonces {
		if attempts[jti] == nil {
			t.Errorf("nonce %s is consumed but no execution record claims it", jti)
		}
	}
	for _, x := range recs {
		if x.Decision == api.ExecutionNotExecuted && x.Reason == "replayed" && attempts[x.VerdictID] == nil {
			t.Errorf("verdict %s refused as replayed but never consumed", x.VerdictID)
		}
	}

	// What clients were told agrees with the records.
	statuses := map[string]int{}
	for jti, st := range got.m {
		answered := 0
		for _, a := range st {
			s := a.status
			statuses[fmt.Sprint(s, a.code)]++
			want := api.ExecutionDecision("")
			switch s {
			case 0:
				continue
			case http.StatusConflict:
				if attempts[jti] == nil {
					t.Errorf("verdict %s answered 409 but never consumed", jti)
				}
				continue
			case http.StatusServiceUnavailable:
				// A restarted executor listens before its first tools/list has answered;
				// see TestExecuteBeforeCatalogListed. The refusal consumes nothing.
				if a.code != "catalog_unavailable" && a.code != "shutting_down" {
					t.Errorf("verdict %s refused: %s", jti, a.code)
				}
				continue
			case http.StatusOK:
				want = api.ExecutionExecuted
			case http.StatusBadGateway:
				want = api.ExecutionFailed
			case http.StatusGatewayTimeout:
				want = api.ExecutionOutcomeUnknown
			default:
				t.Errorf("verdict %s answered %d", jti, s)
				continue
			}
			answered++
			if x := attempts[jti]; x == nil || x.Decision != want {
				t.Errorf("verdict %s answered %d but recorded as %v", jti, s, x)
			}
		}
		if answered > 1 {
			t.Errorf("verdict %s was answered as run %d times: %v", jti, answered, st)
		}
	}

	// The tool saw each call at most once, only for a verdict recorded as run, and every
	// executed call.
	seen := map[string]int{}
	for _, l := range calllog {
		digest, err := canonical.DigestJSON([]byte(l.Arguments))
		if err != nil {
			t.Errorf("call log arguments %q: %v", l.Arguments, err)
			continue
		}
		i, ok := byDigest[digest]
		if !ok {
			t.Errorf("the bank received arguments no verdict signed: %s", l.Arguments)
			continue
		}
		jti := calls[i].jti
		seen[jti]++
		if seen[jti] == 2 {
			t.Errorf("the bank received verdict %s's call twice", jti)
		}
		if x := attempts[jti]; x == nil || !x.Decision.Final() || x.Decision == api.ExecutionNotExecuted {
			t.Errorf("the bank received verdict %s's call, recorded as %v", jti, x)
		}
	}
	for jti, x := range attempts {
		if x.Decision == api.ExecutionExecuted && seen[jti] != 1 {
			t.Errorf("verdict %s executed but the bank logged it %d times", jti, seen[jti])
		}
	}

	keys := make([]string, 0, len(decisions))
	for k := range decisions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	summary := ""
	for _, k := range keys {
		summary += fmt.Sprintf(" %s=%d", k, decisions[k])
	}
	t.Logf("%d records:%s; %d nonces; %d calls reached the bank; client statuses %v", len(recs), summary, len(nonces), len(calllog), statuses)
	if decisions["outcome_unknown/"+store.ReasonCrashedInFlight] == 0 {
		t.Logf("no kill landed mid-call this run")
	}
}
