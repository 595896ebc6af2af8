package waiting

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/internal/etcdx"
)

// Etcd keeps continuations in an etcd cluster shared by every gateway replica of a deployment
// (same endpoints and prefix), so that a requestState issued by one replica can be answered
// through any other, and used once across all of them.
//
// Keys, under Prefix + "mcpgate/" (Prefix + "mcpgate/<kind>/" for a store of another kind, see
// EtcdOptions.Kind), hold hashes only (no principal id, no nonce):
//
//	e/<sha256(principal)>/<sha256(nonce)>  the continuation: "<expiry unix ns>\n" + encoded state
//	i/<sha256(principal)>/<sha256(nonce)>  its size in bytes, decimal: what the bounds read
//
// Both are written in one transaction under a lease of TTL (plus the lease bucket), and
// removed together by Take. The principal's share is exact: Put reads the principal's i/ keys
// and commits only if none of them changed meanwhile, so two replicas cannot both fill the last
// place. The global count is read before the commit and may be passed by the puts of other
// principals in flight at that moment; the global byte bound is not summed over etcd (that
// would read every i/ key on every put): etcd's own quota (--quota-backend-bytes) bounds it, and
// an etcd refusing for space refuses the call state_unavailable.
type Etcd struct {
	cli     *clientv3.Client
	keys    string // Prefix + "mcpgate/", or Prefix + "mcpgate/<kind>/"
	timeout time.Duration
	ttl     time.Duration
	now     func() time.Time
	leases  *etcdx.SpanLeases
	closed  atomic.Bool
	seen    atomic.Int64 // the global count as last read, for the metrics
}

var _ Store = (*Etcd)(nil)

// maxPutAttempts bounds the commits one put tries while its principal's keys keep changing
// (only that principal's own concurrent puts change them).
const maxPutAttempts = 8

// EtcdOptions configure an [Etcd]. Endpoints and TTL are required; the rest have defaults.
type EtcdOptions struct {
	// Endpoints are the cluster's client URLs (http://host:port, or https:// with TLS).
	Endpoints []string
	// Prefix is the deployment's key prefix; every replica of one deployment uses the same.
	// Empty means etcdx.DefaultPrefix. Keys are under Prefix + "mcpgate/", the gateway's part
	// of the deployment's keys.
	Prefix string
	// Kind names what the store keeps when it is not the continuations of gated calls: "relay"
	// for the relayed questions of pass-through tools. A store of kind k keeps its keys under
	// Prefix + "mcpgate/" + k + "/", so that stores of different kinds on one cluster neither
	// see nor count each other's entries; empty is the continuations' own, Prefix + "mcpgate/".
	Kind string
	TLS  *etcdx.TLS
	// Username and Password authenticate with etcd's own auth; both or neither.
	Username, Password string
	// DialTimeout bounds fetching an auth token at NewEtcd. Zero means
	// etcdx.DefaultDialTimeout. Connections are made lazily: NewEtcd succeeds with every
	// endpoint down, and every operation is ErrStateUnavailable until one answers.
	DialTimeout time.Duration
	// RequestTimeout bounds each read and each commit. Zero means etcdx.DefaultRequestTimeout.
	RequestTimeout time.Duration
	// TTL is how long a continuation lives: its keys' lease outlives it by up to a
	// twenty-fourth of it (the lease bucket), at least a second.
	TTL time.Duration
	// Now is the clock that decides expiry; nil means time.Now.
	Now func() time.Time
}

// NewEtcd connects to the cluster in opts. It does not wait for the cluster to answer (only
// for an auth token when Username is set).
func NewEtcd(ctx context.Context, opts EtcdOptions) (*Etcd, error) {
	if opts.TTL <= 0 {
		return nil, fmt.Errorf("etcd: ttl %v is not a positive duration", opts.TTL)
	}
	if !validKind(opts.Kind) {
		return nil, fmt.Errorf("etcd: store kind %q: want two lower-case letters or more", opts.Kind)
	}
	cli, err := etcdx.Client(ctx, etcdx.Conn{Endpoints: opts.Endpoints, TLS: opts.TLS, Username: opts.Username,
		Password: opts.Password, DialTimeout: opts.DialTimeout})
	if err != nil {
		return nil, err
	}
	keys := cmp.Or(opts.Prefix, etcdx.DefaultPrefix) + "mcpgate/"
	if opts.Kind != "" {
		keys += opts.Kind + "/"
	}
	s := &Etcd{cli: cli, keys: keys,
		timeout: cmp.Or(opts.RequestTimeout, etcdx.DefaultRequestTimeout), ttl: opts.TTL, now: opts.Now}
	if s.now == nil {
		s.now = time.Now
	}
	// The puts of a twenty-fourth of TTL (at least a second) share a lease.
	s.leases = etcdx.NewSpanLeases(cli, s.timeout, max(s.ttl/24, time.Second))
	return s, nil
}

// validKind reports whether kind names a store kind: empty, or two lower-case letters or more
// (the continuations' own keys start with e/ and i/, which a kind of one letter could be).
func validKind(kind string) bool {
	return len(kind) != 1 && !strings.ContainsFunc(kind, func(r rune) bool { return r < 'a' || r > 'z' })
}

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (s *Etcd) entryKey(principal, nonce string) string {
	return s.keys + "e/" + hashHex(principal) + "/" + hashHex(nonce)
}

