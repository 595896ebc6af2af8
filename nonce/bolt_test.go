package nonce

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/verdict"
)

var t0 = time.Date(2026, 11, 30, 9, 12, 3, 0, time.UTC)

// clock is a settable time source.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock    { c := &clock{}; c.set(t); return c }
func (c *clock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

func openDB(t testing.TB, path string) *store.DB {
	t.Helper()
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(context.Background()); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Error(err)
		}
	})
	return db
}

// checkLen compares Len, the maintained count, with a count of the entries themselves.
func checkLen(t testing.TB, db *store.DB, n *Bolt, want int) {
	t.Helper()
	got, err := n.Len(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var keys int
	if err := db.View(context.Background(), func(tx *bolt.Tx) error {
		keys = tx.Bucket(bucketNonces).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got != want || keys != want {
		t.Fatalf("Len %d, entries %d; want %d", got, keys, want)
	}
}

func newTestBolt(t testing.TB, path string, c *clock) (*store.DB, *Bolt) {
	t.Helper()
	db := openDB(t, path)
	n, err := NewBolt(db, BoltOptions{Now: c.now, Skew: 5 * time.Second, GCBatch: 10})
	if err != nil {
		t.Fatal(err)
	}
	return db, n
}

func TestConsume(t *testing.T) {
	c := newClock(t0)
	db, n := newTestBolt(t, filepath.Join(t.TempDir(), "executor.db"), c)
	ctx := context.Background()
	exp := t0.Add(time.Minute)
	for _, tc := range []struct {
		name    string
		jti     string
		expires time.Time
		want    error
		reason  string
	}{
		{"first use", "jti_1", exp, nil, ""},
		{"replay", "jti_1", exp, ErrReplayed, ReasonReplayed},
		{"other jti", "jti_2", exp, nil, ""},
		{"sub-second expiry rounds to the same key", "jti_3", exp.Add(-time.Second + time.Nanosecond), nil, ""},
		{"replay of it", "jti_3", exp, ErrReplayed, ReasonReplayed},
		{"expired within skew", "jti_4", t0.Add(-4 * time.Second), nil, ""},
		{"expired past skew", "jti_5", t0.Add(-5 * time.Second), ErrExpired, ReasonExpired},
		{"empty jti", "", exp, ErrMalformed, ReasonMalformed},
		{"oversized jti", string(make([]byte, MaxJTIBytes+1)), exp, ErrMalformed, ReasonMalformed},
		{"no expiry", "jti_6", time.Time{}, ErrMalformed, ReasonMalformed},
	} {
		err := n.Consume(ctx, tc.jti, tc.expires)
		if tc.want == ErrReplayed && (!errors.Is(err, verdict.ErrReplayed) || verdict.ReasonOf(err) != verdict.Replayed) {
			t.Errorf("%s: %v is not the verifier's replayed refusal", tc.name, err)
		}
		if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) || Reason(err) != tc.reason {
			t.Errorf("%s: got %v (reason %q), want %v (reason %q)", tc.name, err, Reason(err), tc.want, tc.reason)
		}
	}
	checkLen(t, db, n, 4)
}

func TestConsumeConcurrentSameJTI(t *testing.T) {
	db, n := newTestBolt(t, filepath.Join(t.TempDir(), "executor.db"), newClock(t0))
	const workers = 200
	var (
		wg        sync.WaitGroup
		ok, dup   atomic.Int64
		start     = make(chan struct{})
		unexpects = make(chan error, workers)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			switch err := n.Consume(context.Background(), "jti_same", t0.Add(time.Minute)); {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrReplayed):
				dup.Add(1)
			default:
				unexpects <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(unexpects)
	for err := range unexpects {
		t.Error(err)
	}
	if ok.Load() != 1 || dup.Load() != workers-1 {
		t.Fatalf("%d successes and %d replays, want 1 and %d", ok.Load(), dup.Load(), workers-1)
	}
	checkLen(t, db, n, 1)
}

func TestConsumeConcurrentDistinct(t *testing.T) {
	db, n := newTestBolt(t, filepath.Join(t.TempDir(), "executor.db"), newClock(t0))
	const jtis, tries = 100, 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		success = map[string]int{}
		start   = make(chan struct{})
	)
	for i := range jtis * tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jti := fmt.Sprintf("jti_%03d", i%jtis)
			<-start
			err := n.Consume(context.Background(), jti, t0.Add(time.Minute))
			if err != nil && !errors.Is(err, ErrReplayed) {
				t.Error(err)
			}
			if err == nil {
				mu.Lock()
				success[jti]++
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(success) != jtis {
		t.Fatalf("%d jtis consumed, want %d", len(success), jtis)
	}
	for jti, k := range success {
		if k != 1 {
			t.Errorf("%s consumed %d times", jti, k)
		}
	}
	checkLen(t, db, n, jtis)
}

// A replay after the executor restarts is still refused.
func TestConsumeSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "executor.db")
	c := newClock(t0)
	db, n := newTestBolt(t, path, c)
	ctx := context.Background()
	if err := n.Consume(ctx, "jti_1", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Consume(ctx, "jti_2", t0.Add(time.Minute)); !errors.Is(err, ErrUnavailable) || Reason(err) != ReasonUnavailable {
		t.Fatalf("Consume after Close: %v", err)
	}
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}

	_, n = newTestBolt(t, path, c)
	if err := n.Consume(ctx, "jti_1", t0.Add(time.Minute)); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay after reopen: %v", err)
	}
}

