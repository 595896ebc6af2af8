package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Buckets of verdictd's console approvals.
var (
	// approvals: approval id → the approval as its owner encodes it.
	bucketApprovals = []byte("approvals")
	// approvals_by_call: len-prefixed call key ‖ created (8 bytes) ‖ approval id.
	bucketApprovalsByCall = []byte("approvals_by_call")
	// approvals_by_time: created (8 bytes) ‖ approval id.
	bucketApprovalsByTime = []byte("approvals_by_time")
	// approvals_pending: the id of every approval still pending → nothing.
	bucketApprovalsPending = []byte("approvals_pending")
	// approvals_pending_by_principal: len-prefixed principal ‖ approval id of every approval
	// still pending → nothing, so that a principal's pending approvals can be bounded.
	bucketApprovalsPendingByPrincipal = []byte("approvals_pending_by_principal")
	// approvals_unused: the id of every approval approved and not yet used → nothing, so that
	// the approvals left unused past their use-by time can be found without a walk over all.
	bucketApprovalsUnused = []byte("approvals_unused")
)

// MaxApprovalScan bounds how many approvals one listing reads, whatever it keeps: a listing
// is an answer for a person, never a walk over the whole history.
const MaxApprovalScan = 10_000

// Approvals keeps verdictd's console approvals beside its decision records, so that a record
// and the approval it creates or acts on are one commit: it is the Keeper of package
// approvals, whose encodings it holds as opaque values. Each is indexed by the call it belongs
// to and by its creation time, and the pending ones and the approved ones not yet used are
// listed apart.
type Approvals struct{ db *DB }

// Approvals returns the approvals of db.
func (db *DB) Approvals() *Approvals { return &Approvals{db: db} }

// ApprovalMeta is what the indexes of an approval hold: its id, the key of the call it
// belongs to, the principal of that call, when it was created, whether it is still pending,
// and whether it is approved and not yet used.
type ApprovalMeta struct {
	ID        string
	Call      string
	Principal string
	Created   time.Time
	Pending   bool
	Unused    bool
}

// putTx stores an approval, new or updated, in tx. An update keeps the id, call and creation
// time of the stored one.
func (a *Approvals) putTx(tx *bolt.Tx, m ApprovalMeta, value []byte) error {
	id := []byte(m.ID)
	if err := tx.Bucket(bucketApprovals).Put(id, value); err != nil {
		return err
	}
	t := timeKey(m.Created)
	if err := tx.Bucket(bucketApprovalsByCall).Put(slices.Concat(lenPrefixed(m.Call), t, id), nil); err != nil {
		return err
	}
	if err := tx.Bucket(bucketApprovalsByTime).Put(slices.Concat(t, id), nil); err != nil {
		return err
	}
	if err := putOrDelete(tx.Bucket(bucketApprovalsUnused), id, m.Unused); err != nil {
		return err
	}
	byPrincipal := slices.Concat(lenPrefixed(m.Principal), id)
	if err := putOrDelete(tx.Bucket(bucketApprovalsPendingByPrincipal), byPrincipal, m.Pending); err != nil {
		return err
	}
	return putOrDelete(tx.Bucket(bucketApprovalsPending), id, m.Pending)
}

// putOrDelete keeps key in the index b while on, and drops it otherwise.
func putOrDelete(b *bolt.Bucket, key []byte, on bool) error {
	if on {
		return b.Put(key, nil)
	}
	return b.Delete(key)
}

// ApprovalWrite is an approval written with the decision record that creates or uses it, as
// a compare and set: Value replaces the stored approval only while that is still Prev (nil:
// none is stored), so that a decision that landed since the approval was read is never
// overwritten.
type ApprovalWrite struct {
	Meta  ApprovalMeta
	Value []byte
	Prev  []byte
	// Admit is given, for a new approval, the approvals of its principal still pending as the
	// transaction holds them (at most Scan: PendingOfTx), and refuses one too many.
	Admit func(pending [][]byte) error
	Scan  int
}

// WriteTx writes w in tx, or nothing: it fails with ErrApprovalChanged when the stored
// approval is not w.Prev, and with Admit's error when Admit refuses a new one. A nil w writes
// nothing.
func (a *Approvals) WriteTx(tx *bolt.Tx, w *ApprovalWrite) error {
	if w == nil {
		return nil
	}
	if cur := tx.Bucket(bucketApprovals).Get([]byte(w.Meta.ID)); !bytes.Equal(cur, w.Prev) {
		return fmt.Errorf("%w: %s", ErrApprovalChanged, w.Meta.ID)
	}
	if w.Prev == nil && w.Admit != nil {
		if err := w.Admit(a.PendingOfTx(tx, w.Meta.Principal, w.Scan)); err != nil {
			return err
		}
	}
	return a.putTx(tx, w.Meta, w.Value)
}