func (s *Etcd) indexPrefix(principal string) string {
	return s.keys + "i/" + hashHex(principal) + "/"
}

func (s *Etcd) indexKey(principal, nonce string) string {
	return s.indexPrefix(principal) + hashHex(nonce)
}

var errStoreClosed = errors.New("store closed")

func unavailable(op string, err error) error {
	return fmt.Errorf("%w: etcd: %s: %v", ErrStateUnavailable, op, err)
}

// Put stores p unless a bound of lim would be passed (the global byte bound is etcd's quota);
// ErrBusyPrincipal too when the principal's keys kept changing for maxPutAttempts commits.
func (s *Etcd) Put(ctx context.Context, p Entry, lim Limits) error {
	if s.closed.Load() {
		return unavailable("put", errStoreClosed)
	}
	size := len(p.Data)
	if size > lim.PrincipalBytes {
		return ErrStateTooLarge
	}
	bucket, lease, err := s.leases.At(ctx, s.now(), s.ttl)
	if err != nil {
		return unavailable("grant lease", err)
	}
	value := append(strconv.AppendInt(nil, p.Expiry.UnixNano(), 10), '\n')
	value = append(value, p.Data...)
	for range maxPutAttempts {
		mine, rev, err := s.read(ctx, p.Principal)
		if err != nil {
			return err
		}
		all, err := s.count(ctx)
		if err != nil {
			return err
		}
		// The global byte bound is etcd's quota (see Etcd).
		unbounded := lim
		unbounded.MaxBytes = math.MaxInt
		if err := Admit(size, mine, all, unbounded); err != nil {
			return err
		}
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, err := s.cli.Txn(tctx).
			If(clientv3.Compare(clientv3.ModRevision(s.indexPrefix(p.Principal)).WithPrefix(), "<", rev+1)).
			Then(clientv3.OpPut(s.entryKey(p.Principal, p.Nonce), string(value), clientv3.WithLease(lease)),
				clientv3.OpPut(s.indexKey(p.Principal, p.Nonce), strconv.Itoa(size), clientv3.WithLease(lease))).
			Commit()
		cancel()
		if err != nil {
			s.leases.Forget(bucket, lease)
			return unavailable("put", err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return ErrBusyPrincipal
}

// read returns what principal holds and the revision it was read at.
func (s *Etcd) read(ctx context.Context, principal string) (Usage, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.indexPrefix(principal), clientv3.WithPrefix())
	if err != nil {
		return Usage{}, 0, unavailable("read principal", err)
	}
	const most = math.MaxInt / 2 // sums of two stay below MaxInt
	var u Usage
	for _, kv := range resp.Kvs {
		n, err := strconv.Atoi(string(kv.Value))
		if err != nil || n < 0 || n > most {
			// Not a size this store wrote: count it as more than any share rather than nothing.
			n = most
		}
		u.Count++
		u.Bytes = min(u.Bytes+n, most)
	}
	return u, resp.Header.Revision, nil
}

// count returns the number of continuations in the whole store.
func (s *Etcd) count(ctx context.Context) (Usage, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.keys+"i/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return Usage{}, unavailable("count", err)
	}
	s.seen.Store(resp.Count)
	return Usage{Count: int(resp.Count)}, nil
}

// Take deletes the continuation and returns what the delete removed: of concurrent takes, on
// any replica, only the one whose delete removed the key gets it.
func (s *Etcd) Take(ctx context.Context, principal, nonce string) ([]byte, error) {
	if s.closed.Load() {
		return nil, unavailable("take", errStoreClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpDelete(s.entryKey(principal, nonce), clientv3.WithPrevKV()),
		clientv3.OpDelete(s.indexKey(principal, nonce))).Commit()
	if err != nil {
		return nil, unavailable("take", err)
	}
	prev := resp.Responses[0].GetResponseDeleteRange().GetPrevKvs()
	if len(prev) == 0 {
		return nil, ErrNotFound
	}
	exp, data, ok := bytes.Cut(prev[0].Value, []byte{'\n'})
	if !ok {
		return nil, ErrNotFound
	}
	ns, err := strconv.ParseInt(string(exp), 10, 64)
	if err != nil || !s.now().Before(time.Unix(0, ns)) {
		return nil, ErrNotFound
	}
	return data, nil
}

// Principal reports what principal holds, read from its size keys.
func (s *Etcd) Principal(ctx context.Context, principal string) (Usage, error) {
	if s.closed.Load() {
		return Usage{}, unavailable("read principal", errStoreClosed)
	}
	u, _, err := s.read(ctx, principal)
	return u, err
}

// Total reports the global count as last read by Put or Ready; bytes are not summed over etcd.
func (s *Etcd) Total() Usage { return Usage{Count: int(s.seen.Load())} }

// Ready reads the store's count (refreshing the pending gauge): an etcd that does not answer
// within request_timeout makes the replica not ready.
func (s *Etcd) Ready(ctx context.Context) error {
	if s.closed.Load() {
		return unavailable("ready", errStoreClosed)
	}
	_, err := s.count(ctx)
	return err
}

// Close closes the client; once closed, every operation is ErrStateUnavailable.
func (s *Etcd) Close() error {
	return etcdx.Close(s.cli, &s.closed, "etcd")
}
