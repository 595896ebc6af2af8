package etcdx

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Leases shares etcd leases among the writes that can use one: every key written in one time
// bucket is attached to the same lease, so a write costs no grant of its own. The first write of
// a bucket grants its lease; the writes that come meanwhile wait for that grant. A grant that
// failed is not kept, and a lease forgotten after a failed write is never handed out again:
// the next write grants anew.
//
// K names a bucket. Each owner's buckets are its own business: the executors' nonces bucket by
// expiry, verdictd's state by TTL and write time.
type Leases[K comparable] struct {
	timeout time.Duration
	stale   func(fresh, cached K) bool
	// grant asks the cluster for a lease: cli.Grant, held as a field so that the package's tests
	// can count the grants a sequence of writes makes, rather than time them.
	grant func(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error)

	mu sync.Mutex
	m  map[K]*lease
}

// lease is the lease of one bucket; ready is closed when its grant has answered.
type lease struct {
	ready chan struct{}
	id    clientv3.LeaseID
	err   error
}

// NewLeases returns an empty cache granting on cli, each grant bounded by timeout. When a
// bucket is first used, every cached bucket for which stale(fresh, cached) holds is dropped:
// its writes are over, and the cache stays as small as the buckets in use.
func NewLeases[K comparable](cli *clientv3.Client, timeout time.Duration, stale func(fresh, cached K) bool) *Leases[K] {
	return &Leases[K]{timeout: timeout, stale: stale, grant: cli.Grant, m: map[K]*lease{}}
}

// Get returns the lease of bucket k, granting it with a TTL of ttl seconds if no write of k
// has. ttl is the caller's to choose so that the lease outlives every write of the bucket
// whenever the grant reaches the cluster; it is ignored when the lease is already granted.
func (l *Leases[K]) Get(ctx context.Context, k K, ttl int64) (clientv3.LeaseID, error) {
	l.mu.Lock()
	if le, ok := l.m[k]; ok {
		l.mu.Unlock()
		select {
		case <-le.ready:
			return le.id, le.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	le := &lease{ready: make(chan struct{})}
	l.m[k] = le
	if l.stale != nil {
		for old := range l.m {
			if old != k && l.stale(k, old) {
				delete(l.m, old)
			}
		}
	}
	l.mu.Unlock()
	// Other writes wait on this grant: a caller that hangs up must not fail them.
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	resp, err := l.grant(gctx, ttl)
	cancel()
	if err == nil {
		le.id = resp.ID
	} else {
		le.err = err
		l.mu.Lock()
		if l.m[k] == le {
			delete(l.m, k)
		}
		l.mu.Unlock()
	}
	close(le.ready)
	return le.id, le.err
}

// Forget drops the lease of k if it is still id: a write attached to it failed, and a lease
// that might be gone (revoked, or lost with the cluster's data) is never reused.
func (l *Leases[K]) Forget(k K, id clientv3.LeaseID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	le, ok := l.m[k]
	if !ok {
		return
	}
	select {
	case <-le.ready:
		if le.id == id {
			delete(l.m, k)
		}
	default:
	}
}

// SpanLeases are [Leases] by span of time: the keys written within one span of a fixed width
// share a lease, and a span's lease leaves the cache once a later span is in use.
type SpanLeases struct {
	*Leases[int64]
	width time.Duration
}

// NewSpanLeases returns an empty cache of leases by spans of width, granting on cli, each
// grant bounded by timeout.
func NewSpanLeases(cli *clientv3.Client, timeout, width time.Duration) *SpanLeases {
	return &SpanLeases{NewLeases(cli, timeout, func(fresh, cached int64) bool { return cached < fresh }), width}
}

// At returns the lease of the keys written at now for a life of ttl, and the span it belongs
// to (for Forget). It is granted for ttl and the span's width, in whole seconds rounded up, so
// that it outlives every key of its span.
func (l *SpanLeases) At(ctx context.Context, now time.Time, ttl time.Duration) (int64, clientv3.LeaseID, error) {
	span := now.UnixNano() / int64(l.width)
	id, err := l.Get(ctx, span, int64((ttl+l.width+time.Second-1)/time.Second))
	return span, id, err
}
