package etcdx

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/internal/testing/etcdtest"
)

// TestLeases: the writes of one bucket share one grant, made with the first write's TTL; a
// forgotten lease and a stale bucket are granted anew; a lease forgotten under an old id stays.
func TestLeases(t *testing.T) {
	ctx := context.Background()
	cli := testClient(t)
	l := NewLeases(cli, 5*time.Second, func(fresh, cached int) bool { return cached < fresh-1 })
	get := func(k int, ttl int64) clientv3.LeaseID {
		t.Helper()
		id, err := l.Get(ctx, k, ttl)
		if err != nil || id == 0 {
			t.Fatalf("lease of %d: %v %v", k, id, err)
		}
		return id
	}

	// Concurrent writes of one bucket wait for one grant.
	ids := make([]clientv3.LeaseID, 16)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() { ids[i] = get(1, 60) })
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("one bucket, several leases: %v", ids)
		}
	}
	resp, err := cli.TimeToLive(ctx, ids[0])
	if err != nil || resp.GrantedTTL != 60 {
		t.Fatalf("granted TTL: %+v %v", resp, err)
	}
	if get(1, 999) != ids[0] {
		t.Fatal("a granted lease was granted again")
	}
	if get(2, 60) == ids[0] {
		t.Fatal("two buckets share a lease")
	}

	tests := []struct {
		name    string
		do      func(id clientv3.LeaseID)
		regrant bool
	}{
		{"forgotten", func(id clientv3.LeaseID) { l.Forget(1, id) }, true},
		{"forgotten under another id", func(id clientv3.LeaseID) { l.Forget(1, id+1) }, false},
		{"stale", func(clientv3.LeaseID) { get(3, 60) }, true}, // bucket 3 makes bucket 1 stale
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l.Forget(1, get(1, 60)) // start from a fresh lease of bucket 1
			id := get(1, 60)
			tt.do(id)
			if again := get(1, 60); (again != id) != tt.regrant {
				t.Fatalf("lease after %s: %v, was %v", tt.name, again, id)
			}
		})
	}
}

// A failed grant is not kept: every write asks the cluster again, as the count of grants shows.
func TestLeasesFailedGrant(t *testing.T) {
	cli, err := Client(context.Background(), Conn{Endpoints: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	l := NewLeases[int](cli, 200*time.Millisecond, nil)
	var grants atomic.Int32
	l.grant = func(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
		grants.Add(1)
		return cli.Grant(ctx, ttl)
	}
	for i := range int32(3) {
		if _, err := l.Get(context.Background(), 1, 60); err == nil {
			t.Fatal("a grant with no cluster succeeded")
		}
		if n := grants.Load(); n != i+1 {
			t.Fatalf("%d writes made %d grants: a failed grant was reused", i+1, n)
		}
	}
}

// A write that hangs up while its grant is in flight leaves that grant to the writes waiting on
// it: the grant still answers, with the lease every one of them gets, and it is the only one.
func TestLeasesGrantOutlivesItsWriter(t *testing.T) {
	l := &Leases[int]{timeout: time.Minute, m: map[int]*lease{}}
	var grants atomic.Int32
	started, answer := make(chan struct{}), make(chan struct{})
	l.grant = func(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
		grants.Add(1)
		close(started)
		<-answer
		// The writer hung up before the cluster answered: a grant bound to its context
		// would fail here.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return &clientv3.LeaseGrantResponse{ID: 7, TTL: ttl}, nil
	}
	type got struct {
		id  clientv3.LeaseID
		err error
	}
	ctx, hangUp := context.WithCancel(context.Background())
	first, second := make(chan got, 1), make(chan got, 1)
	go func() { id, err := l.Get(ctx, 1, 60); first <- got{id, err} }()
	<-started
	hangUp()
	go func() { id, err := l.Get(context.Background(), 1, 60); second <- got{id, err} }()
	close(answer)
	for name, c := range map[string]chan got{"writer that hung up": first, "waiting writer": second} {
		if g := <-c; g.err != nil || g.id != 7 {
			t.Errorf("%s: lease %v, %v; want the grant's 7", name, g.id, g.err)
		}
	}
	if n := grants.Load(); n != 1 {
		t.Errorf("%d grants, want the one both writes share", n)
	}
}

// TestSpanLeases: the keys written within one span share a lease granted for their life and
// the span's width, rounded up to a second; the next span has its own.
func TestSpanLeases(t *testing.T) {
	ctx := context.Background()
	cli := testClient(t)
	l := NewSpanLeases(cli, 5*time.Second, 10*time.Second)
	at := func(now time.Time) (int64, clientv3.LeaseID) {
		t.Helper()
		span, id, err := l.At(ctx, now, 90*time.Second+time.Millisecond)
		if err != nil || id == 0 {
			t.Fatalf("lease at %v: %v %v", now, id, err)
		}
		return span, id
	}
	start := time.Unix(1000, 0)
	span, id := at(start)
	if span != 100 {
		t.Fatalf("span %d, want 100", span)
	}
	if s, same := at(start.Add(9 * time.Second)); s != span || same != id {
		t.Fatalf("one span, two leases: %d %v, %d %v", span, id, s, same)
	}
	if _, next := at(start.Add(10 * time.Second)); next == id {
		t.Fatal("two spans share a lease")
	}
	resp, err := cli.TimeToLive(ctx, id)
	if err != nil || resp.GrantedTTL != 101 {
		t.Fatalf("granted TTL: %+v %v, want 101", resp, err)
	}
}

// testClient is a client of a private etcd the test starts, closed with the test.
func testClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := Client(context.Background(), Conn{Endpoints: []string{etcdtest.Start(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
