package convstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/store"
)

// EtcdApprovals keeps verdictd's console and webhook approvals in the etcd cluster the
// replicas share (the Keeper of package approvals), so that an approval created through one
// replica is decided through any and used once. Each is one key, indexed by the call it
// belongs to, by its creation time, as pending (under its principal) and as approved and not
// yet used, every index key written in the transaction that writes the approval. A write is a
// compare and set on the approval's revision as read; one that goes with a decision record is
// in the transaction of the run's state (Run.Commit), so that the record's state change and
// the approval it creates or uses are one step. Keys name approvals, calls and principals by
// their sha256 only.
type EtcdApprovals struct{ e *Etcd }

// Approvals returns the approvals kept in e's cluster.
func (e *Etcd) Approvals() *EtcdApprovals { return &EtcdApprovals{e: e} }

// Key kinds of the approvals under Prefix + "verdictd/".
const (
	kindApproval        = "approval"         // sha256(id) → the approval
	kindApprovalCall    = "approval-call"    // sha256(call)/created/sha256(id) → nothing
	kindApprovalTime    = "approval-time"    // created/sha256(id) → "p" while pending, else nothing
	kindApprovalPending = "approval-pending" // sha256(principal)/sha256(id) → nothing, while pending
	kindApprovalUnused  = "approval-unused"  // sha256(id) → nothing, while approved and not used
	kindClaim           = "claim"            // sha256(task) → nothing, on a lease of the claim's time
)

// ApprovalTTL is how long an approval and its index keys stay in etcd after its last write:
// past the longest timeout and use_within a rule may give (a day each), with days to spare for
// the console's list. The bbolt file keeps them for good; etcd is no archive (its records are).
const ApprovalTTL = 7 * 24 * time.Hour

// MaxApprovalBytes bounds an approval's value, well under the request size etcd accepts by
// default (1.5 MiB): a transaction carries it with the run's state.
const MaxApprovalBytes = 1 << 20

// ErrApprovalTooLarge is an approval whose value exceeds MaxApprovalBytes: nothing is written.
var ErrApprovalTooLarge = errors.New("convstate: approval exceeds the size etcd keeps")

// approvalsPage is how many index keys one read of a listing takes.
const approvalsPage = 256

// hashName is the hex sha256 of name, as the keys spell every name.
func (e *Etcd) hashName(name string) string {
	return e.key("", name)[len(e.keys)+1:]
}

// approvalIndexes are the index keys of the approval of m: by call, by time, pending under
// its principal, unused.
func (e *Etcd) approvalIndexes(m store.ApprovalMeta) (byCall, byTime, pending, unused string) {
	id := e.hashName(m.ID)
	created := fmt.Sprintf("%016x", uint64(m.Created.UnixNano()))
	return e.keys + kindApprovalCall + "/" + e.hashName(m.Call) + "/" + created + "/" + id,
		e.keys + kindApprovalTime + "/" + created + "/" + id,
		e.pendingPrefix(m.Principal) + id,
		e.keys + kindApprovalUnused + "/" + id
}

// pendingPrefix is the prefix of the pending index keys of principal.
func (e *Etcd) pendingPrefix(principal string) string {
	return e.keys + kindApprovalPending + "/" + e.hashName(principal) + "/"
}

// approvalWrite adds w to t: the compare of the approval's revision as read (absent for a new
// one), its value and index keys, and, for a new one Admit checks, the compare that no pending
// approval of its principal was written since they were read. A failed transaction is
// ErrApprovalChanged when the approval moved, else ErrConflict.
func (e *Etcd) approvalWrite(ctx context.Context, op string, t *txn, w *store.ApprovalWrite) error {
	if len(w.Value) > MaxApprovalBytes {
		return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrApprovalTooLarge, w.Meta.ID, len(w.Value), MaxApprovalBytes)
	}
	key := e.key(kindApproval, w.Meta.ID)
	cur, rev, err := e.get(ctx, op, key)
	if err != nil {
		return err
	}
	if !bytes.Equal(cur, w.Prev) || (w.Prev != nil && rev == 0) {
		return fmt.Errorf("%w: %s", store.ErrApprovalChanged, w.Meta.ID)
	}
	// rev is 0 for a new one: the key must still be absent.
	t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
	if w.Prev == nil && w.Admit != nil {
		pending, at, err := e.Approvals().under(ctx, e.pendingPrefix(w.Meta.Principal), w.Scan, false)
		if err != nil {
			return err
		}
		if err := w.Admit(pending); err != nil {
			return err
		}
		// Every key of the range unwritten since the read: another replica's new pending
		// approval of the principal fails this one, which is decided again on the new count.
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(e.pendingPrefix(w.Meta.Principal)), "<", at+1).WithPrefix())
	}
	byCall, byTime, pending, unused := e.approvalIndexes(w.Meta)
	t.put(key, w.Value, ApprovalTTL)
	t.put(byCall, nil, ApprovalTTL)
	mark := []byte(nil)
	if w.Meta.Pending {
		mark = []byte("p")
	}
	t.put(byTime, mark, ApprovalTTL)
	for _, ix := range []struct {
		key string
		on  bool
	}{{pending, w.Meta.Pending}, {unused, w.Meta.Unused}} {
		if ix.on {
			t.put(ix.key, nil, ApprovalTTL)
		} else {
			t.ops = append(t.ops, pendingOp{key: ix.key, del: true})
		}
	}
	t.els = append(t.els, clientv3.OpGet(key, clientv3.WithKeysOnly()))
	t.failed = func(resp *clientv3.TxnResponse) error {
		// The approval's read is the last of the else branch.
		rr := resp.Responses[len(resp.Responses)-1].GetResponseRange()
		now := int64(0)
		if kvs := rr.GetKvs(); len(kvs) > 0 {
			now = kvs[0].ModRevision
		}
		if now != rev {
			return fmt.Errorf("%w: %s", store.ErrApprovalChanged, w.Meta.ID)
		}
		return ErrConflict
	}
	return nil
}

