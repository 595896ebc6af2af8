package waiting

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/etcdx"
)

// ErrRateLimited: the principal's token bucket is empty.
var ErrRateLimited = errors.New(api.ReasonRateLimited)

// Rate is a token bucket: Burst tokens, refilled at PerMinute a minute. Both are positive.
type Rate struct {
	PerMinute, Burst int
}

// interval is the time one token takes to refill.
func (r Rate) interval() time.Duration { return time.Minute / time.Duration(r.PerMinute) }

// Limiter keeps one token bucket per principal. Each kind of backend (memory, etcd) implements
// it; implementations are safe for concurrent use.
type Limiter interface {
	// Allow takes one token of principal's bucket: nil, ErrRateLimited when it is empty, or
	// ErrStateUnavailable when the limiter cannot tell (a call is then refused, never let
	// through unlimited).
	Allow(ctx context.Context, principal string) error
}

// maxBuckets bounds the principals whose bucket is not full at once in a [MemoryLimiter]. Only
// a principal that spent a token within the last Burst/PerMinute minutes has such a bucket; past
// the bound, a new principal is refused rather than the memory grown.
const maxBuckets = 100000

// MemoryLimiter keeps the buckets in this process: with N replicas, each has its own, and a
// principal whose calls are spread over them gets up to N times the rate.
type MemoryLimiter struct {
	every time.Duration
	burst int
	now   func() time.Time

	mu sync.Mutex
	// tat is each principal's theoretical arrival time (see EtcdLimiter). A bucket that has
	// refilled is the same as a new one, so it is dropped: the map holds only principals that
	// spent tokens recently.
	tat map[string]time.Time
}

var _ Limiter = (*MemoryLimiter)(nil)

// NewMemoryLimiter returns a limiter of r on the clock now.
func NewMemoryLimiter(r Rate, now func() time.Time) *MemoryLimiter {
	return &MemoryLimiter{every: r.interval(), burst: r.Burst, now: now, tat: map[string]time.Time{}}
}

// Allow takes one token of principal's bucket, or reports ErrRateLimited.
func (l *MemoryLimiter) Allow(_ context.Context, principal string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	tat, ok := l.tat[principal]
	if !ok && len(l.tat) >= maxBuckets {
		l.sweep(now)
		if len(l.tat) >= maxBuckets {
			return ErrRateLimited
		}
	}
	next, ok := take(tat, now, l.every, l.burst)
	if !ok {
		return ErrRateLimited
	}
	l.tat[principal] = next
	return nil
}

// Buckets reports how many buckets are not full, sweeping those that have refilled.
func (l *MemoryLimiter) Buckets() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(l.now())
	return len(l.tat)
}

// sweep drops the buckets that have refilled by now. The caller holds mu.
func (l *MemoryLimiter) sweep(now time.Time) {
	for p, tat := range l.tat {
		if !tat.After(now) {
			delete(l.tat, p)
		}
	}
}

// take is the token bucket as a generic cell rate algorithm: a bucket is one time, its
// theoretical arrival time tat, which each token taken moves one interval later; the bucket
// is empty when tat is more than burst-1 intervals ahead of now, and full when tat is not
// ahead at all. It returns the bucket's tat after one token is taken at now, or false when
// it is empty.
func take(tat, now time.Time, every time.Duration, burst int) (time.Time, bool) {
	if !tat.After(now) {
		tat = now
	}
	if tat.Sub(now) > every*time.Duration(burst-1) {
		return tat, false
	}
	return tat.Add(every), true
}

// EtcdLimiter keeps the buckets in the etcd cluster of an [Etcd] store, shared by every replica
// of the deployment: a principal gets the configured rate once, however its calls are spread.
//
// A bucket is one key, Prefix + "mcpgate/b/<sha256(principal)>", holding its theoretical
// arrival time (unix ns, decimal; see take). Allow reads it, and writes the time one token later
// by a compare and set on the revision it read (or on the key's absence), retried while other
// replicas take tokens of the same bucket meanwhile: a token is spent once across replicas. A
// refusal writes nothing. The key's lease outlives the time the bucket takes to refill (Burst
// intervals, plus a lease bucket's width), so etcd holds a key only for principals that spent
// tokens recently.
//
// Precision: exact across replicas, up to the skew of their clocks (each decides with its own
// now): a replica whose clock is ahead by d refills a bucket up to d × rate tokens early. Cost:
// two round trips per call allowed (the read and the commit; the lease is shared by the writes
// of one lease bucket), one per call refused.
type EtcdLimiter struct {
	s      *Etcd
	every  time.Duration
	burst  int
	leases *etcdx.SpanLeases
}

var _ Limiter = (*EtcdLimiter)(nil)

// Limiter returns a limiter of r on s's cluster, prefix and clock. It is closed with s.
func (s *Etcd) Limiter(r Rate) *EtcdLimiter {
	return &EtcdLimiter{s: s, every: r.interval(), burst: r.Burst,
		leases: etcdx.NewSpanLeases(s.cli, s.timeout, max(r.interval(), time.Second))}
}

// Allow takes one token of principal's bucket in etcd: ErrRateLimited when it is empty (or
// when its key kept changing for maxPutAttempts commits: only the principal's own concurrent
// calls change it), ErrStateUnavailable when etcd does not answer within request_timeout.
func (l *EtcdLimiter) Allow(ctx context.Context, principal string) error {
	if l.s.closed.Load() {
		return unavailable("rate", errStoreClosed)
	}
	key := l.s.keys + "b/" + hashHex(principal)
	for range maxPutAttempts {
		tctx, cancel := context.WithTimeout(ctx, l.s.timeout)
		resp, err := l.s.cli.Get(tctx, key)
		cancel()
		if err != nil {
			return unavailable("read bucket", err)
		}
		now := l.s.now()
		var tat time.Time
		unchanged := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if len(resp.Kvs) > 0 {
			kv := resp.Kvs[0]
			ns, err := strconv.ParseInt(string(kv.Value), 10, 64)
			if err != nil {
				// Not a time this limiter wrote: an empty bucket rather than a full one.
				return fmt.Errorf("%w: bucket %q holds %q", ErrRateLimited, key, kv.Value)
			}
			tat = time.Unix(0, ns)
			unchanged = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
		}
		next, ok := take(tat, now, l.every, l.burst)
		if !ok {
			return ErrRateLimited
		}
		// The key is of no use once next has passed (the bucket is full again), which is at
		// most burst intervals after now.
		bucket, lease, err := l.leases.At(ctx, now, l.every*time.Duration(l.burst))
		if err != nil {
			return unavailable("grant lease", err)
		}
		tctx, cancel = context.WithTimeout(ctx, l.s.timeout)
		tresp, err := l.s.cli.Txn(tctx).If(unchanged).
			Then(clientv3.OpPut(key, strconv.FormatInt(next.UnixNano(), 10), clientv3.WithLease(lease))).Commit()
		cancel()
		if err != nil {
			l.leases.Forget(bucket, lease)
			return unavailable("take token", err)
		}
		if tresp.Succeeded {
			return nil
		}
	}
	return ErrRateLimited
}