// Write writes w in a transaction of its own, as WriteTx: a decision or a sweep, which no
// record goes with.
func (a *Approvals) Write(ctx context.Context, w *ApprovalWrite) error {
	return a.db.Update(ctx, func(tx *bolt.Tx) error { return a.WriteTx(tx, w) })
}

// Watch returns at once: the file is this process's alone (bbolt locks it), so no other
// process changes an approval it would have to tell of.
func (a *Approvals) Watch(context.Context, func()) error { return nil }

// Claim gives every task to this process, the file's only one.
func (a *Approvals) Claim(context.Context, string, time.Duration) (bool, error) { return true, nil }

// PendingOf returns the approvals of principal still pending, as PendingOfTx.
func (a *Approvals) PendingOf(ctx context.Context, principal string, limit int) ([][]byte, error) {
	var out [][]byte
	err := a.db.View(ctx, func(tx *bolt.Tx) error {
		out = a.PendingOfTx(tx, principal, limit)
		return nil
	})
	return out, err
}

// PendingOfTx returns, in tx, the approvals of principal still pending (as their index says:
// one past its timeout stays there until it is marked expired), at most limit.
func (a *Approvals) PendingOfTx(tx *bolt.Tx, principal string, limit int) [][]byte {
	prefix := lenPrefixed(principal)
	vals := tx.Bucket(bucketApprovals)
	var out [][]byte
	c := tx.Bucket(bucketApprovalsPendingByPrincipal).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, _ = c.Next() {
		if v := vals.Get(k[len(prefix):]); v != nil {
			out = append(out, bytes.Clone(v))
		}
	}
	return out
}

// Get returns the approval id, or nil when none is stored.
func (a *Approvals) Get(ctx context.Context, id string) ([]byte, error) {
	var out []byte
	err := a.db.View(ctx, func(tx *bolt.Tx) error {
		out = bytes.Clone(tx.Bucket(bucketApprovals).Get([]byte(id)))
		return nil
	})
	return out, err
}

// ByCall returns the approvals of the call key, newest first, at most limit.
func (a *Approvals) ByCall(ctx context.Context, call string, limit int) ([][]byte, error) {
	prefix := lenPrefixed(call)
	var out [][]byte
	err := a.db.View(ctx, func(tx *bolt.Tx) error {
		out = out[:0]
		vals := tx.Bucket(bucketApprovals)
		c := tx.Bucket(bucketApprovalsByCall).Cursor()
		// The last key with the prefix: seek past it, then step back.
		k, _ := c.Seek(append(bytes.Clone(prefix), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, _ = c.Prev() {
			if v := vals.Get(k[len(prefix)+8:]); v != nil {
				out = append(out, bytes.Clone(v))
			}
		}
		return nil
	})
	return out, err
}

// Newest returns the approvals keep accepts, newest first, at most limit, among the newest
// MaxApprovalScan; pendingOnly keeps only the pending ones.
func (a *Approvals) Newest(ctx context.Context, limit int, pendingOnly bool, keep func(value []byte) bool) ([][]byte, error) {
	var out [][]byte
	err := a.db.View(ctx, func(tx *bolt.Tx) error {
		out = out[:0]
		vals, pending := tx.Bucket(bucketApprovals), tx.Bucket(bucketApprovalsPending)
		c := tx.Bucket(bucketApprovalsByTime).Cursor()
		read := 0
		for k, _ := c.Last(); k != nil && len(out) < limit && read < MaxApprovalScan; k, _ = c.Prev() {
			read++
			id := k[8:]
			if pendingOnly && pending.Get(id) == nil {
				continue
			}
			if v := vals.Get(id); v != nil && keep(v) {
				out = append(out, bytes.Clone(v))
			}
		}
		return nil
	})
	return out, err
}

// Pending returns every pending approval, in no particular order.
func (a *Approvals) Pending(ctx context.Context) ([][]byte, error) {
	return a.indexed(ctx, bucketApprovalsPending)
}

// Unused returns every approval approved and not yet used, in no particular order.
func (a *Approvals) Unused(ctx context.Context) ([][]byte, error) {
	return a.indexed(ctx, bucketApprovalsUnused)
}

// indexed returns every approval whose id the index bucket holds, in no particular order.
func (a *Approvals) indexed(ctx context.Context, index []byte) ([][]byte, error) {
	var out [][]byte
	err := a.db.View(ctx, func(tx *bolt.Tx) error {
		out = out[:0]
		vals := tx.Bucket(bucketApprovals)
		return tx.Bucket(index).ForEach(func(k, _ []byte) error {
			if v := vals.Get(k); v != nil {
				out = append(out, bytes.Clone(v))
			}
			return nil
		})
	})
	return out, err
}
