package nonce

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
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
	// reading the store; typically the executor id, which replicas share.
	Owner string
	// Instance names the one process, across its restarts, that records what it consumes:
	// the executor's records file (store.DB.FileID). It is written into each consumed key's
	// value, and the store keeps Prefix + "instances/" + Instance naming the instance's current
	// run (see Reconciler). Two live processes must never share one; the later to begin
	// fences the earlier out. Empty means the store does not reconcile.
	Instance string
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
// timed out may still commit, so such a verdict may end consumed without having run; it is
// never run twice. With an Instance the store is a Reconciler, and Settle turns every such
// consume into a definite one that the caller records.
type Etcd struct {
	cli     *clientv3.Client
	keys    string // Prefix + "nonce/"
	runKey  string // Prefix + "instances/" + instance: the instance's current run
	inst    string
	run     string // this process's run, random
	attempt atomic.Uint64
	timeout time.Duration
	skew    time.Duration
	bucket  time.Duration
	margin  time.Duration
	owner   string
	now     func() time.Time
	closed  atomic.Bool
	leases  *etcdx.Leases[int64] // by bucket index: exp (seconds) / bucket width

	beginMu sync.Mutex
	begun   atomic.Bool

	mu      sync.Mutex
	pending map[string]*pendingConsume // by jti: attempts given up on, for Settle
}

// pendingConsume is what this run gave up on for one jti: every attempt whose outcome is not
// known. The same verdict can be sent again while an earlier attempt is still unanswered, and
// either may be the one that commits: all of them are kept, or a late commit of the first would
// be taken for someone else's.
type pendingConsume struct {
	exp      int64
	attempts []uint64 // 0: any attempt of this run (an abandoned consume, which succeeded)
}

// covers reports whether the attempt that created a key of this run is one given up on.
func (p *pendingConsume) covers(attempt uint64) bool {
	return slices.Contains(p.attempts, 0) || slices.Contains(p.attempts, attempt)
}

var _ Reconciler = (*Etcd)(nil)

// NewEtcd connects to the cluster in opts. It does not wait for the cluster to answer (only
// for an auth token when Username is set).
func NewEtcd(ctx context.Context, opts EtcdOptions) (*Etcd, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	e := &Etcd{
		keys:    cmp.Or(opts.Prefix, DefaultEtcdPrefix),
		timeout: opts.RequestTimeout,
		skew:    opts.Skew,
		bucket:  opts.LeaseBucket,
		margin:  opts.LeaseMargin,
		owner:   opts.Owner,
		inst:    opts.Instance,
		now:     opts.Now,
	}
	if e.inst != "" {
		e.runKey = e.keys + "instances/" + e.inst
	}
	e.keys += "nonce/"
	var run [12]byte
	if _, err := rand.Read(run[:]); err != nil {
		return nil, fmt.Errorf("nonce: run id: %w", err)
	}
	e.run, e.pending = hex.EncodeToString(run[:]), map[string]*pendingConsume{}
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
	cli, err := etcdx.Client(ctx, etcdx.Conn{Endpoints: opts.Endpoints, TLS: opts.TLS, Username: opts.Username,
		Password: opts.Password, DialTimeout: opts.DialTimeout})
	if err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	e.cli = cli
	e.leases = etcdx.NewLeases(cli, e.timeout, e.swept)
	return e, nil
}

// Key is the etcd key that records jti as consumed.
func (e *Etcd) Key(jti string) string { return e.keys + jti }

// consumed is the value of a consumed key. by names the executor for an operator; instance,
// run and attempt say which request consumed it, for reconciliation; not_started_at is set
// once the instance recorded that it never started.
type consumed struct {
	At         time.Time  `json:"consumed_at"`
	Exp        int64      `json:"exp"`
	By         string     `json:"by,omitempty"`
	Instance   string     `json:"instance,omitempty"`
	Run        string     `json:"run,omitempty"`
	Attempt    uint64     `json:"attempt,omitempty"`
	NotStarted *time.Time `json:"not_started_at,omitempty"`
}

