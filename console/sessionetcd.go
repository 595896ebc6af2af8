package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/internal/etcdx"
)

// etcdStore keeps sessions in an etcd cluster shared by every console replica of a deployment
// (same endpoints and prefix), so that a session made on one replica is read on any other and
// outlives every replica's restart.
//
// Keys, under Prefix + "console/", hold hashes only (no cookie value, no principal):
//
//	s/<key>                     the session: JSON of storedSession, its content sealed
//	p/<sha256(subject)>/<key>   the principal's index, empty: what "sign out everywhere" reads
//	l/<key of the state>        a sign-in in progress, sealed under its state
//
// A session's two keys are written in one transaction under a lease outliving session.ttl, so
// etcd drops them at the end of the session's life whatever the replicas do; the idle timeout is
// the console's to check at each read. The bound max_sessions is read before a create
// (a count) and may be passed by the sign-ins on other replicas at that moment.
type etcdStore struct {
	cli     *clientv3.Client
	keys    string
	timeout time.Duration
	ttl     time.Duration
	now     func() time.Time
	leases  *etcdx.SpanLeases
	logins  *etcdx.SpanLeases
	closed  atomic.Bool
	seen    atomic.Int64 // the count as last read, for the metrics
}

var _ sessionStore = (*etcdStore)(nil)

// maxEvictions bounds the sessions one create ends to make room: more are over the bound only
// while sign-ins race on several replicas, and the next creates take them.
const maxEvictions = 8

// maxEndAllOps bounds the keys one transaction of endAll deletes, below etcd's default of 128
// operations a transaction.
const maxEndAllOps = 100

// maxEndAllRounds bounds the batches of one endAll: only the principal's own sign-ins, made
// while it runs, make it read again.
const maxEndAllRounds = 64

// etcdStoreOptions configure an etcdStore.
type etcdStoreOptions struct {
	Conn           etcdx.Conn
	Prefix         string
	RequestTimeout time.Duration
	TTL            time.Duration // session.ttl
	Now            func() time.Time
}

func newEtcdStore(ctx context.Context, opts etcdStoreOptions) (*etcdStore, error) {
	cli, err := etcdx.Client(ctx, opts.Conn)
	if err != nil {
		return nil, err
	}
	s := &etcdStore{cli: cli, keys: cmp.Or(opts.Prefix, etcdx.DefaultPrefix) + "console/",
		timeout: cmp.Or(opts.RequestTimeout, etcdx.DefaultRequestTimeout), ttl: opts.TTL, now: opts.Now}
	// The keys written within a twenty-fourth of their life (at least a second) share a lease.
	s.leases = etcdx.NewSpanLeases(cli, s.timeout, max(s.ttl/24, time.Second))
	s.logins = etcdx.NewSpanLeases(cli, s.timeout, max(loginTTL/24, time.Second))
	return s, nil
}

func (s *etcdStore) sessionKey(key string) string { return s.keys + "s/" + key }
func (s *etcdStore) indexPrefix(principal string) string {
	return s.keys + "p/" + principal + "/"
}
func (s *etcdStore) loginKey(key string) string { return s.keys + "l/" + key }

var errStoreClosed = errors.New("store closed")

