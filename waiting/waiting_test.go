package waiting

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/etcdtest"
)

// testClock is a clock the test moves.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Unix(1_800_000_000, 0).UnixNano())
	return c
}

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// backend makes stores of one kind; replicas of one backend share their continuations.
type backend struct {
	name string
	// replica returns a store over the backend's shared state (memory: the one store).
	replica func(t *testing.T) Store
	// globalBytes: whether the store sums the bytes of all principals itself.
	globalBytes bool
}

func backends(t *testing.T, clock *testClock) []backend {
	t.Helper()
	// One memory store per subtest: its replicas are the one store.
	mem := map[string]Store{}
	var endpoint string
	return []backend{
		{name: "memory", globalBytes: true, replica: func(t *testing.T) Store {
			if mem[t.Name()] == nil {
				mem[t.Name()] = NewMemory(clock.now)
			}
			return mem[t.Name()]
		}},
		{name: "etcd", replica: func(sub *testing.T) Store {
			// One etcd for the whole test; a subtest's keys are under its own prefix.
			if endpoint == "" {
				endpoint = etcdtest.Start(t)
			}
			t := sub
			return newTestEtcd(t, EtcdOptions{Endpoints: []string{endpoint},
				Prefix: "/" + strings.ReplaceAll(t.Name(), "/", "_") + "/", Now: clock.now})
		}},
	}
}

// newTestEtcd is an etcd store with continuations of a minute, closed when t ends.
func newTestEtcd(t testing.TB, opts EtcdOptions) *Etcd {
	t.Helper()
	opts.TTL = time.Minute
	s, err := NewEtcd(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func entry(principal, nonce string, size int, expiry time.Time) Entry {
	return Entry{Nonce: nonce, Principal: principal, Data: []byte(strings.Repeat("x", size)), Expiry: expiry}
}

func TestStoreBounds(t *testing.T) {
	lim := Limits{MaxPending: 6, MaxBytes: 1000, PrincipalPending: 3, PrincipalBytes: 400}
	clock := newTestClock()
	all := backends(t, clock)
	for _, tc := range []struct {
		name string
		// puts run in order; the last one's error is checked.
		puts []Entry
		want error
		// memoryOnly: the bound is one the etcd store leaves to etcd's quota.
		memoryOnly bool
	}{
		{name: "fits", puts: []Entry{entry("a", "1", 100, never)}},
		{name: "larger than a principal's share", puts: []Entry{entry("a", "1", 401, never)}, want: ErrStateTooLarge},
		{name: "principal count", puts: []Entry{entry("a", "1", 1, never), entry("a", "2", 1, never), entry("a", "3", 1, never),
			entry("a", "4", 1, never)}, want: ErrBusyPrincipal},
		{name: "principal bytes", puts: []Entry{entry("a", "1", 300, never), entry("a", "2", 101, never)}, want: ErrBusyPrincipal},
		{name: "another principal is not held by a full one", puts: []Entry{entry("a", "1", 1, never), entry("a", "2", 1, never),
			entry("a", "3", 1, never), entry("b", "4", 1, never)}},
		{name: "global count", puts: []Entry{entry("a", "1", 1, never), entry("a", "2", 1, never), entry("a", "3", 1, never),
			entry("b", "4", 1, never), entry("b", "5", 1, never), entry("b", "6", 1, never), entry("c", "7", 1, never)}, want: ErrBusy},
		{name: "global bytes", memoryOnly: true, puts: []Entry{entry("a", "1", 400, never), entry("b", "2", 400, never),
			entry("c", "3", 201, never)}, want: ErrBusy},
	} {
		for _, b := range all {
			if tc.memoryOnly && !b.globalBytes {
				continue
			}
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				s := b.replica(t)
				ctx := context.Background()
				var err error
				for i, p := range tc.puts {
					if err = s.Put(ctx, p, lim); err != nil && i < len(tc.puts)-1 {
						t.Fatalf("put %d: %v", i, err)
					}
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("last put: %v, want %v", err, tc.want)
				}
			})
		}
	}
}

