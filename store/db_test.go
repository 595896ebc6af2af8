package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"
)

var bucketTest = []byte("test")

// openTest opens a fresh file in t.TempDir with a test bucket, closed at cleanup.
func openTest(t testing.TB) *DB {
	t.Helper()
	return openPath(t, filepath.Join(t.TempDir(), "verdict.db"))
}

func openPath(t testing.TB, path string) *DB {
	t.Helper()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(context.Background(), func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketTest)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			t.Error(err)
		}
	})
	return db
}

func put(key string) func(*bolt.Tx) error {
	return func(tx *bolt.Tx) error { return tx.Bucket(bucketTest).Put([]byte(key), []byte("v")) }
}

func keys(t testing.TB, db *DB) []string {
	t.Helper()
	var out []string
	err := db.View(context.Background(), func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTest).ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOpenSecondOpenerFailsClearly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verdict.db")
	openPath(t, path)
	_, err := Open(path, Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: got %v, want ErrLocked", err)
	}
}

func TestOpenRefusesOtherFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verdict.db")
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return b.Put(keyFormat, []byte("99"))
	}); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	for _, ro := range []bool{false, true} {
		if _, err := Open(path, Options{ReadOnly: ro}); !errors.Is(err, ErrFormat) {
			t.Errorf("Open(ReadOnly=%v): got %v, want ErrFormat", ro, err)
		}
	}
}

// A function that fails must have nothing committed, even what it wrote before failing, while
// the rest of its batch commits.
func TestUpdateFailingFunctionLeavesNoWrites(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	errBoom := errors.New("boom")
	const n = 200
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%03d", i)
			results[i] = db.Update(ctx, func(tx *bolt.Tx) error {
				if err := put(key)(tx); err != nil {
					return err
				}
				switch i % 3 {
				case 1:
					return errBoom // wrote, then failed
				case 2:
					if i%2 == 0 {
						panic("update panics after writing")
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	var want []string
	for i, err := range results {
		switch {
		case i%3 == 1 && !errors.Is(err, errBoom):
			t.Errorf("update %d: got %v, want its own error", i, err)
		case i%3 == 2 && i%2 == 0 && (err == nil || !strings.Contains(err.Error(), "panicked")):
			t.Errorf("update %d: got %v, want a panic error", i, err)
		case i%3 == 0 || (i%3 == 2 && i%2 == 1):
			if err != nil {
				t.Errorf("update %d: %v", i, err)
			}
			want = append(want, fmt.Sprintf("k%03d", i))
		}
	}
	sort.Strings(want)
	if got := keys(t, db); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("committed keys:\n got %v\nwant %v", got, want)
	}
}

func TestUpdateContext(t *testing.T) {
	db := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	err := db.Update(ctx, func(tx *bolt.Tx) error { ran = true; return nil })
	if !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("Update with canceled context: err %v, ran %v", err, ran)
	}
	if err := db.View(ctx, func(*bolt.Tx) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("View with canceled context: %v", err)
	}
}

// Close commits what was queued: every update acknowledged before Close is in the reopened
// file, and updates after Close fail with ErrClosed.
func TestCloseDrainsQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verdict.db")
	db := openPath(t, path)
	ctx := context.Background()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		acked []string
	)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%03d", i)
			err := db.Update(ctx, put(key))
			switch {
			case err == nil:
				mu.Lock()
				acked = append(acked, key)
				mu.Unlock()
			case !errors.Is(err, ErrClosed):
				t.Errorf("update %d: %v", i, err)
			}
		}()
	}
	time.Sleep(time.Millisecond) // let some updates queue; the outcome is checked either way
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := db.Update(ctx, put("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Update after Close: %v", err)
	}
	if err := db.Close(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	re := openPath(t, path)
	got := map[string]bool{}
	for _, k := range keys(t, re) {
		got[k] = true
	}
	for _, k := range acked {
		if !got[k] {
			t.Errorf("acknowledged key %s missing after reopen", k)
		}
	}
}

func TestReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verdict.db")
	db := openPath(t, path)
	ctx := context.Background()
	if err := db.Update(ctx, put("a")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(ctx)
	if got := keys(t, ro); len(got) != 1 || got[0] != "a" {
		t.Fatalf("read-only keys: %v", got)
	}
	if err := ro.Update(ctx, put("b")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Update on read-only DB: %v", err)
	}
}

func TestNewRecordID(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 12, 3, 114e6, time.UTC)
	seen := map[string]bool{}
	var prev string
	for i := range 1000 {
		id := NewRecordID("rec_", t0.Add(time.Duration(i)*time.Millisecond))
		if !strings.HasPrefix(id, "rec_") || len(id) != len("rec_")+26 {
			t.Fatalf("malformed id %q", id)
		}
		if strings.ContainsAny(id[4:], "ILOU") || strings.ToUpper(id[4:]) != id[4:] {
			t.Fatalf("id %q outside the Crockford alphabet", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		if id <= prev {
			t.Fatalf("id %q does not sort after %q", id, prev)
		}
		prev = id
	}
	// The time prefix is the ULID one: 2026-11-30T09:12:03.114Z.
	if got := NewRecordID("", t0)[:10]; got != "01M8NVKFSA" {
		t.Errorf("time prefix %s", got)
	}
}

// busyWriter holds the writer (a caller of Update, on its own goroutine) inside an update until
// the returned function is called.
func busyWriter(t *testing.T, db *DB) (release func(), result <-chan error) {
	t.Helper()
	entered, hold := make(chan struct{}), make(chan struct{})
	res := make(chan error, 1)
	go func() {
		res <- db.Update(context.Background(), func(tx *bolt.Tx) error {
			close(entered)
			<-hold
			return put("first")(tx)
		})
	}()
	<-entered
	return func() { close(hold) }, res
}

// waitQueued waits until n updates wait in the writer's queue, and fails the test if they do
// not within 20s.
func waitQueued(t *testing.T, db *DB, n int) {
	t.Helper()
	queued := func() int {
		db.mu.Lock()
		defer db.mu.Unlock()
		return len(db.queue)
	}
	for deadline := time.Now().Add(20 * time.Second); queued() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d updates queued, want %d", queued(), n)
		}
	}
}

