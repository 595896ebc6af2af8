package vault

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/internal/etcdx"
)

// EtcdOptions say where in an etcd cluster a vault keeps its records. Endpoints is required;
// the rest have defaults. Every executor of a deployment that must see the same grants uses
// the same endpoints and Prefix.
type EtcdOptions struct {
	// Endpoints are the cluster's client URLs (http://host:port, or https:// with TLS).
	Endpoints []string
	// Prefix is the deployment's key prefix; empty means etcdx.DefaultPrefix. The records are
	// under Prefix + "vault/".
	Prefix string
	TLS    *etcdx.TLS
	// Username and Password authenticate with etcd's own auth; both or neither.
	Username, Password string
	// DialTimeout bounds fetching an auth token at NewEtcd. Zero means
	// etcdx.DefaultDialTimeout. Connections are made lazily: NewEtcd succeeds with every
	// endpoint down, and every call is ErrUnavailable until one answers.
	DialTimeout time.Duration
	// RequestTimeout bounds each call of the vault (all its round trips). Zero means
	// etcdx.DefaultRequestTimeout.
	RequestTimeout time.Duration
}

// maxAddAttempts bounds the rounds of a Put that adds a grant while the principal's other
// grants keep being added to: each lost round is another writer's added grant, so it ends
// at the bound at the latest, and this is only a guard against a livelock.
const maxAddAttempts = 16

// etcdBackend keeps the records under a prefix of an etcd cluster: one key per pair,
// keys + escape(principal) + "/" + escape(server), its value the sealed record.
type etcdBackend struct {
	cli     *clientv3.Client
	keys    string // Prefix + "vault/"
	timeout time.Duration
}

// NewEtcd keeps grants in the etcd cluster of eo, under eo.Prefix + "vault/", with keys as
// New. It does not wait for the cluster to answer (only for an auth token when Username is
// set); Close closes the connection and leaves the records in etcd.
func NewEtcd(ctx context.Context, eo EtcdOptions, keys []*Key, opts Options) (*Vault, error) {
	if err := checkKeys(keys); err != nil {
		return nil, err
	}
	b := &etcdBackend{keys: cmp.Or(eo.Prefix, etcdx.DefaultPrefix) + "vault/", timeout: eo.RequestTimeout}
	if b.timeout <= 0 {
		b.timeout = etcdx.DefaultRequestTimeout
	}
	cli, err := etcdx.Client(ctx, etcdx.Conn{Endpoints: eo.Endpoints, TLS: eo.TLS, Username: eo.Username, Password: eo.Password, DialTimeout: eo.DialTimeout})
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	b.cli = cli
	return newVault(b, keys, opts), nil
}

// escape is a name as it appears in a key: url.PathEscape, which escapes '/' (and '%'), so that
// the '/' after the principal ends it, and which unescapes to the name alone.
func escape(name string) string { return url.PathEscape(name) }

// unescape is the name escape made s from, or false when no name is escaped as s (a key the
// vault did not write).
func unescape(s string) (string, bool) {
	name, err := url.PathUnescape(s)
	if err != nil || escape(name) != s || checkName("name", name, max(maxPrincipal, maxServer)) != nil {
		return "", false
	}
	return name, true
}

func (b *etcdBackend) principalPrefix(principal string) string {
	return b.keys + escape(principal) + "/"
}

func (b *etcdBackend) key(principal, server string) string {
	return b.principalPrefix(principal) + escape(server)
}

// parse reads the pair of a key under b.keys, or says why the key names none.
func (b *etcdBackend) parse(key string) (principal, server string, err error) {
	p, s, ok := strings.Cut(strings.TrimPrefix(key, b.keys), "/")
	if ok {
		principal, ok = unescape(p)
	}
	if ok {
		server, ok = unescape(s)
	}
	if !ok {
		return "", "", fmt.Errorf("%w: etcd key %q names no principal and server", ErrTampered, key)
	}
	return principal, server, nil
}

// fail is the error of an etcd request that got no definite answer: the caller's own end
// (ctx canceled or past its deadline) as it is, anything else (the request timeout included)
// ErrUnavailable.
func fail(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("vault: %s: %w", op, cerr)
	}
	return fmt.Errorf("%w: etcd: %s: %w", ErrUnavailable, op, err)
}

// request bounds one call of the vault by the request timeout, after checking that the
// caller has not given up already (a canceled context then never reads as ErrUnavailable).
func (b *etcdBackend) request(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, b.timeout)
	return rctx, cancel, nil
}

// do sends op as one request; an answer it does not get is fail(ctx, what, ...).
func (b *etcdBackend) do(ctx context.Context, what string, op clientv3.Op) (clientv3.OpResponse, error) {
	rctx, cancel, err := b.request(ctx)
	if err != nil {
		return clientv3.OpResponse{}, err
	}
	defer cancel()
	resp, err := b.cli.Do(rctx, op)
	if err != nil {
		return clientv3.OpResponse{}, fail(ctx, what, err)
	}
	return resp, nil
}

func (b *etcdBackend) get(ctx context.Context, principal, server string) ([]byte, error) {
	resp, err := b.do(ctx, "read", clientv3.OpGet(b.key(principal, server)))
	if err != nil || len(resp.Get().Kvs) == 0 {
		return nil, err
	}
	return resp.Get().Kvs[0].Value, nil
}