// Consume implements Store: one transaction creates the jti's key unless it exists and, with
// an instance, unless another process has begun a run of it since this one did.
//
// An attempt whose transaction got no answer may still take effect: it is kept for Settle.
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
	if err := e.Begin(ctx); err != nil {
		return err
	}
	bucket := exp / e.bucketSeconds()
	lease, err := e.lease(ctx, bucket, now)
	if err != nil {
		return e.unavailable(fmt.Errorf("grant lease: %w", err))
	}
	attempt := e.attempt.Add(1)
	val, err := json.Marshal(consumed{At: now.UTC(), Exp: exp, By: e.owner, Instance: e.inst, Run: e.run, Attempt: attempt})
	if err != nil {
		return e.unavailable(err)
	}
	key := e.Key(jti)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
	if e.runKey != "" {
		cmps = append(cmps, clientv3.Compare(clientv3.Value(e.runKey), "=", e.run))
	}
	resp, err := e.cli.Txn(ctx).
		If(cmps...).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		// The lease may be what failed (revoked, or lost with the cluster's data): a lease
		// that might be gone is never reused.
		e.leases.Forget(bucket, lease)
		// The transaction may have reached the cluster and may still commit: Settle finds
		// out, once the cluster answers again.
		e.addPending(jti, exp, attempt)
		return e.unavailable(fmt.Errorf("consume: %w", err))
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		// The key is absent, so the run compare failed.
		return e.unavailable(ErrSuperseded)
	}
	var v consumed
	err = json.Unmarshal(kvs[0].Value, &v)
	switch {
	case err == nil && v.NotStarted != nil:
		return ErrConsumedNotStarted
	case err == nil && e.inst != "" && v.Instance == e.inst && v.Run == e.run && v.Attempt == attempt:
		// The key holds this very attempt: the client sent the transaction again after its
		// first answer was lost, and the first one committed. The verdict is consumed by this
		// request, which goes on to start it; answering replayed would leave it consumed with
		// no record and no one to settle it.
		return nil
	}
	return ErrReplayed
}

// Spent implements Store: one read of jti's key. A key this instance's own pending consume may
// have written reads as spent, as it would to another executor: such a verdict is in doubt,
// and Consume answers it the same way once the cluster does.
func (e *Etcd) Spent(ctx context.Context, jti string, expires time.Time) error {
	if err := checkJTI(jti, expires); err != nil {
		return err
	}
	resp, err := e.do(ctx, "read", clientv3.OpGet(e.Key(jti)))
	if err != nil || len(resp.Get().Kvs) == 0 {
		return err
	}
	var v consumed
	if json.Unmarshal(resp.Get().Kvs[0].Value, &v) == nil && v.NotStarted != nil {
		return ErrConsumedNotStarted
	}
	return ErrReplayed
}

// Begin implements Reconciler: it writes this run into the instance's run key. Every Consume
// compares that key with its own run in the same transaction, so a Consume of an earlier run
// still on its way can no longer take effect. A store without an instance has nothing to
// begin.
func (e *Etcd) Begin(ctx context.Context) error {
	if e.runKey == "" || e.begun.Load() {
		return nil
	}
	e.beginMu.Lock()
	defer e.beginMu.Unlock()
	if e.begun.Load() {
		return nil
	}
	if _, err := e.do(ctx, "begin run", clientv3.OpPut(e.runKey, e.run)); err != nil {
		return err
	}
	e.begun.Store(true)
	return nil
}

// earlierRunsPage is how many keys one read of EarlierRuns fetches.
const earlierRunsPage = 1000

