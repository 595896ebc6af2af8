package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"math"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Buckets. Each index lives in its own bucket and is written in the same transaction as the
// record it points to; index values are empty, the key carries everything.
var (
	bucketMeta  = []byte("meta")
	keyFormat   = []byte("format")
	keyInstance = []byte("instance") // FileID's value

	// executions: record id → execution JSON.
	bucketExecutions = []byte("executions")
	// executions_by_time: started_at (8 bytes) ‖ record id.
	bucketExecutionsByTime = []byte("executions_by_time")
	// executions_by_verdict: len-prefixed verdict id ‖ record id.
	bucketExecutionsByVerdict = []byte("executions_by_verdict")
	// executions_started: record id of every execution still in the started state.
	bucketExecutionsStarted = []byte("executions_started")

	// decisions: record id → encoded DecisionMeta ‖ decision record JSON.
	bucketDecisions = []byte("decisions")
	// decisions_by_time: time (8 bytes) ‖ record id.
	bucketDecisionsByTime = []byte("decisions_by_time")
	// decisions_by_action_key: len-prefixed action key ‖ time (8 bytes) ‖ record id.
	bucketDecisionsByActionKey = []byte("decisions_by_action_key")
	// decisions_by_verdict: verdict id → record id (a verdict id is issued once).
	bucketDecisionsByVerdict = []byte("decisions_by_verdict")

	ownedBuckets = [][]byte{
		bucketExecutions, bucketExecutionsByTime, bucketExecutionsByVerdict, bucketExecutionsStarted,
		bucketDecisions, bucketDecisionsByTime, bucketDecisionsByActionKey, bucketDecisionsByVerdict,
		bucketOutbox, bucketOutboxCursors,
		bucketApprovals, bucketApprovalsByCall, bucketApprovalsByTime, bucketApprovalsPending,
		bucketApprovalsPendingByPrincipal, bucketApprovalsUnused,
	}
)

// scanChunk is how many records an iteration copies out of one read transaction.
const scanChunk = 256

// timeKey encodes t so that byte order is time order, before 1970 included.
func timeKey(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, timeBits(t))
}

// timeBits is the 8-byte time index value of t. Nanoseconds since 1970 fit in an int64 from
// 1677 to 2262 only (UnixNano wraps outside), so a time outside that range is clamped to the
// nearest end: a query from a far-future time (since=2999-01-01) asks for nothing, not for
// everything.
func timeBits(t time.Time) uint64 {
	n := t.UnixNano()
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		n = math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		n = math.MaxInt64
	}
	return uint64(n) ^ (1 << 63)
}

// lenPrefixed encodes s so that no value of s is a prefix of another's encoding: a lookup by
// one action key never matches a longer one that starts with it.
func lenPrefixed(s string) []byte {
	b := binary.AppendUvarint(make([]byte, 0, len(s)+2), uint64(len(s)))
	return append(b, s...)
}

// scan walks the keys of bucket that start with prefix, from the first key ≥ from, in
// chunks of scanChunk read transactions. For each key, load returns the value to hand to
// visit (nil skips the key); visit runs outside any transaction. Both get copies they may keep.
func (db *DB) scan(ctx context.Context, bucket, prefix, from []byte,
	load func(tx *bolt.Tx, key []byte) ([]byte, error),
	visit func(key, val []byte) error) error {
	type item struct{ key, val []byte }
	var after []byte
	for {
		items := make([]item, 0, scanChunk)
		err := db.View(ctx, func(tx *bolt.Tx) error {
			b := tx.Bucket(bucket)
			if b == nil {
				return nil
			}
			c := b.Cursor()
			var k []byte
			if after == nil {
				k, _ = c.Seek(from)
			} else if k, _ = c.Seek(after); bytes.Equal(k, after) {
				k, _ = c.Next()
			}
			for ; k != nil && bytes.HasPrefix(k, prefix) && len(items) < scanChunk; k, _ = c.Next() {
				v, err := load(tx, k)
				if err != nil {
					return err
				}
				items = append(items, item{bytes.Clone(k), bytes.Clone(v)})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := ctx.Err(); err != nil {
				return err
			}
			if it.val == nil {
				continue
			}
			if err := visit(it.key, it.val); err != nil {
				return err
			}
		}
		if len(items) < scanChunk {
			return nil
		}
		after = items[len(items)-1].key
	}
}

// crockford is the ULID alphabet: sortable, no I, L, O or U.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewRecordID returns prefix followed by a ULID: 48 bits of milliseconds since 1970 and 80
// random bits from crypto/rand, in Crockford base32. Ids of one prefix sort by creation time
// (to the millisecond) and never collide in practice, across processes too.
func NewRecordID(prefix string, now time.Time) string {
	var raw [16]byte
	putMillis(raw[:6], uint64(now.UnixMilli()))
	rand.Read(raw[6:]) // never fails: crypto/rand crashes the program rather than return an error
	return encodeULID(prefix, raw)
}

func putMillis(b []byte, ms uint64) {
	b[0], b[1], b[2] = byte(ms>>40), byte(ms>>32), byte(ms>>24)
	b[3], b[4], b[5] = byte(ms>>16), byte(ms>>8), byte(ms)
}

// RecordIDs makes record ids that are strictly increasing within one process: a total order
// of everything the process decides, which NewRecordID alone does not give two ids of the same
// millisecond. An id of a later millisecond is a fresh NewRecordID; an id in the same
// millisecond as the previous one, or in an earlier one (the clock stepped back), keeps the
// previous id's time and adds one to its 80 random bits (the ULID monotonic rule). Ids of
// different processes in the same millisecond still sort by their random bits: an arbitrary
// but fixed order. The zero value is ready to use.
type RecordIDs struct {
	mu   sync.Mutex
	last [16]byte
}

// Next returns the next id of prefix at now.
func (g *RecordIDs) Next(prefix string, now time.Time) string {
	var fresh [6]byte
	putMillis(fresh[:], uint64(max(now.UnixMilli(), 0)))
	g.mu.Lock()
	defer g.mu.Unlock()
	if bytes.Compare(fresh[:], g.last[:6]) > 0 {
		copy(g.last[:6], fresh[:])
		rand.Read(g.last[6:])
		return encodeULID(prefix, g.last)
	}
	// Add one to the random tail; should it ever wrap, the time part takes the carry, so the
	// id still sorts after the previous one.
	for i := 15; i >= 0; i-- {
		g.last[i]++
		if g.last[i] != 0 {
			break
		}
	}
	return encodeULID(prefix, g.last)
}

// encodeULID writes raw in Crockford base32 after prefix.
func encodeULID(prefix string, raw [16]byte) string {
	hi := binary.BigEndian.Uint64(raw[:8])
	lo := binary.BigEndian.Uint64(raw[8:])
	out := make([]byte, len(prefix)+26)
	copy(out, prefix)
	enc := out[len(prefix):]
	// 128 bits as 26 five-bit digits, most significant first (the first digit holds 3 bits).
	for i := 25; i >= 0; i-- {
		enc[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}
