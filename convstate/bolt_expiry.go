package convstate

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/store"
)

// The bbolt state keeps, per conversation with counters, the time of its last change
// (bucketTouched) and the same pair in time order (bucketExpiry), so that the conversations
// idle past the TTL are a prefix range that Collect removes, and a principal's live
// conversations are a key range (principalPrefix) that a new one is counted against.
// Question bindings, deferred uses and baselines are not conversation state: they keep their
// own lifetimes.

// touchedAt decodes a bucketTouched value.
func touchedAt(v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("conversation change time: %w", store.ErrCorrupt)
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

func expiryKey(ms int64, conv []byte) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(ms)), conv...)
}

// cutoff is the newest change time of an expired conversation at now.
func (s *Bolt) cutoff() int64 { return s.now().Add(-s.ttl).UnixMilli() }

// liveTx reports whether conversation key conv is live in tx.
func (s *Bolt) liveTx(tx *bolt.Tx, conv []byte, cutoff int64) (bool, error) {
	v := tx.Bucket(bucketTouched).Get(conv)
	if v == nil {
		return false, nil
	}
	ms, err := touchedAt(v)
	return err == nil && ms > cutoff, err
}

// admitTx refuses with ErrConversationLimit a new conversation c (not live in tx) whose
// principal already holds s.max live conversations.
func (s *Bolt) admitTx(tx *bolt.Tx, c gates.Conversation, cutoff int64) error {
	if s.max <= 0 {
		return nil
	}
	if live, err := s.liveTx(tx, convKey(c), cutoff); err != nil || live {
		return err
	}
	prefix := principalPrefix(c.Principal)
	n := 0
	cur := tx.Bucket(bucketTouched).Cursor()
	for k, v := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = cur.Next() {
		ms, err := touchedAt(v)
		if err != nil {
			return err
		}
		if ms > cutoff {
			if n++; n >= s.max {
				return ErrConversationLimit
			}
		}
	}
	return nil
}

// Admit returns ErrConversationLimit if c is not a live conversation and its principal holds
// as many live conversations as allowed. The commit that starts c checks again.
func (s *Bolt) Admit(ctx context.Context, c gates.Conversation) error {
	cutoff := s.cutoff()
	return s.db.View(ctx, func(tx *bolt.Tx) error { return s.admitTx(tx, c, cutoff) })
}

// touchTx records a change of c now, within its principal's bound.
func (s *Bolt) touchTx(tx *bolt.Tx, c gates.Conversation) error {
	now := s.now()
	cutoff := now.Add(-s.ttl).UnixMilli()
	if err := s.admitTx(tx, c, cutoff); err != nil {
		return err
	}
	conv := convKey(c)
	tb, eb := tx.Bucket(bucketTouched), tx.Bucket(bucketExpiry)
	if v := tb.Get(conv); v != nil {
		ms, err := touchedAt(v)
		if err != nil {
			return err
		}
		if ms <= cutoff {
			// Expired since the run read it (or never read by the run): what the run did not
			// write is forgotten, as the collector would have.
			if err := forgetTx(tx, conv); err != nil {
				return err
			}
		} else if err := eb.Delete(expiryKey(ms, conv)); err != nil {
			return err
		}
	}
	ms := now.UnixMilli()
	if err := tb.Put(conv, binary.BigEndian.AppendUint64(nil, uint64(ms))); err != nil {
		return err
	}
	return eb.Put(expiryKey(ms, conv), nil)
}

// forgetTx deletes conversation key conv: its counters, value ask counts and change time.
func forgetTx(tx *bolt.Tx, conv []byte) error {
	if err := tx.Bucket(bucketGate1).Delete(conv); err != nil {
		return err
	}
	if err := deletePrefix(tx.Bucket(bucketAsks), append(bytes.Clone(conv), 0)); err != nil {
		return err
	}
	tb := tx.Bucket(bucketTouched)
	if v := tb.Get(conv); v != nil {
		if ms, err := touchedAt(v); err == nil {
			if err := tx.Bucket(bucketExpiry).Delete(expiryKey(ms, conv)); err != nil {
				return err
			}
		}
	}
	return tb.Delete(conv)
}

// backfillTx gives every stored conversation without a change time the present one.
func (s *Bolt) backfillTx(tx *bolt.Tx) error {
	tb := tx.Bucket(bucketTouched)
	ms := s.now().UnixMilli()
	var missing [][]byte
	seen := map[string]bool{}
	note := func(conv []byte) {
		if tb.Get(conv) == nil && !seen[string(conv)] {
			seen[string(conv)] = true
			missing = append(missing, bytes.Clone(conv))
		}
	}
	if err := tx.Bucket(bucketGate1).ForEach(func(k, _ []byte) error { note(k); return nil }); err != nil {
		return err
	}
	err := tx.Bucket(bucketAsks).ForEach(func(k, _ []byte) error {
		if i := bytes.IndexByte(k, 0); i > 0 {
			note(k[:i])
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, conv := range missing {
		if err := tb.Put(conv, binary.BigEndian.AppendUint64(nil, uint64(ms))); err != nil {
			return err
		}
		if err := tx.Bucket(bucketExpiry).Put(expiryKey(ms, conv), nil); err != nil {
			return err
		}
	}
	return nil
}

// Collect forgets every conversation unchanged for the TTL, in commits of at most GCBatch
// conversations, and returns how many it forgot.
func (s *Bolt) Collect(ctx context.Context) (int, error) {
	cutoff := s.cutoff()
	total := 0
	for {
		n := 0
		err := s.db.Update(ctx, func(tx *bolt.Tx) error {
			n = 0
			// Collect first: deleting under a bbolt cursor can skip keys.
			var doomed [][]byte
			c := tx.Bucket(bucketExpiry).Cursor()
			for k, _ := c.First(); k != nil && len(doomed) < s.gcBatch; k, _ = c.Next() {
				if len(k) < 8 || int64(binary.BigEndian.Uint64(k[:8])) > cutoff {
					break
				}
				doomed = append(doomed, bytes.Clone(k))
			}
			for _, k := range doomed {
				conv := k[8:]
				// The index entry of a conversation changed since is stale: only it goes.
				if v := tx.Bucket(bucketTouched).Get(conv); v != nil && bytes.Equal(v, k[:8]) {
					if err := forgetTx(tx, conv); err != nil {
						return err
					}
				}
				if err := tx.Bucket(bucketExpiry).Delete(k); err != nil {
					return err
				}
			}
			n = len(doomed)
			return nil
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("convstate: collect: %w", err)
		}
		if n < s.gcBatch {
			return total, nil
		}
	}
}

// CollectInterval is how often Collect should run: the GCInterval option.
func (s *Bolt) CollectInterval() time.Duration { return s.every }

// check makes the run see c afresh if c expired and the collector has not yet forgotten it:
// the TTL holds to the millisecond whenever collection runs.
func (r *boltRun) check(ctx context.Context, c gates.Conversation) error {
	if r.checked[c] {
		return nil
	}
	r.checked[c] = true
	if r.reset[c] {
		return nil
	}
	cutoff := r.st.cutoff()
	var expired bool
	err := r.st.db.View(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTouched).Get(convKey(c))
		if v == nil {
			return nil
		}
		ms, err := touchedAt(v)
		expired = err == nil && ms <= cutoff
		return err
	})
	if err != nil {
		return err
	}
	if expired {
		r.reset[c] = true
	}
	return nil
}

// write notes that the run sets counters of c.
func (r *boltRun) write(c gates.Conversation) {
	r.written[c] = true
}