// EarlierRuns implements Reconciler. It reads every nonce key of the deployment, a page at a
// time, and keeps the instance's: once a run has begun, a key of an earlier run is final.
func (e *Etcd) EarlierRuns(ctx context.Context, fn func(Orphan) error) error {
	if e.runKey == "" {
		return nil
	}
	if err := e.Begin(ctx); err != nil {
		return err
	}
	end := clientv3.GetPrefixRangeEnd(e.keys)
	from := e.keys
	for {
		rctx, cancel := context.WithTimeout(ctx, e.timeout)
		resp, err := e.cli.Get(rctx, from, clientv3.WithRange(end), clientv3.WithLimit(earlierRunsPage))
		cancel()
		if err != nil {
			return e.unavailable(fmt.Errorf("list consumed keys: %w", err))
		}
		for _, kv := range resp.Kvs {
			var v consumed
			if json.Unmarshal(kv.Value, &v) != nil || v.Instance != e.inst || v.Run == e.run {
				continue
			}
			if err := fn(e.orphan(string(kv.Key), kv.ModRevision, v)); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

func (e *Etcd) orphan(key string, rev int64, v consumed) Orphan {
	return Orphan{
		JTI: key[len(e.keys):], Expires: time.Unix(v.Exp, 0), ConsumedAt: v.At,
		Marked: v.NotStarted != nil, Revision: rev, val: v,
	}
}

// addPending keeps an attempt for Settle. A store without an instance reconciles nothing, and
// keeps nothing.
func (e *Etcd) addPending(jti string, exp int64, attempt uint64) {
	if e.runKey == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// A new value, never one changed in place: Settle drops an entry only if it is still the
	// one it settled.
	p := &pendingConsume{exp: exp, attempts: []uint64{attempt}}
	if old := e.pending[jti]; old != nil {
		p.exp = max(p.exp, old.exp)
		p.attempts = append(p.attempts, old.attempts...)
	}
	e.pending[jti] = p
}

// Abandon implements Reconciler.
func (e *Etcd) Abandon(jti string, expires time.Time) {
	e.addPending(jti, expSeconds(expires), 0)
}

// Pending implements Reconciler.
func (e *Etcd) Pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.pending)
}

// Settle implements Reconciler. Each pending attempt is settled by one transaction: create
// the key, marked as never started, if it is absent; otherwise read it. A key this run's
// attempt created (the abandoned one, or the one whose answer was lost) is handed to fn; a key
// created by any other attempt is someone else's to account for.
func (e *Etcd) Settle(ctx context.Context, fn func(Orphan) error) (int, error) {
	e.mu.Lock()
	todo := maps.Clone(e.pending)
	e.mu.Unlock()
	var errs []error
	for jti, p := range todo {
		o, ours, err := e.fence(ctx, jti, p)
		if err == nil && ours {
			err = fn(o)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("settle %s: %w", jti, err))
			continue
		}
		e.mu.Lock()
		if e.pending[jti] == p {
			delete(e.pending, jti)
		}
		e.mu.Unlock()
	}
	return e.Pending(), errors.Join(errs...)
}

// fence settles one pending attempt: see Settle.
func (e *Etcd) fence(ctx context.Context, jti string, p *pendingConsume) (Orphan, bool, error) {
	if e.closed.Load() {
		return Orphan{}, false, e.unavailable(errors.New("store closed"))
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	now := e.now()
	bucket := p.exp / e.bucketSeconds()
	lease, err := e.lease(ctx, bucket, now)
	if err != nil {
		return Orphan{}, false, e.unavailable(fmt.Errorf("grant lease: %w", err))
	}
	at := now.UTC()
	v := consumed{At: at, Exp: p.exp, By: e.owner, Instance: e.inst, Run: e.run, Attempt: p.attempts[0], NotStarted: &at}
	val, err := json.Marshal(v)
	if err != nil {
		return Orphan{}, false, e.unavailable(err)
	}
	key := e.Key(jti)
	resp, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		e.leases.Forget(bucket, lease)
		return Orphan{}, false, e.unavailable(fmt.Errorf("fence: %w", err))
	}
	if resp.Succeeded {
		return e.orphan(key, resp.Header.Revision, v), true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return Orphan{}, false, nil // cannot happen: the compare failed because the key exists
	}
	var got consumed
	if err := json.Unmarshal(kvs[0].Value, &got); err != nil {
		return Orphan{}, false, nil // not written by this package: not this run's
	}
	ours := got.Instance == e.inst && got.Run == e.run && p.covers(got.Attempt)
	return e.orphan(key, kvs[0].ModRevision, got), ours, nil
}

