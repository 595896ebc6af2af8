package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/store"
)

// logSink is an HTTP sink in OPA's decision-log format. It can be taken down, and it reports
// every change it receives.
type logSink struct {
	mu     sync.Mutex
	down   bool
	events []shippedEvent
	posts  int
	update chan struct{}
}

type shippedEvent struct {
	ReqID      uint64 `json:"req_id"`
	DecisionID string `json:"decision_id"`
	Path       string `json:"path"`
	Result     struct {
		RecordID string `json:"record_id"`
		Decision string `json:"execution_decision"`
	} `json:"result"`
}

func (s *logSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		http.Error(w, "sink down", http.StatusServiceUnavailable)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var batch []shippedEvent
	if err := json.NewDecoder(zr).Decode(&batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.events = append(s.events, batch...)
	s.posts++
	s.mu.Unlock()
	select {
	case s.update <- struct{}{}:
	default:
	}
}

func (s *logSink) setDown(v bool) {
	s.mu.Lock()
	s.down = v
	s.mu.Unlock()
}

// TestShippingSurvivesOutageAndKill ships an executor's records to an HTTP sink while clients
// post verdicts, takes the sink down for a while, kills the executor with SIGKILL several
// times, and then checks that every record change of the executor's file reached the sink,
// the final state of every record included, with duplicates bounded by one batch per kill.
func TestShippingSurvivesOutageAndKill(t *testing.T) {
	const batch, kills = 20, 3
	sink := &logSink{update: make(chan struct{}, 1)}
	srv := httptest.NewServer(sink)
	defer srv.Close()

	c := newExecConfig(t, "--delay", "5ms")
	c.extra = map[string]any{"shipping": map[string]any{
		"batch_size": batch, "interval": "20ms",
		"sinks": []map[string]any{{"name": "pipeline", "http": map[string]any{"url": srv.URL + "/logs"}}},
	}}
	c.write(t)
	d := startExecutor(t, c)
	tsd := toolDigest(t, c.addr, "bank", "transfer")
	calls := make([]signedCall, 1500)
	for i := range calls {
		args := fmt.Appendf(nil, `{"amount":%d,"from_account":"1102534471","memo":"ship %d","to_account":"220-555-010"}`, 1+i%5, i)
		tok, jti := c.issuer.sign(t, tsd, args)
		digest, _ := canonical.DigestJSON(args)
		calls[i] = signedCall{token: tok, jti: jti, args: args, digest: digest}
	}
	got := &answers{m: map[string][]answer{}}
	stop := make(chan struct{})
	wg := load(c.addr, calls, 8, got, stop)
	waitAnswers := func(n int) {
		t.Helper()
		waitUnderLoad(t, fmt.Sprintf("%d answers", n), func() bool { return got.len() >= n }, func() { close(stop); wg.Wait() })
	}
	for k := range kills {
		waitAnswers(150 * (k + 1))
		if k == 1 {
			sink.setDown(true) // an outage across a kill and a restart
		}
		d.kill()
		d = startExecutor(t, c)
		if k == 2 {
			sink.setDown(false)
		}
	}
	waitAnswers(150 * (kills + 1))
	close(stop)
	wg.Wait()
	sink.setDown(false)

	// The file, once the executor has stopped, says how many record changes there are: read
	// it then, and start the executor again to ship what it had not. Reading the records over
	// the API while the executor runs would race the restart's own finishing of what the
	// kills left in flight: a change made after that read would never be waited for.
	d.stop(t)
	db, err := store.Open(filepath.Join(c.dataDir, executor.DBFile), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	last, err := db.Outbox().Last(context.Background())
	db.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d = startExecutor(t, c)
	unshipped := func() int {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		seen := map[uint64]bool{}
		for _, e := range sink.events {
			seen[e.ReqID] = true
		}
		n := 0
		for seq := uint64(1); seq <= last; seq++ {
			if !seen[seq] {
				n++
			}
		}
		return n
	}
	guard := time.After(2 * time.Minute) // a hang guard, not a measure
	for unshipped() > 0 {
		select {
		case <-sink.update:
		case <-guard:
			t.Fatalf("%d of %d record changes never reached the sink", unshipped(), last)
		}
	}

	// Every record as the executor holds it reached the sink in that state.
	want := map[string]string{}
	cl := newClient(c.addr, adminToken, 30*time.Second)
	r := cl.do(context.Background(), http.MethodGet, "/v1/executions", nil)
	if r.status != http.StatusOK {
		t.Fatalf("export: %d %s", r.status, r.body)
	}
	if err := store.ReadJSONL(bytes.NewReader(r.body), func(line []byte) error {
		var x struct {
			ID       string `json:"record_id"`
			Decision string `json:"execution_decision"`
		}
		err := json.Unmarshal(line, &x)
		want[x.ID] = x.Decision
		return err
	}); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	seen := map[string]bool{}
	bySeq := map[uint64]int{}
	for _, e := range sink.events {
		bySeq[e.ReqID]++
		if e.Path != "verdict/execution" || e.DecisionID != e.Result.RecordID {
			t.Fatalf("event envelope: %+v", e)
		}
		if want[e.Result.RecordID] == e.Result.Decision {
			seen[e.Result.RecordID] = true
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d of %d records never reached the sink in their final state", len(want)-len(seen), len(want))
	}
	dups := len(sink.events) - len(bySeq)
	t.Logf("%d records, %d changes, %d events in %d posts, %d duplicates", len(want), last, len(sink.events), sink.posts, dups)
	if dups > kills*batch {
		t.Errorf("%d duplicates; at most one batch (%d) per kill (%d) expected", dups, batch, kills)
	}
}