// An update whose context ends while it waits in the queue never runs.
func TestUpdateCanceledWhileQueued(t *testing.T) {
	db := openTest(t)
	release, first := busyWriter(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Bool
	second := make(chan error, 1)
	go func() {
		second <- db.Update(ctx, func(tx *bolt.Tx) error { ran.Store(true); return put("second")(tx) })
	}()
	waitQueued(t, db, 1)
	cancel()
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; !errors.Is(err, context.Canceled) || ran.Load() {
		t.Fatalf("canceled update: err %v, ran %v", err, ran.Load())
	}
	if got := keys(t, db); len(got) != 1 || got[0] != "first" {
		t.Fatalf("keys %v", got)
	}
}

// Close with an ended context abandons what is queued (ErrClosed), finishes the commit under
// way, and still closes the file.
func TestCloseContextEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verdict.db")
	db := openPath(t, path)
	release, first := busyWriter(t, db)
	second := make(chan error, 1)
	go func() { second <- db.Update(context.Background(), put("second")) }()
	waitQueued(t, db, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	closed := make(chan error, 1)
	go func() { closed <- db.Close(ctx) }()
	<-db.abort // Close has given up on the queue
	release()
	if err := <-closed; !errors.Is(err, context.Canceled) {
		t.Fatalf("Close: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("update under way at Close: %v", err)
	}
	if err := <-second; !errors.Is(err, ErrClosed) {
		t.Fatalf("queued update at Close: %v", err)
	}
	if got := keys(t, openPath(t, path)); len(got) != 1 || got[0] != "first" {
		t.Fatalf("keys after reopen: %v", got)
	}
}

// TestRecordIDsIncrease: ids of one generator strictly increase, within one millisecond and
// when the clock steps back, and each later millisecond starts at its own time.
func TestRecordIDsIncrease(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 12, 3, 114e6, time.UTC)
	var g RecordIDs
	clock := []time.Time{t0, t0, t0, t0.Add(-time.Second), t0, t0.Add(time.Millisecond), t0.Add(time.Millisecond)}
	var prev string
	for i, now := range clock {
		id := g.Next("rec_", now)
		if id <= prev {
			t.Fatalf("id %d %q does not sort after %q", i, id, prev)
		}
		prev = id
	}
	if got, want := prev[4:14], NewRecordID("", t0.Add(time.Millisecond))[:10]; got != want {
		t.Errorf("time prefix %s, want %s", got, want)
	}
	// A tail of all ones carries into the time part: the next id still sorts after.
	for i := 6; i < 16; i++ {
		g.last[i] = 0xff
	}
	before := encodeULID("", g.last)
	if after := g.Next("", t0); after <= before {
		t.Fatalf("after a wrapped tail %q does not sort after %q", after, before)
	}
}

// TestRecordIDsIncreaseProperty: whatever the clock does (steps back, stands still, jumps), a
// generator's ids strictly increase and keep their form.
func TestRecordIDsIncreaseProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var g RecordIDs
		now := time.UnixMilli(rapid.Int64Range(0, 1<<46).Draw(t, "start"))
		var prev string
		for i, step := range rapid.SliceOfN(rapid.Int64Range(-5000, 5000), 1, 200).Draw(t, "steps") {
			now = now.Add(time.Duration(step) * time.Millisecond)
			if now.UnixMilli() < 0 {
				now = time.UnixMilli(0)
			}
			id := g.Next("rec_", now)
			if len(id) != len("rec_")+26 || id <= prev {
				t.Fatalf("id %d %q after %q", i, id, prev)
			}
			prev = id
		}
	})
}

// Updates queued while a commit is under way go together in the next one, made by the first of
// their callers: one commit for the lot, and every caller answered.
func TestUpdatesQueuedDuringACommitShareTheNext(t *testing.T) {
	db := openTest(t)
	before := db.Stats()
	release, first := busyWriter(t, db)
	const n = 50
	results := make(chan error, n)
	for i := range n {
		go func() { results <- db.Update(context.Background(), put(fmt.Sprintf("q%02d", i))) }()
	}
	waitQueued(t, db, n)
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if st := db.Stats(); st.Commits-before.Commits != 2 || st.Updates-before.Updates != n+1 {
		t.Fatalf("stats %+v after %+v, want 2 commits of %d updates", st, before, n+1)
	}
	if got := keys(t, db); len(got) != n+1 {
		t.Fatalf("%d keys, want %d", len(got), n+1)
	}
}