// A closed file is unavailable, never a pass.
func TestConsumeFailsClosed(t *testing.T) {
	db, n := newTestBolt(t, filepath.Join(t.TempDir(), "executor.db"), newClock(t0))
	if err := db.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := n.Consume(context.Background(), "jti_1", t0.Add(time.Minute))
	var ue *UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, store.ErrClosed) || Reason(err) != ReasonUnavailable {
		t.Fatalf("Consume on a closed file: %v", err)
	}
	if _, err := n.Len(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Len on a closed file: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (&Bolt{db: openDB(t, filepath.Join(t.TempDir(), "x.db")), now: time.Now}).Consume(ctx, "j", t0); Reason(err) != ReasonUnavailable {
		t.Fatalf("Consume with an ended context: %v", err)
	}
}

func TestCollect(t *testing.T) {
	c := newClock(t0)
	db, n := newTestBolt(t, filepath.Join(t.TempDir(), "executor.db"), c)
	ctx := context.Background()
	// 35 entries expiring at t0+1s … t0+35s: more than three GC batches of 10.
	for i := 1; i <= 35; i++ {
		if err := n.Consume(ctx, fmt.Sprintf("jti_%02d", i), t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	// At t0+30s with 5s skew, entries with exp ≤ t0+25s go; exp t0+26s is still needed.
	c.set(t0.Add(30 * time.Second))
	deleted, err := n.Collect(ctx)
	if err != nil || deleted != 25 {
		t.Fatalf("Collect: %d, %v; want 25", deleted, err)
	}
	checkLen(t, db, n, 10)
	if err := n.Consume(ctx, "jti_26", t0.Add(26*time.Second)); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay of a kept entry: %v", err)
	}
	// The wall clock steps back after the collection: a collected jti is refused as expired,
	// not consumed a second time.
	c.set(t0)
	if err := n.Consume(ctx, "jti_10", t0.Add(10*time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("collected jti after the clock stepped back: %v", err)
	}
	if err := n.Consume(ctx, "jti_new", t0.Add(time.Minute)); err != nil {
		t.Fatalf("fresh jti after the clock stepped back: %v", err)
	}
	checkLen(t, db, n, 11)
}

func TestRunStopsWithContext(t *testing.T) {
	c := newClock(t0)
	db := openDB(t, filepath.Join(t.TempDir(), "executor.db"))
	n, err := NewBolt(db, BoltOptions{Now: c.now, GCInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Consume(context.Background(), "jti_1", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	c.add(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- n.Run(ctx) }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		got, err := n.Len(context.Background())
		if err == nil && got == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run never collected the expired entry: %d left (%v)", got, err)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

// The executor consumes the nonce and records the start in one commit. When that commit's
// function fails after the nonce was written, the nonce is not consumed.
func TestConsumeWithStartedRecord(t *testing.T) {
	db, n := newTestBolt(t, filepath.Join(t.TempDir(), "executor.db"), newClock(t0))
	ex := db.Executions()
	ctx := context.Background()
	run := func(x *api.ExecutionRecord) error {
		return db.Update(ctx, func(tx *bolt.Tx) error {
			if err := n.ConsumeTx(tx, x.VerdictID, t0.Add(time.Minute)); err != nil {
				return err
			}
			return ex.StartTx(tx, x)
		})
	}
	bad := &api.ExecutionRecord{VerdictID: "jti_1", StartedAt: t0} // no executor id: StartTx refuses
	if err := run(bad); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("invalid start: %v", err)
	}
	good := &api.ExecutionRecord{VerdictID: "jti_1", ExecutorID: "executor-bank", StartedAt: t0}
	if err := run(good); err != nil {
		t.Fatalf("start after a failed attempt: %v", err)
	}
	if err := run(&api.ExecutionRecord{VerdictID: "jti_1", ExecutorID: "executor-bank", StartedAt: t0}); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay: %v", err)
	}
	recs, err := ex.ByVerdict(ctx, "jti_1")
	if err != nil || len(recs) != 1 || recs[0].RecordID != good.RecordID || recs[0].Decision != api.ExecutionStarted {
		t.Fatalf("records of jti_1: %+v, %v", recs, err)
	}
	checkLen(t, db, n, 1)
}