// put replaces the record in one transaction when the key exists. Otherwise it counts the
// principal's keys at one revision, and adds the record in a transaction that holds only if
// no key of the principal was created since that revision: with the count below max then, it
// is at most max after. A lost round is read again.
func (b *etcdBackend) put(ctx context.Context, principal, server string, value []byte, max int) error {
	rctx, cancel, err := b.request(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	key, prefix := b.key(principal, server), b.principalPrefix(principal)
	for range maxAddAttempts {
		resp, err := b.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
			Then(clientv3.OpPut(key, string(value))).
			Else(clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())).
			Commit()
		if err != nil {
			return fail(ctx, "write", err)
		}
		if resp.Succeeded {
			return nil
		}
		if len(resp.Responses) != 1 || resp.Responses[0].GetResponseRange() == nil {
			return fail(ctx, "write", errors.New("no count of the principal's grants in the answer"))
		}
		if n := resp.Responses[0].GetResponseRange().Count; n >= int64(max) {
			return fmt.Errorf("%w: %q holds %d grants, the most allowed (revoke one first)", ErrTooMany, principal, n)
		}
		// An empty range compares as a key of revision 0, and so holds.
		resp, err = b.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(prefix), "<", resp.Header.Revision+1).WithPrefix()).
			Then(clientv3.OpPut(key, string(value))).
			Commit()
		if err != nil {
			return fail(ctx, "write", err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return fail(ctx, "write", fmt.Errorf("the grants of %q kept changing over %d attempts", principal, maxAddAttempts))
}

func (b *etcdBackend) swap(ctx context.Context, principal, server string, old, value []byte) error {
	key := b.key(principal, server)
	write := clientv3.OpDelete(key)
	if value != nil {
		write = clientv3.OpPut(key, string(value))
	}
	// A value compare fails on a missing key; the else branch tells the two apart.
	answer, err := b.do(ctx, "write", clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", string(old))},
		[]clientv3.Op{write},
		[]clientv3.Op{clientv3.OpGet(key, clientv3.WithCountOnly())}))
	resp := answer.Txn()
	switch {
	case err != nil:
		return err
	case resp.Succeeded:
		return nil
	case len(resp.Responses) != 1 || resp.Responses[0].GetResponseRange() == nil:
		return fail(ctx, "write", errors.New("no read of the grant in the answer"))
	case resp.Responses[0].GetResponseRange().Count == 0:
		return fmt.Errorf("%w for %q at %q", ErrNoGrant, principal, server)
	}
	return fmt.Errorf("%w: grant of %q at %q", ErrChanged, principal, server)
}

func (b *etcdBackend) remove(ctx context.Context, principal, server string) error {
	resp, err := b.do(ctx, "write", clientv3.OpDelete(b.key(principal, server)))
	if err != nil {
		return err
	}
	if resp.Del().Deleted == 0 {
		return fmt.Errorf("%w for %q at %q", ErrNoGrant, principal, server)
	}
	return nil
}

func (b *etcdBackend) list(ctx context.Context, principal string) ([]entry, error) {
	resp, err := b.do(ctx, "read", clientv3.OpGet(b.principalPrefix(principal), clientv3.WithPrefix()))
	if err != nil {
		return nil, err
	}
	return b.entries(resp.Get().Kvs, func(p string) bool { return p == principal }), nil
}

// entries are the records of kvs; a key that names no pair, or (keep false) one of another
// principal, is a bad entry.
func (b *etcdBackend) entries(kvs []*mvccpb.KeyValue, keep func(principal string) bool) []entry {
	out := make([]entry, 0, len(kvs))
	for _, kv := range kvs {
		e := entry{cursor: string(kv.Key), value: kv.Value}
		e.principal, e.server, e.bad = b.parse(string(kv.Key))
		if e.bad == nil && !keep(e.principal) {
			e.bad = fmt.Errorf("%w: etcd key %q is not of the principal listed", ErrTampered, kv.Key)
		}
		out = append(out, e)
	}
	return out
}

func (b *etcdBackend) scan(ctx context.Context, after string, limit int) ([]entry, error) {
	from := b.keys
	if after != "" {
		from = after + "\x00" // the first key after it
	}
	resp, err := b.do(ctx, "read", clientv3.OpGet(from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(b.keys)), clientv3.WithLimit(int64(limit))))
	if err != nil {
		return nil, err
	}
	return b.entries(resp.Get().Kvs, func(string) bool { return true }), nil
}

// rewrite applies each change in a transaction of its own, which compares the stored bytes.
func (b *etcdBackend) rewrite(ctx context.Context, changes []change) (int, error) {
	n := 0
	for _, c := range changes {
		switch err := b.swap(ctx, c.principal, c.server, c.old, c.value); {
		case err == nil:
			n++
		case errors.Is(err, ErrChanged), errors.Is(err, ErrNoGrant):
		default:
			return n, err
		}
	}
	return n, nil
}

func (b *etcdBackend) close() error {
	return etcdx.Close(b.cli, nil, "vault: etcd")
}
