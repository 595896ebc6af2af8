package console

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
)

// clock is a test clock: time moves only when the test moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestSessionLifetime(t *testing.T) {
	tests := []struct {
		name  string
		steps []time.Duration // uses, each after this long
		alive bool
	}{
		{"fresh", []time.Duration{0}, true},
		{"used within the idle timeout, up to the ttl", []time.Duration{20 * time.Minute, 20 * time.Minute, 19 * time.Minute}, true},
		{"idle too long", []time.Duration{30 * time.Minute}, false},
		{"past the ttl however used", []time.Duration{25 * time.Minute, 25 * time.Minute, 25 * time.Minute}, false},
	}
	for _, b := range storeBackends(t) {
		for _, tc := range tests {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				c := newClock()
				ss := b.sessions(t, c.Now, time.Hour, 30*time.Minute, 10)
				id, _ := mustCreate(t, ss, session{Subject: "iss#id1"})
				var err error
				for _, d := range tc.steps {
					c.Add(d)
					if _, err = ss.get(context.Background(), id); err != nil {
						break
					}
				}
				if alive := err == nil; alive != tc.alive {
					t.Errorf("alive %v, want %v (%v)", alive, tc.alive, err)
				}
				if !tc.alive && !errors.Is(err, errNoSession) {
					t.Errorf("ended with %v, want errNoSession", err)
				}
			})
		}
	}
}

// TestSessionsBoundedAndEnded: the session made first, and used last, is the one a full store
// ends, by either rule (memory: the closest to its end; etcd: the oldest sign-in).
func TestSessionsBoundedAndEnded(t *testing.T) {
	for _, b := range storeBackends(t) {
		t.Run(b.name, func(t *testing.T) { testSessionsBoundedAndEnded(t, b) })
	}
}

func testSessionsBoundedAndEnded(t *testing.T, backend storeBackend) {
	ctx := context.Background()
	c := newClock()
	ss := backend.sessions(t, c.Now, time.Hour, 30*time.Minute, 2)
	a, sa := mustCreate(t, ss, session{Subject: "a"})
	c.Add(time.Minute)
	b, _ := mustCreate(t, ss, session{Subject: "b"})
	c.Add(time.Minute)
	if _, err := ss.get(ctx, b); err != nil { // b is used: a is now the closest to its end
		t.Fatal(err)
	}
	x, _ := mustCreate(t, ss, session{Subject: "c"})
	if err := ss.store.ready(ctx); err != nil { // counts, for etcd
		t.Fatal(err)
	}
	if n := ss.store.len(); n != 2 {
		t.Errorf("%d sessions held, want 2", n)
	}
	if _, err := ss.get(ctx, a); !errors.Is(err, errNoSession) {
		t.Errorf("the session closest to its end was kept: %v", err)
	}
	for _, id := range []string{b, x} {
		if _, err := ss.get(ctx, id); err != nil {
			t.Errorf("a newer session was evicted: %v", err)
		}
	}
	if err := ss.end(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.get(ctx, b); !errors.Is(err, errNoSession) {
		t.Errorf("an ended session lives on: %v", err)
	}
	if sa.CSRF == "" || len(a) < 50 {
		t.Errorf("weak session: id %d chars, csrf %q", len(a), sa.CSRF)
	}
	for _, id := range []string{"", "nonsense", sa.CSRF} {
		if _, err := ss.get(ctx, id); !errors.Is(err, errNoSession) {
			t.Errorf("get(%q) = %v", id, err)
		}
	}
}

// storeBackend makes sessions over one kind of store.
type storeBackend struct {
	name     string
	sessions func(t *testing.T, now func() time.Time, ttl, idle time.Duration, max int) *sessions
}

// storeBackends are memory and etcd; the etcd one runs one etcd for t, each subtest under a
// prefix of its own.
func storeBackends(t *testing.T) []storeBackend {
	var endpoint string
	return []storeBackend{
		{"memory", func(t *testing.T, now func() time.Time, ttl, idle time.Duration, max int) *sessions {
			return newSessions(newMemoryStore(now, ttl, idle), now, ttl, idle, max)
		}},
		{"etcd", func(sub *testing.T, now func() time.Time, ttl, idle time.Duration, max int) *sessions {
			if endpoint == "" {
				endpoint = etcdtest.Start(t)
			}
			st, err := newEtcdStore(context.Background(), etcdStoreOptions{Conn: etcdx.Conn{Endpoints: []string{endpoint}},
				Prefix: "/" + strings.ReplaceAll(sub.Name(), "/", "_") + "/", TTL: ttl, Now: now})
			if err != nil {
				sub.Fatal(err)
			}
			sub.Cleanup(func() { st.close() })
			return newSessions(st, now, ttl, idle, max)
		}},
	}
}

func mustCreate(t *testing.T, ss *sessions, s session) (string, session) {
	t.Helper()
	id, s, err := ss.create(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return id, s
}

// TestEndAll: signing out everywhere ends every session of the principal, more than one
// transaction's worth of them on etcd, and no one else's.
func TestEndAll(t *testing.T) {
	ctx := context.Background()
	for _, b := range storeBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			c := newClock()
			ss := b.sessions(t, c.Now, time.Hour, 30*time.Minute, 1000)
			const n = maxEndAllOps + 7 // three batches of etcd's
			var mine []string
			for range n {
				id, _ := mustCreate(t, ss, session{Subject: "iss#id1"})
				mine = append(mine, id)
			}
			theirs, _ := mustCreate(t, ss, session{Subject: "iss#id2"})
			ended, err := ss.endAll(ctx, "iss#id1")
			if err != nil || ended != n {
				t.Fatalf("endAll: %d, %v; want %d", ended, err, n)
			}
			for _, id := range mine {
				if _, err := ss.get(ctx, id); !errors.Is(err, errNoSession) {
					t.Fatalf("a session lives on after sign-out everywhere: %v", err)
				}
			}
			if _, err := ss.get(ctx, theirs); err != nil {
				t.Errorf("another principal's session ended: %v", err)
			}
			if ended, err := ss.endAll(ctx, "iss#id1"); err != nil || ended != 0 {
				t.Errorf("endAll again: %d, %v", ended, err)
			}
		})
	}
}
