package nonce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/internal/etcdx"
)

// Defaults of the etcd backend. The connection defaults are the ones every etcd store of the
// deployment shares.
const (
	DefaultEtcdPrefix         = etcdx.DefaultPrefix
	DefaultEtcdDialTimeout    = etcdx.DefaultDialTimeout
	DefaultEtcdRequestTimeout = etcdx.DefaultRequestTimeout
	DefaultEtcdLeaseBucket    = 10 * time.Second
	DefaultEtcdLeaseMargin    = 30 * time.Second
)

// EtcdOptions configure the etcd backend. Endpoints is required; the rest have defaults.
type EtcdOptions struct {
	// Endpoints are the cluster's client URLs (http://host:port, or https:// with TLS).
	Endpoints []string
	// Prefix is the deployment's key prefix; every executor that must refuse the others'
	// replays uses the same one. Empty means DefaultEtcdPrefix. Keys are Prefix + "nonce/" + jti.
	Prefix string
	// TLS, when set, secures the connection (and authenticates the client with a certificate
	// when CertFile and KeyFile are given).
	TLS *EtcdTLS
	// Username and Password authenticate with etcd's own auth; both or neither.
	Username, Password string
	// DialTimeout bounds fetching an auth token at NewEtcd. Zero means DefaultEtcdDialTimeout.
	// Connections are made lazily: NewEtcd succeeds with every endpoint down, and Consume
	// refuses until one answers.
	DialTimeout time.Duration
	// RequestTimeout bounds each Consume and Len, lease grant included. An etcd that does not
	// answer within it is unavailable. Zero means DefaultEtcdRequestTimeout.
	RequestTimeout time.Duration
	// Skew is the clock skew the executor's verifier allows past exp; a key lives at least
	// until exp + Skew. Zero means 5s.
	Skew time.Duration
	// LeaseBucket is the width of the expiry buckets that share one lease: every jti whose exp
	// falls in one bucket is attached to the same lease, granted by the first Consume that
	// needs it, so a Consume is one transaction rather than a grant and a transaction. A key
	// may then live up to one bucket longer than it must. Zero means DefaultEtcdLeaseBucket.
	LeaseBucket time.Duration
	// LeaseMargin is added to every lease's TTL. It covers what the lease's own clock cannot:
	// executors whose wall clocks disagree (one that is behind accepts a verdict for longer
	// than the one that granted the lease expects) and a local clock stepped backwards. Keep
	// the executors' clocks within it of each other. Zero means DefaultEtcdLeaseMargin.
	LeaseMargin time.Duration
	// Owner is written into each consumed key's value (with the time), for an operator
	// reading the store; typically the executor id.
	Owner string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Validate checks the endpoints without connecting or reading files. Every endpoint is an
// http:// or https:// URL with a host and nothing else, all with the same scheme: the etcd
// client picks the transport security of the first endpoint for all of them, so a mix would
// send some requests in clear. TLS options with http:// endpoints are refused for the same
// reason (they would be ignored).
func (o *EtcdOptions) Validate() error {
	if err := etcdx.CheckEndpoints(o.Endpoints, o.TLS); err != nil {
		return fmt.Errorf("nonce: %w", err)
	}
	return nil
}

// conn is how the store reaches the cluster.
func (o *EtcdOptions) conn() etcdx.Conn {
	return etcdx.Conn{Endpoints: o.Endpoints, TLS: o.TLS, Username: o.Username, Password: o.Password, DialTimeout: o.DialTimeout}
}

// shared: every executor of a deployment consumes under the same prefix (see Shared).
func (*Etcd) shared() bool { return true }

// EtcdTLS are the PEM files of a TLS connection to etcd.
type EtcdTLS = etcdx.TLS

// Etcd is the Store shared by several executors: a consumed jti is a key under the
// deployment's prefix, created by a compare-and-create transaction and attached to a lease that
// outlives the verdict's expiry plus skew (plus LeaseMargin), after which etcd deletes it.
//
// Every failure to get a definite answer — an unreachable cluster, a timeout, a lost lease, a
// closed store — is an *UnavailableError: the caller refuses the verdict. A transaction that
// timed out may still have committed, so such a verdict may stay consumed without having run;
// it is never run twice.
type Etcd struct {
	cli     *clientv3.Client
	keys    string // Prefix + "nonce/"
	timeout time.Duration
	skew    time.Duration
	bucket  time.Duration
	margin  time.Duration
	owner   string
	now     func() time.Time
	closed  atomic.Bool
	leases  *etcdx.Leases[int64] // by bucket index: exp (seconds) / bucket width
}

var _ Store = (*Etcd)(nil)

// NewEtcd connects to the cluster in opts. It does not wait for the cluster to answer (only
// for an auth token when Username is set).
func NewEtcd(ctx context.Context, opts EtcdOptions) (*Etcd, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	e := &Etcd{
		keys:    opts.Prefix,
		timeout: opts.RequestTimeout,
		skew:    opts.Skew,
		bucket:  opts.LeaseBucket,
		margin:  opts.LeaseMargin,
		owner:   opts.Owner,
		now:     opts.Now,
	}
	if e.keys == "" {
		e.keys = DefaultEtcdPrefix
	}
	e.keys += "nonce/"
	if e.timeout <= 0 {
		e.timeout = DefaultEtcdRequestTimeout
	}
	if e.skew <= 0 {
		e.skew = 5 * time.Second
	}
	if e.bucket < time.Second {
		e.bucket = DefaultEtcdLeaseBucket
	}
	if e.margin <= 0 {
		e.margin = DefaultEtcdLeaseMargin
	}
	if e.now == nil {
		e.now = time.Now
	}
	cli, err := etcdx.Client(ctx, opts.conn())
	if err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	e.cli = cli
	e.leases = etcdx.NewLeases(cli, e.timeout, e.swept)
	return e, nil
}

// Key is the etcd key that records jti as consumed.
func (e *Etcd) Key(jti string) string { return e.keys + jti }

// consumed is the value of a consumed key: for an operator, never read back by the store.
type consumed struct {
	At  time.Time `json:"consumed_at"`
	Exp int64     `json:"exp"`
	By  string    `json:"by,omitempty"`
}

// Consume implements Store: one transaction creates the jti's key unless it exists.
func (e *Etcd) Consume(ctx context.Context, jti string, expires time.Time) error {
	if err := checkJTI(jti, expires); err != nil {
		return err
	}
	if e.closed.Load() {
		return e.unavailable(errors.New("store closed"))
	}
	now := e.now()
	exp := expSeconds(expires)
	if cutoff := now.Add(-e.skew).Unix(); exp <= cutoff {
		return fmt.Errorf("%w: exp %d, entries kept only after %d", ErrExpired, exp, cutoff)
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	bucket := exp / e.bucketSeconds()
	lease, err := e.lease(ctx, bucket, now)
	if err != nil {
		return e.unavailable(fmt.Errorf("grant lease: %w", err))
	}
	val, err := json.Marshal(consumed{At: now.UTC(), Exp: exp, By: e.owner})
	if err != nil {
		return e.unavailable(err)
	}
	key := e.Key(jti)
	resp, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		// The lease may be what failed (revoked, or lost with the cluster's data): a lease
		// that might be gone is never reused.
		e.leases.Forget(bucket, lease)
		return e.unavailable(fmt.Errorf("consume: %w", err))
	}
	if !resp.Succeeded {
		return ErrReplayed
	}
	return nil
}

func (e *Etcd) bucketSeconds() int64 { return int64(e.bucket / time.Second) }

// lease returns the lease of bucket, granting it if no Consume has yet. Its TTL runs from
// before the grant was sent to past the bucket's last exp plus skew plus margin, so it covers
// every jti of the bucket whenever the grant reaches the cluster.
func (e *Etcd) lease(ctx context.Context, bucket int64, now time.Time) (clientv3.LeaseID, error) {
	end := time.Unix((bucket+1)*e.bucketSeconds(), 0).Add(e.skew + e.margin)
	return e.leases.Get(ctx, bucket, int64((end.Sub(now)+time.Second-1)/time.Second))
}

// swept reports a bucket whose every exp is past its skew: no Consume uses its lease again.
func (e *Etcd) swept(_, cached int64) bool {
	return cached < e.now().Add(-e.skew).Unix()/e.bucketSeconds()-1
}

func (e *Etcd) unavailable(err error) error {
	return &UnavailableError{Backend: "etcd", Err: err}
}

// Len implements Store with a count-only range over the deployment's nonce keys (every
// executor's).
func (e *Etcd) Len(ctx context.Context) (int, error) {
	if e.closed.Load() {
		return 0, e.unavailable(errors.New("store closed"))
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	resp, err := e.cli.Get(ctx, e.keys, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, e.unavailable(fmt.Errorf("count: %w", err))
	}
	return int(resp.Count), nil
}

// Close implements Store: it closes the connection; Consume then fails with ErrUnavailable.
// The keys stay in etcd until their leases expire.
func (e *Etcd) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	if err := e.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("nonce: etcd: close: %w", err)
	}
	return nil
}