// Write writes w in a transaction of its own (a decision or the sweep, which no record goes
// with): ErrApprovalChanged when the stored approval is not w.Prev, Admit's error when it
// refuses a new one, an *UnavailableError when etcd does not answer.
func (a *EtcdApprovals) Write(ctx context.Context, w *store.ApprovalWrite) error {
	for range maxPriorAttempts {
		t := &txn{}
		if err := a.e.approvalWrite(ctx, "approval", t, w); err != nil {
			return err
		}
		if err := a.e.commit(ctx, "approval", t); !errors.Is(err, ErrConflict) {
			return err
		}
		// Another pending approval of the principal was written: count again.
	}
	return a.e.unavailable("approval", errors.New("the principal's pending approvals kept changing"))
}

// Get returns the approval id, or nil.
func (a *EtcdApprovals) Get(ctx context.Context, id string) ([]byte, error) {
	b, _, err := a.e.get(ctx, "approval", a.e.key(kindApproval, id))
	return b, err
}

// ByCall returns the approvals of the call key, newest first, at most limit.
func (a *EtcdApprovals) ByCall(ctx context.Context, call string, limit int) ([][]byte, error) {
	out, _, err := a.under(ctx, a.e.keys+kindApprovalCall+"/"+a.e.hashName(call)+"/", limit, true)
	return out, err
}

// PendingOf returns the approvals of principal still pending (as their index says: one past
// its timeout stays there until it is marked expired), at most limit.
func (a *EtcdApprovals) PendingOf(ctx context.Context, principal string, limit int) ([][]byte, error) {
	out, _, err := a.under(ctx, a.e.pendingPrefix(principal), limit, false)
	return out, err
}

// under returns the approvals the index keys under prefix name, at most limit, in key order or,
// with descend, reversed; and the revision it read at.
func (a *EtcdApprovals) under(ctx context.Context, prefix string, limit int, descend bool) ([][]byte, int64, error) {
	resp, err := a.e.rangeKeys(ctx, prefix, clientv3.GetPrefixRangeEnd(prefix), 0, limit, descend)
	if err != nil {
		return nil, 0, err
	}
	out, err := a.values(ctx, resp.Header.Revision, resp.Kvs)
	return out, resp.Header.Revision, err
}

// Newest returns the approvals keep accepts, newest first, at most limit, among the newest
// store.MaxApprovalScan; pendingOnly keeps only the pending ones. Every page is read at the
// revision of the first.
func (a *EtcdApprovals) Newest(ctx context.Context, limit int, pendingOnly bool, keep func(value []byte) bool) ([][]byte, error) {
	prefix := a.e.keys + kindApprovalTime + "/"
	end := clientv3.GetPrefixRangeEnd(prefix)
	var out [][]byte
	rev := int64(0)
	for read := 0; len(out) < limit && read < store.MaxApprovalScan; {
		resp, err := a.e.rangeKeys(ctx, prefix, end, rev, min(approvalsPage, store.MaxApprovalScan-read), true)
		if err != nil {
			return nil, err
		}
		rev = resp.Header.Revision
		if len(resp.Kvs) == 0 {
			break
		}
		read += len(resp.Kvs)
		end = string(resp.Kvs[len(resp.Kvs)-1].Key) // the next page: the keys before it
		kvs := resp.Kvs
		if pendingOnly {
			kvs = nil
			for _, kv := range resp.Kvs {
				if string(kv.Value) == "p" {
					kvs = append(kvs, kv)
				}
			}
		}
		vals, err := a.values(ctx, rev, kvs)
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			if len(out) < limit && keep(v) {
				out = append(out, v)
			}
		}
		if !resp.More {
			break
		}
	}
	return out, nil
}