// do sends o as one request of op, bounded by the request timeout.
func (s *etcdStore) do(ctx context.Context, op string, o clientv3.Op) (clientv3.OpResponse, error) {
	if s.closed.Load() {
		return clientv3.OpResponse{}, unavailable(op, errStoreClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Do(ctx, o)
	if err != nil {
		return clientv3.OpResponse{}, unavailable(op, err)
	}
	return resp, nil
}

func (s *etcdStore) create(ctx context.Context, key string, rec storedSession, limit int) error {
	if s.closed.Load() {
		return unavailable("create", errStoreClosed)
	}
	value, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := s.makeRoom(ctx, limit); err != nil {
		return err
	}
	bucket, id, err := s.leases.At(ctx, s.now(), s.ttl)
	if err != nil {
		return unavailable("grant lease", err)
	}
	_, err = s.do(ctx, "create", clientv3.OpTxn(nil, []clientv3.Op{
		clientv3.OpPut(s.sessionKey(key), string(value), clientv3.WithLease(id)),
		clientv3.OpPut(s.indexPrefix(rec.Principal)+key, "", clientv3.WithLease(id))}, nil))
	if err != nil {
		s.leases.Forget(bucket, id)
	}
	return err
}

// makeRoom ends the oldest sessions (by sign-in) while the store holds limit or more.
func (s *etcdStore) makeRoom(ctx context.Context, limit int) error {
	n, err := s.count(ctx)
	if err != nil {
		return err
	}
	over := min(n-limit+1, maxEvictions)
	if over <= 0 {
		return nil
	}
	resp, err := s.do(ctx, "make room", clientv3.OpGet(s.keys+"s/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(int64(over))))
	if err != nil {
		return err
	}
	for _, kv := range resp.Get().Kvs {
		key := strings.TrimPrefix(string(kv.Key), s.keys+"s/")
		var rec storedSession
		_ = json.Unmarshal(kv.Value, &rec) // a value that does not read leaves an index key to its lease
		if err := s.end(ctx, key, rec.Principal); err != nil {
			return err
		}
	}
	return nil
}

func (s *etcdStore) count(ctx context.Context) (int, error) {
	resp, err := s.do(ctx, "count", clientv3.OpGet(s.keys+"s/", clientv3.WithPrefix(), clientv3.WithCountOnly()))
	if err != nil {
		return 0, err
	}
	s.seen.Store(resp.Get().Count)
	return int(resp.Get().Count), nil
}

func (s *etcdStore) get(ctx context.Context, key string) (storedSession, error) {
	resp, err := s.do(ctx, "get", clientv3.OpGet(s.sessionKey(key)))
	if err != nil {
		return storedSession{}, err
	}
	kvs := resp.Get().Kvs
	if len(kvs) == 0 {
		return storedSession{}, errNoSession
	}
	var rec storedSession
	if err := json.Unmarshal(kvs[0].Value, &rec); err != nil {
		return storedSession{}, errNoSession
	}
	rec.rev = kvs[0].CreateRevision
	return rec, nil
}

// touch rewrites the session with its new use, on its own lease, only if it is still the
// incarnation read: a session ended meanwhile (here or by another replica) is not brought back.
func (s *etcdStore) touch(ctx context.Context, key string, rec storedSession, used time.Time) error {
	if s.closed.Load() {
		return unavailable("touch", errStoreClosed)
	}
	rev := rec.rev
	rec.Used = used
	value, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	k := s.sessionKey(key)
	resp, err := s.do(ctx, "touch", clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", rev)},
		[]clientv3.Op{clientv3.OpPut(k, string(value), clientv3.WithIgnoreLease())}, nil))
	if err != nil {
		return err
	}
	if !resp.Txn().Succeeded {
		return errNoSession
	}
	return nil
}

func (s *etcdStore) end(ctx context.Context, key, principal string) error {
	_, err := s.do(ctx, "end", clientv3.OpTxn(nil,
		[]clientv3.Op{clientv3.OpDelete(s.sessionKey(key)), clientv3.OpDelete(s.indexPrefix(principal) + key)}, nil))
	return err
}

// endAll deletes the principal's sessions listed in its index, a batch at a time, each batch
// only if the index did not change since it was read: a session made meanwhile is read by the
// next round, never left behind with its index entry gone.
func (s *etcdStore) endAll(ctx context.Context, principal string) (int, error) {
	if s.closed.Load() {
		return 0, unavailable("end all", errStoreClosed)
	}
	prefix := s.indexPrefix(principal)
	n := 0
	for range maxEndAllRounds {
		answer, err := s.do(ctx, "end all", clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(maxEndAllOps/2)))
		if err != nil {
			return n, err
		}
		resp := answer.Get()
		if len(resp.Kvs) == 0 {
			return n, nil
		}
		var ops []clientv3.Op
		for _, kv := range resp.Kvs {
			key := strings.TrimPrefix(string(kv.Key), prefix)
			ops = append(ops, clientv3.OpDelete(string(kv.Key)), clientv3.OpDelete(s.sessionKey(key)))
		}
		txn, err := s.do(ctx, "end all", clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(prefix).WithPrefix(), "<", resp.Header.Revision+1)},
			ops, nil))
		if err != nil {
			return n, err
		}
		if txn.Txn().Succeeded {
			n += len(resp.Kvs)
		}
	}
	return n, unavailable("end all", fmt.Errorf("the sessions kept changing for %d rounds", maxEndAllRounds))
}

func (s *etcdStore) len() int { return int(s.seen.Load()) }

// ready counts the sessions (refreshing the gauge): an etcd that does not answer within
// request_timeout makes the replica not ready.
func (s *etcdStore) ready(ctx context.Context) error {
	_, err := s.count(ctx)
	return err
}

func (s *etcdStore) shared() bool { return true }

func (s *etcdStore) putLogin(ctx context.Context, key string, sealed []byte) error {
	if s.closed.Load() {
		return unavailable("put sign-in", errStoreClosed)
	}
	bucket, id, err := s.logins.At(ctx, s.now(), loginTTL)
	if err != nil {
		return unavailable("grant lease", err)
	}
	_, err = s.do(ctx, "put sign-in", clientv3.OpPut(s.loginKey(key), string(sealed), clientv3.WithLease(id)))
	if err != nil {
		s.logins.Forget(bucket, id)
	}
	return err
}

func (s *etcdStore) takeLogin(ctx context.Context, key string) ([]byte, error) {
	resp, err := s.do(ctx, "take sign-in", clientv3.OpDelete(s.loginKey(key), clientv3.WithPrevKV()))
	if err != nil {
		return nil, err
	}
	if prev := resp.Del().PrevKvs; len(prev) > 0 {
		return prev[0].Value, nil
	}
	return nil, errNoSession
}

// close closes the client; once closed, every operation is errSessionStore.
func (s *etcdStore) close() error {
	return etcdx.Close(s.cli, &s.closed, "session.store: etcd")
}
