package ship

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/store"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

func openDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "v.db"), store.Options{Outbox: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

func decide(t *testing.T, db *store.DB, n int) []string {
	return decideFrom(t, db, 0, n)
}

func decideFrom(t *testing.T, db *store.DB, from, n int) []string {
	t.Helper()
	var ids []string
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("rec_%04d", i)
		at := t0.Add(time.Duration(i) * time.Millisecond)
		rec := fmt.Appendf(nil, `{"record_id":%q,"outcome":"verdict_issued","timestamp":%q,"call_arguments":{"to_account":"110-222-333"}}`,
			id, at.Format(time.RFC3339Nano))
		meta := store.DecisionMeta{RecordID: id, ActionKey: "k", Outcome: "verdict_issued", Time: at}
		if err := db.Decisions().Append(context.Background(), meta, rec); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// collector is an HTTP sink: it decodes every delivery, refuses the first `fail` of them, and
// reports each accepted event.
type collector struct {
	mu     sync.Mutex
	fail   int
	events chan map[string]any
	format string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	refuse := c.fail > 0
	if refuse {
		c.fail--
	}
	c.mu.Unlock()
	if refuse {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("Authorization") != "Bearer s3cret" {
		http.Error(w, "bad headers", http.StatusBadRequest)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var events []map[string]any
	switch c.format {
	case FormatJSONL:
		sc := bufio.NewScanner(zr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			events = append(events, map[string]any{"result": m})
		}
	default:
		if err := json.NewDecoder(zr).Decode(&events); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	for _, e := range events {
		c.events <- e
	}
}

func tokenFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func start(t *testing.T, cfg Config, db *store.DB, reg prometheus.Registerer) *Shipper {
	t.Helper()
	s, err := New(cfg, db.Outbox(), Options{Registerer: reg, Namespace: "verdictd",
		Labels: Labels{App: "verdictd", ID: "test", Version: "dev"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func receive(t *testing.T, events <-chan map[string]any, n int) []map[string]any {
	t.Helper()
	var got []map[string]any
	deadline := time.After(time.Minute) // a guard against a hang, not a measure
	for len(got) < n {
		select {
		case e := <-events:
			got = append(got, e)
		case <-deadline:
			t.Fatalf("received %d of %d events", len(got), n)
		}
	}
	return got
}

// A sink that is down for a while gets every record once it is back, as OPA events, masked,
// and the failures are counted.
func TestHTTPSinkOutage(t *testing.T) {
	for _, format := range []string{FormatOPA, FormatJSONL} {
		t.Run(format, func(t *testing.T) {
			db := openDB(t)
			c := &collector{fail: 3, events: make(chan map[string]any, 1000), format: format}
			srv := httptest.NewServer(c)
			defer srv.Close()
			reg := prometheus.NewRegistry()
			ids := decide(t, db, 25)
			cfg := Config{BatchSize: 10, Interval: confx.Duration(5 * time.Millisecond),
				Sinks: []SinkConfig{{Name: "pipe", HTTP: &HTTPSink{URL: srv.URL, Format: format, TokenFile: tokenFile(t)}}}}
			s := start(t, cfg, db, reg)
			got := receive(t, c.events, len(ids))
			for i, e := range got {
				res := e["result"].(map[string]any)
				if res["record_id"] != ids[i] {
					t.Fatalf("event %d is %v, want %s", i, res["record_id"], ids[i])
				}
				if args := res["call_arguments"].(map[string]any); args["to_account"] != "***" {
					t.Errorf("event %d: argument shipped unmasked: %v", i, args)
				}
				if format == FormatOPA && (e["decision_id"] != ids[i] || e["path"] != "verdict/decision" || e["timestamp"] == nil) {
					t.Errorf("event %d envelope: %v", i, e)
				}
			}
			if f := value(s.failed.WithLabelValues("pipe")); f != 3 {
				t.Errorf("failures = %v, want 3", f)
			}
			// A record committed later is shipped when the shipper is told.
			decideFrom(t, db, 25, 1)
			s.Notify()
			if e := receive(t, c.events, 1); e[0]["result"].(map[string]any)["record_id"] != "rec_0025" {
				t.Errorf("late record: %v", e[0])
			}
		})
	}
}

// A sink lagging more than max_lag loses the oldest records, counted.
func TestMaxLagDrops(t *testing.T) {
	db := openDB(t)
	c := &collector{events: make(chan map[string]any, 1000)}
	srv := httptest.NewServer(c)
	defer srv.Close()
	decide(t, db, 30)
	cfg := Config{MaxLag: 10, Interval: confx.Duration(5 * time.Millisecond),
		Sinks: []SinkConfig{{Name: "pipe", HTTP: &HTTPSink{URL: srv.URL, TokenFile: tokenFile(t)}}}}
	s := start(t, cfg, db, nil)
	got := receive(t, c.events, 10)
	if id := got[0]["decision_id"]; id != "rec_0020" {
		t.Errorf("first shipped record %v, want rec_0020", id)
	}
	if d := value(s.dropped.WithLabelValues("pipe")); d != 20 {
		t.Errorf("dropped = %v, want 20", d)
	}
}

// The file sink appends JSONL and rotates by size, keeping max_files old files.
func TestFileSinkRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "records.jsonl")
	fs := newFileSink(&FileSink{Path: path, MaxBytes: 100, MaxFiles: 2})
	for i := range 5 {
		rec := Record{JSON: fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 80))}
		if err := fs.Send(context.Background(), []Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"records.jsonl": `"n":4`, "records.jsonl.1": `"n":3`, "records.jsonl.2": `"n":1`}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(want) {
		t.Fatalf("files: %v", entries)
	}
	for name, has := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !strings.Contains(string(b), has) {
			t.Errorf("%s = %q, %v; want it to hold %s", name, b, err, has)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"no sink":       {Config{}, "shipping.sinks: shipping needs at least one sink"},
		"both":          {Config{Sinks: []SinkConfig{{Name: "a", HTTP: &HTTPSink{URL: "http://x"}, File: &FileSink{Path: "/x"}}}}, "exactly one of http and file"},
		"neither":       {Config{Sinks: []SinkConfig{{Name: "a"}}}, "exactly one of http and file"},
		"bad url":       {Config{Sinks: []SinkConfig{{Name: "a", HTTP: &HTTPSink{URL: "ftp://x"}}}}, "shipping.sinks[0].http.url"},
		"bad format":    {Config{Sinks: []SinkConfig{{Name: "a", HTTP: &HTTPSink{URL: "http://x", Format: "xml"}}}}, `format "xml"`},
		"relative path": {Config{Sinks: []SinkConfig{{Name: "a", File: &FileSink{Path: "x.jsonl"}}}}, "must be absolute"},
		"twice":         {Config{Sinks: []SinkConfig{{Name: "a", File: &FileSink{Path: "/a"}}, {Name: "a", File: &FileSink{Path: "/b"}}}}, "used twice"},
		"bad name":      {Config{Sinks: []SinkConfig{{Name: "A B", File: &FileSink{Path: "/a"}}}}, "sink name"},
		"batch":         {Config{BatchSize: MaxBatchSize + 1, Sinks: []SinkConfig{{Name: "a", File: &FileSink{Path: "/a"}}}}, "batch_size"},
	} {
		t.Run(name, func(t *testing.T) {
			errs := tc.cfg.Validate("shipping")
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Errorf("errors %q, want one containing %q", msgs, tc.want)
			}
		})
	}
	ok := Config{Sinks: []SinkConfig{{Name: "a", File: &FileSink{Path: "/a"}}}}
	if errs := ok.Validate("shipping"); len(errs) > 0 {
		t.Errorf("valid config refused: %v", errs)
	}
}

var _ = io.Discard

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