// Pending returns every pending approval, in no particular order.
func (a *EtcdApprovals) Pending(ctx context.Context) ([][]byte, error) {
	return a.indexed(ctx, a.e.keys+kindApprovalPending+"/")
}

// Unused returns every approval approved and not yet used, in no particular order.
func (a *EtcdApprovals) Unused(ctx context.Context) ([][]byte, error) {
	return a.indexed(ctx, a.e.keys+kindApprovalUnused+"/")
}

// indexed returns every approval an index key under prefix names, read page by page at the
// revision of the first.
func (a *EtcdApprovals) indexed(ctx context.Context, prefix string) ([][]byte, error) {
	var out [][]byte
	from, end, rev := prefix, clientv3.GetPrefixRangeEnd(prefix), int64(0)
	for {
		resp, err := a.e.rangeKeys(ctx, from, end, rev, approvalsPage, false)
		if err != nil {
			return nil, err
		}
		rev = resp.Header.Revision
		vals, err := a.values(ctx, rev, resp.Kvs)
		if err != nil {
			return nil, err
		}
		out = append(out, vals...)
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// rangeKeys reads the index keys in [from, end) at rev (0: the latest), at most limit (0: no
// bound), in key order or, with descend, reversed.
func (e *Etcd) rangeKeys(ctx context.Context, from, end string, rev int64, limit int, descend bool) (*clientv3.GetResponse, error) {
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(limit)), clientv3.WithRev(rev)}
	if descend {
		opts = append(opts, clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	}
	resp, err := e.do(ctx, "approval", clientv3.OpGet(from, opts...))
	return resp.Get(), err
}

// values reads, at rev, the approvals the index keys kvs name (each ends in sha256(id)), in
// their order; one gone since is left out.
func (a *EtcdApprovals) values(ctx context.Context, rev int64, kvs []*mvccpb.KeyValue) ([][]byte, error) {
	var out [][]byte
	for batch := range slices.Chunk(kvs, prefetchBatch) {
		ops := make([]clientv3.Op, len(batch))
		for j, kv := range batch {
			k := string(kv.Key)
			ops[j] = clientv3.OpGet(a.e.keys+kindApproval+"/"+k[strings.LastIndexByte(k, '/')+1:], clientv3.WithRev(rev))
		}
		answers, err := a.e.readAll(ctx, "approval", ops)
		if err != nil {
			return nil, err
		}
		for _, r := range answers {
			if got := r.GetResponseRange().GetKvs(); len(got) > 0 {
				out = append(out, got[0].Value)
			}
		}
	}
	return out, nil
}

// watchRetry is how long Watch waits before it watches again after etcd ended a watch.
const watchRetry = time.Second

// Watch calls changed at each change of an approval, by any replica (this one's too: a long
// poll woken twice reads twice), until ctx ends. A watch etcd ends is resumed from the
// revision after the last one seen; one whose revision was compacted meanwhile, or that could
// not be resumed, calls changed once (every long poll reads its approval afresh) and watches
// on from the present.
func (a *EtcdApprovals) Watch(ctx context.Context, changed func()) error {
	return a.watchFrom(ctx, 0, changed)
}

// watchFrom is Watch from revision next (0: the present).
func (a *EtcdApprovals) watchFrom(ctx context.Context, next int64, changed func()) error {
	prefix := a.e.keys + kindApproval + "/"
	for {
		if a.e.closed.Load() {
			return a.e.unavailable("approval", errStateClosed)
		}
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}
		if next > 0 {
			opts = append(opts, clientv3.WithRev(next))
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range a.e.cli.Watch(wctx, prefix, opts...) {
			if err := resp.Err(); err != nil {
				if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision != 0 {
					next = 0 // changes were lost: read afresh, watch from now
				}
				changed()
				break
			}
			if len(resp.Events) > 0 {
				changed()
			}
			next = resp.Header.Revision + 1
		}
		cancel()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(watchRetry):
		}
		// Whatever happened while nothing watched is read afresh.
		changed()
	}
}

// Claim reports whether this replica takes task (one webhook delivery, one sweep): the first
// to create its claim key does, and the key lives for ttl (whole seconds, at least).
func (a *EtcdApprovals) Claim(ctx context.Context, task string, ttl time.Duration) (bool, error) {
	key := a.e.key(kindClaim, task)
	t := &txn{cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}}
	t.put(key, nil, ttl)
	switch err := a.e.commit(ctx, "approval", t); {
	case errors.Is(err, ErrConflict):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