// MarkNotStarted implements Reconciler: it rewrites the key's value, under its lease, if the
// key is still as o read it.
func (e *Etcd) MarkNotStarted(ctx context.Context, o Orphan) error {
	if o.Marked {
		return nil
	}
	v := o.val
	at := e.now().UTC()
	v.NotStarted = &at
	val, err := json.Marshal(v)
	if err != nil {
		return e.unavailable(err)
	}
	key := e.Key(o.JTI)
	answer, err := e.do(ctx, "mark not started", clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", o.Revision)},
		[]clientv3.Op{clientv3.OpPut(key, string(val), clientv3.WithIgnoreLease())},
		[]clientv3.Op{clientv3.OpGet(key)}))
	if err != nil {
		return err
	}
	resp := answer.Txn()
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil // its lease ran out: nobody can present the verdict any more
	}
	var got consumed
	if json.Unmarshal(kvs[0].Value, &got) == nil && got.NotStarted != nil {
		return nil
	}
	return fmt.Errorf("nonce: mark %s not started: the key changed since it was read (revision %d, now %d)",
		o.JTI, o.Revision, kvs[0].ModRevision)
}

func (e *Etcd) bucketSeconds() int64 { return int64(e.bucket / time.Second) }

// lease returns the lease of bucket, granting it if no Consume has yet. Its TTL runs from
// before the grant was sent to past the bucket's last exp plus skew plus margin, so it covers
// every jti of the bucket whenever the grant reaches the cluster.
func (e *Etcd) lease(ctx context.Context, bucket int64, now time.Time) (clientv3.LeaseID, error) {
	end := time.Unix((bucket+1)*e.bucketSeconds(), 0).Add(e.skew + e.margin)
	// A fence may come after the bucket's end (Settle after a long outage): its key only has
	// to outlive the fence itself.
	ttl := max(int64((end.Sub(now)+time.Second-1)/time.Second), int64(e.margin/time.Second))
	return e.leases.Get(ctx, bucket, ttl)
}

// swept reports a bucket whose every exp is past its skew: no Consume uses its lease again.
func (e *Etcd) swept(_, cached int64) bool {
	return cached < e.now().Add(-e.skew).Unix()/e.bucketSeconds()-1
}

func (e *Etcd) unavailable(err error) error {
	return &UnavailableError{Backend: "etcd", Err: err}
}

// do sends op as one request of its own, bounded by the request timeout; what names it in the
// error of an answer it does not get.
func (e *Etcd) do(ctx context.Context, what string, op clientv3.Op) (clientv3.OpResponse, error) {
	if e.closed.Load() {
		return clientv3.OpResponse{}, e.unavailable(errors.New("store closed"))
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	resp, err := e.cli.Do(ctx, op)
	if err != nil {
		return clientv3.OpResponse{}, e.unavailable(fmt.Errorf("%s: %w", what, err))
	}
	return resp, nil
}

// Len implements Store with a count-only range over the deployment's nonce keys (every
// executor's).
func (e *Etcd) Len(ctx context.Context) (int, error) {
	resp, err := e.do(ctx, "count", clientv3.OpGet(e.keys, clientv3.WithPrefix(), clientv3.WithCountOnly()))
	if err != nil {
		return 0, err
	}
	return int(resp.Get().Count), nil
}

// Close implements Store: it closes the connection; Consume then fails with ErrUnavailable.
// The keys stay in etcd until their leases expire.
func (e *Etcd) Close() error {
	return etcdx.Close(e.cli, &e.closed, "nonce: etcd")
}