var never = time.Unix(1_900_000_000, 0)

// TestStoreTakeOnce: of many concurrent takes of one nonce, on several replicas, exactly one
// gets the continuation; a take by another principal gets nothing and leaves it in place.
func TestStoreTakeOnce(t *testing.T) {
	clock := newTestClock()
	lim := Limits{MaxPending: 100, MaxBytes: 1 << 20, PrincipalPending: 50, PrincipalBytes: 1 << 19}
	for _, b := range backends(t, clock) {
		t.Run(b.name, func(t *testing.T) {
			replicas := []Store{b.replica(t), b.replica(t), b.replica(t)}
			ctx := context.Background()
			const nonces = 10
			for i := range nonces {
				if err := replicas[0].Put(ctx, entry("a", fmt.Sprint("n", i), 10, never), lim); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := replicas[1].Take(ctx, "b", "n0"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("another principal's take: %v", err)
			}
			var won [nonces]atomic.Int32
			var wg sync.WaitGroup
			for r := range 8 {
				s := replicas[r%len(replicas)]
				wg.Go(func() {
					for i := range nonces {
						data, err := s.Take(ctx, "a", fmt.Sprint("n", i))
						switch {
						case err == nil && len(data) == 10:
							won[i].Add(1)
						case err != nil && !errors.Is(err, ErrNotFound):
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			for i := range nonces {
				if n := won[i].Load(); n != 1 {
					t.Errorf("nonce %d taken %d times", i, n)
				}
			}
			if u, err := replicas[2].Principal(ctx, "a"); err != nil || u.Count != 0 || u.Bytes != 0 {
				t.Errorf("after every take: %+v %v, want nothing held", u, err)
			}
		})
	}
}

// TestStoreExpiry: an expired continuation is never taken; in memory it also gives its
// principal's place back.
func TestStoreExpiry(t *testing.T) {
	lim := Limits{MaxPending: 100, MaxBytes: 1 << 20, PrincipalPending: 1, PrincipalBytes: 1 << 19}
	clock := newTestClock()
	for _, b := range backends(t, clock) {
		t.Run(b.name, func(t *testing.T) {
			s := b.replica(t)
			ctx := context.Background()
			exp := clock.now().Add(time.Minute)
			if err := s.Put(ctx, entry("a", "1", 10, exp), lim); err != nil {
				t.Fatal(err)
			}
			clock.advance(time.Minute)
			if _, err := s.Take(ctx, "a", "1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("expired take: %v", err)
			}
			if err := s.Put(ctx, entry("a", "2", 10, clock.now().Add(time.Minute)), lim); err != nil {
				t.Fatal(err)
			}
			if !b.globalBytes {
				return // etcd's lease, on etcd's clock, removes the keys
			}
			clock.advance(time.Minute)
			if err := s.Put(ctx, entry("a", "3", 10, clock.now().Add(time.Minute)), lim); err != nil {
				t.Fatalf("an expired continuation held the principal's place: %v", err)
			}
		})
	}
}

// TestStoreConcurrentPutsKeepTheShare: puts of one principal racing on several replicas never
// store more than its share.
func TestStoreConcurrentPutsKeepTheShare(t *testing.T) {
	lim := Limits{MaxPending: 1000, MaxBytes: 1 << 20, PrincipalPending: 4, PrincipalBytes: 1 << 19}
	clock := newTestClock()
	for _, b := range backends(t, clock) {
		t.Run(b.name, func(t *testing.T) {
			replicas := []Store{b.replica(t), b.replica(t)}
			var stored atomic.Int32
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Go(func() {
					err := replicas[i%2].Put(context.Background(), entry("a", fmt.Sprint("n", i), 10, never), lim)
					switch {
					case err == nil:
						stored.Add(1)
					case !errors.Is(err, ErrBusyPrincipal):
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if n := stored.Load(); n != 4 {
				t.Fatalf("%d stored, want the share of 4", n)
			}
		})
	}
}

// TestEtcdUnavailable: with etcd gone, every operation is state_unavailable, never a
// success or "nothing there".
func TestEtcdUnavailable(t *testing.T) {
	srv := etcdtest.NewServer(t)
	clock := newTestClock()
	s := newTestEtcd(t, EtcdOptions{Endpoints: []string{srv.Endpoint}, RequestTimeout: 500 * time.Millisecond, Now: clock.now})
	lim := Limits{MaxPending: 10, MaxBytes: 1 << 20, PrincipalPending: 4, PrincipalBytes: 1 << 19}
	ctx := context.Background()
	if err := s.Put(ctx, entry("a", "1", 10, never), lim); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	defer srv.Thaw()
	if err := s.Put(ctx, entry("a", "2", 10, never), lim); !errors.Is(err, ErrStateUnavailable) {
		t.Errorf("put: %v", err)
	}
	if _, err := s.Take(ctx, "a", "1"); !errors.Is(err, ErrStateUnavailable) {
		t.Errorf("take: %v", err)
	}
	if _, err := s.Principal(ctx, "a"); !errors.Is(err, ErrStateUnavailable) {
		t.Errorf("principal: %v", err)
	}
}

// TestEtcdForeignSizeFailsClosed: a size under a principal's index that this store did
// not write (a bad restore, another program under the prefix) counts as more than any share:
// the principal is refused rather than its continuations counted as free.
func TestEtcdForeignSizeFailsClosed(t *testing.T) {
	clock := newTestClock()
	s := newTestEtcd(t, EtcdOptions{Endpoints: []string{etcdtest.Start(t)}, Now: clock.now})
	lim := Limits{MaxPending: 100, MaxBytes: 1 << 20, PrincipalPending: 10, PrincipalBytes: 1 << 19}
	ctx := context.Background()
	for i, junk := range []string{"-1", "lots", "99999999999999999999999"} {
		if _, err := s.cli.Put(ctx, s.indexKey("a", fmt.Sprint("junk", i)), junk); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, entry("a", "1", 10, never), lim); !errors.Is(err, ErrBusyPrincipal) {
		t.Fatalf("put beside foreign sizes: %v, want busy_principal", err)
	}
	if err := s.Put(ctx, entry("b", "2", 10, never), lim); err != nil {
		t.Fatalf("another principal: %v", err)
	}
}

// TestNewEtcdRefuses: options that could never make a working store are refused when the store
// is made, before anything is stored.
func TestNewEtcdRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts EtcdOptions
		want string
	}{
		{"no ttl", EtcdOptions{Endpoints: []string{"http://127.0.0.1:2379"}}, "etcd: ttl 0s is not a positive duration"},
		{"negative ttl", EtcdOptions{Endpoints: []string{"http://127.0.0.1:2379"}, TTL: -time.Second}, "etcd: ttl -1s is not a positive duration"},
		{"no endpoints", EtcdOptions{TTL: time.Minute}, "etcd: at least one endpoint is required"},
		{"kind of one letter", EtcdOptions{Endpoints: []string{"http://127.0.0.1:2379"}, TTL: time.Minute, Kind: "e"}, `etcd: store kind "e": want two lower-case letters or more`},
		{"kind with a slash", EtcdOptions{Endpoints: []string{"http://127.0.0.1:2379"}, TTL: time.Minute, Kind: "relay/x"}, `etcd: store kind "relay/x": want two lower-case letters or more`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewEtcd(context.Background(), tc.opts)
			if err == nil {
				s.Close()
				t.Fatal("made a store")
			}
			if err.Error() != tc.want {
				t.Fatalf("NewEtcd: %q, want %q", err, tc.want)
			}
		})
	}
}

// TestEtcdKindsAreApart: two stores of different kinds on one cluster and prefix neither take
// nor count each other's continuations, while two of one kind share theirs.
func TestEtcdKindsAreApart(t *testing.T) {
	clock := newTestClock()
	endpoint := etcdtest.Start(t)
	open := func(kind string) *Etcd {
		return newTestEtcd(t, EtcdOptions{Endpoints: []string{endpoint}, Kind: kind, Now: clock.now})
	}
	calls, relays, relays2 := open(""), open("relay"), open("relay")
	lim := Limits{MaxPending: 4, MaxBytes: 1 << 20, PrincipalPending: 2, PrincipalBytes: 1 << 19}
	ctx := context.Background()
	exp := clock.now().Add(time.Minute)
	for i := range 2 {
		if err := calls.Put(ctx, entry("a", fmt.Sprint("c", i), 10, exp), lim); err != nil {
			t.Fatalf("continuation %d: %v", i, err)
		}
	}
	// The principal's share of continuations is full; its relayed questions have their own.
	if err := relays.Put(ctx, entry("a", "r", 10, exp), lim); err != nil {
		t.Fatalf("relayed question beside a full share of continuations: %v", err)
	}
	if u, err := relays2.Principal(ctx, "a"); err != nil || u.Count != 1 {
		t.Fatalf("relay store of another replica sees %+v, %v; want one", u, err)
	}
	if _, err := calls.Take(ctx, "a", "r"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the continuations' store took a relayed question: %v", err)
	}
	if _, err := relays2.Take(ctx, "a", "c0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the relay store took a continuation: %v", err)
	}
	if b, err := relays2.Take(ctx, "a", "r"); err != nil || len(b) != 10 {
		t.Fatalf("relayed question taken on the other replica: %q, %v", b, err)
	}
	if _, err := relays.Take(ctx, "a", "r"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("relayed question taken twice: %v", err)
	}
}

// limiters makes the limiters of each backend on clock; replicas of one backend share their
// buckets (memory: the one limiter).
func limiters(t *testing.T, clock *testClock, r Rate) []struct {
	name    string
	replica func() Limiter
} {
	t.Helper()
	mem := NewMemoryLimiter(r, clock.now)
	var endpoint string
	return []struct {
		name    string
		replica func() Limiter
	}{
		{"memory", func() Limiter { return mem }},
		{"etcd", func() Limiter {
			if endpoint == "" {
				endpoint = etcdtest.Start(t)
			}
			return newTestEtcd(t, EtcdOptions{Endpoints: []string{endpoint}, Now: clock.now}).Limiter(r)
		}},
	}
}

// TestLimiterBucket: a principal's bucket holds Burst tokens and refills one per interval,
// whichever replica its calls reach; another principal's bucket is its own.
func TestLimiterBucket(t *testing.T) {
	clock := newTestClock()
	for _, b := range limiters(t, clock, Rate{PerMinute: 30, Burst: 3}) {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			reps := []Limiter{b.replica(), b.replica()}
			for i := range 3 {
				if err := reps[i%2].Allow(ctx, "a"); err != nil {
					t.Fatalf("call %d of the burst: %v", i, err)
				}
			}
			for i, r := range reps {
				if err := r.Allow(ctx, "a"); !errors.Is(err, ErrRateLimited) {
					t.Fatalf("a call past the burst on replica %d: %v", i, err)
				}
			}
			if err := reps[1].Allow(ctx, "b"); err != nil {
				t.Fatalf("another principal: %v", err)
			}
			clock.advance(2 * time.Second) // 30 a minute: one token every 2s
			if err := reps[1].Allow(ctx, "a"); err != nil {
				t.Fatalf("after one refill: %v", err)
			}
			if err := reps[0].Allow(ctx, "a"); !errors.Is(err, ErrRateLimited) {
				t.Fatalf("a second token after one refill: %v", err)
			}
			clock.advance(time.Hour) // full again, not more
			for i := range 4 {
				err := reps[i%2].Allow(ctx, "a")
				if want := i < 3; (err == nil) != want {
					t.Fatalf("call %d after an hour: %v", i, err)
				}
			}
		})
	}
}

// TestLimiterConcurrentCallsSpendEachTokenOnce: calls racing on two replicas never take more
// tokens than the bucket holds.
func TestLimiterConcurrentCallsSpendEachTokenOnce(t *testing.T) {
	clock := newTestClock()
	const burst = 5
	for _, b := range limiters(t, clock, Rate{PerMinute: 1, Burst: burst}) {
		t.Run(b.name, func(t *testing.T) {
			reps := []Limiter{b.replica(), b.replica()}
			var allowed atomic.Int32
			var wg sync.WaitGroup
			for i := range 4 * burst {
				wg.Go(func() {
					switch err := reps[i%2].Allow(context.Background(), "a"); {
					case err == nil:
						allowed.Add(1)
					case !errors.Is(err, ErrRateLimited):
						t.Errorf("call %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			if n := allowed.Load(); n < 1 || n > burst {
				t.Fatalf("%d calls allowed of a bucket of %d", n, burst)
			}
		})
	}
}

// TestMemoryLimiterDropsFullBuckets: a bucket that has refilled is dropped, the same as a new
// one.
func TestMemoryLimiterDropsFullBuckets(t *testing.T) {
	clock := newTestClock()
	l := NewMemoryLimiter(Rate{PerMinute: 30, Burst: 3}, clock.now)
	for _, p := range []string{"a", "b"} {
		if err := l.Allow(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.Buckets(); n != 2 {
		t.Fatalf("%d buckets after two principals' calls", n)
	}
	clock.advance(2 * time.Second)
	if n := l.Buckets(); n != 0 {
		t.Fatalf("%d refilled buckets kept", n)
	}
}

// TestEtcdLimiterUnavailable: with etcd not answering, a call is refused state_unavailable,
// never let through; with etcd back the bucket is as it was.
func TestEtcdLimiterUnavailable(t *testing.T) {
	clock := newTestClock()
	srv := etcdtest.NewServer(t)
	l := newTestEtcd(t, EtcdOptions{Endpoints: []string{srv.Endpoint}, Now: clock.now,
		RequestTimeout: 300 * time.Millisecond}).Limiter(Rate{PerMinute: 1, Burst: 2})
	ctx := context.Background()
	if err := l.Allow(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	err := l.Allow(ctx, "a")
	srv.Thaw()
	if !errors.Is(err, ErrStateUnavailable) {
		t.Fatalf("etcd frozen: %v, want state_unavailable", err)
	}
	if err := l.Allow(ctx, "a"); err != nil {
		t.Fatalf("the second token, etcd back: %v", err)
	}
	if err := l.Allow(ctx, "a"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("a third token: %v", err)
	}
}

// BenchmarkEtcdLimiterAllow measures what the shared rate limit costs a gated call: one
// token taken from an etcd bucket (a read and a compare-and-set commit), on a local
// single-member etcd. Each iteration is another principal's first call, so none is refused.
func BenchmarkEtcdLimiterAllow(b *testing.B) {
	l := newTestEtcd(b, EtcdOptions{Endpoints: []string{etcdtest.Start(b)}}).Limiter(Rate{PerMinute: 30, Burst: 10})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := l.Allow(ctx, strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryLimiterAllow is the same token taken from the replica's own bucket, of a
// thousand principals in turn (past their burst, the answer is a refusal at the same cost).
func BenchmarkMemoryLimiterAllow(b *testing.B) {
	l := NewMemoryLimiter(Rate{PerMinute: 30, Burst: 10}, time.Now)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if err := l.Allow(ctx, strconv.Itoa(i%1000)); err != nil && !errors.Is(err, ErrRateLimited) {
			b.Fatal(err)
		}
	}
}
