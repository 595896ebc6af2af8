package nonce

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/store"
)

// Buckets of the bbolt backend.
//
// nonces: key = exp (8 bytes, seconds, big-endian, sign bit flipped so byte order is time
// order) ‖ jti, value = consumed-at (8 bytes, Unix nanoseconds).
//
// The expiry prefix is what keeps inserts fast: every new key lands at the right edge of the
// tree, among the last pages written, where a random-jti key would dirty a random page of a
// large tree on every insert. It also makes the entries that garbage collection removes a
// prefix range. A replay is the same signed token, so it carries the same exp and finds the
// same key; two different tokens that share a jti but not an exp are different verdicts, and a
// correct issuer never produces them (a jti is 128 random bits).
//
// The nonces bucket's sequence number counts its entries, so Len is O(1): the bucket header
// is rewritten by every commit that touches the bucket anyway.
//
// nonces_meta: "horizon" → the largest exp (8 bytes, same encoding) garbage collection has
// removed entries up to. Consume refuses every exp at or below it as expired, so a wall clock
// stepping backwards after a collection cannot make a forgotten jti consumable again. The
// price is paid by a clock that jumped forward and was corrected: verdicts expiring before the
// jumped time are refused as expired until the clock passes it, since once their entries are
// gone a refusal is the only answer that cannot let a replay through.
var (
	bucketNonces = []byte("nonces")
	bucketMeta   = []byte("nonces_meta")
	keyHorizon   = []byte("horizon")
)

// BoltOptions configure the bbolt backend. The zero value is usable.
type BoltOptions struct {
	// Skew is the clock skew the executor's verifier allows past exp; entries are kept until
	// exp + Skew. Zero means 5s, the executor's default clock_skew.
	Skew time.Duration
	// GCInterval is how often Run collects expired entries. Zero means one minute.
	GCInterval time.Duration
	// GCBatch caps the entries one collection commit deletes, so collection never holds the
	// writer long. Zero means 10,000.
	GCBatch int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Bolt is the bbolt Store, kept in a store.DB shared with the execution records.
type Bolt struct {
	db      *store.DB
	skew    time.Duration
	every   time.Duration
	gcBatch int
	now     func() time.Time
	closed  atomic.Bool
}

var _ Store = (*Bolt)(nil)

// NewBolt prepares db's nonce buckets. The Bolt does not own db: Close leaves it open.
func NewBolt(db *store.DB, opts BoltOptions) (*Bolt, error) {
	b := &Bolt{db: db, skew: opts.Skew, every: opts.GCInterval, gcBatch: opts.GCBatch, now: opts.Now}
	if b.skew <= 0 {
		b.skew = 5 * time.Second
	}
	if b.every <= 0 {
		b.every = time.Minute
	}
	if b.gcBatch <= 0 {
		b.gcBatch = 10_000
	}
	if b.now == nil {
		b.now = time.Now
	}
	// Bucket creation is a local file write that returns at the next commit; it has no caller
	// deadline to honour.
	err := db.Update(context.Background(), func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketNonces, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nonce: prepare buckets: %w", err)
	}
	return b, nil
}

// expSeconds is the key's expiry: exp in whole seconds, rounded up (exp claims are whole
// seconds already).
func expSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

func encodeSeconds(s int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(s)^(1<<63))
}

func decodeSeconds(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

// cutoff is the largest exp whose entries are no longer needed at now: exp + skew ≤ now.
func (b *Bolt) cutoff(now time.Time) int64 {
	return now.Add(-b.skew).Unix()
}

// ConsumeTx consumes jti inside tx, so the caller can record the execution's start in the same
// commit. It checks before it writes: on error, tx is unchanged. Errors match ErrReplayed,
// ErrExpired or ErrMalformed, or are a failure of tx itself.
func (b *Bolt) ConsumeTx(tx *bolt.Tx, jti string, expires time.Time) error {
	if err := checkJTI(jti, expires); err != nil {
		return err
	}
	nonces, meta := tx.Bucket(bucketNonces), tx.Bucket(bucketMeta)
	if nonces == nil || meta == nil {
		return errors.New("nonce: buckets missing: the file was not prepared by NewBolt")
	}
	now := b.now()
	exp := expSeconds(expires)
	horizon := b.cutoff(now)
	if h := meta.Get(keyHorizon); h != nil {
		horizon = max(horizon, decodeSeconds(h))
	}
	if exp <= horizon {
		return fmt.Errorf("%w: exp %d, entries kept only after %d", ErrExpired, exp, horizon)
	}
	key := make([]byte, 0, 8+len(jti))
	key = append(append(key, encodeSeconds(exp)...), jti...)
	if nonces.Get(key) != nil {
		return ErrReplayed
	}
	if err := nonces.Put(key, binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano()))); err != nil {
		return fmt.Errorf("nonce: write: %w", err)
	}
	if err := nonces.SetSequence(nonces.Sequence() + 1); err != nil {
		return fmt.Errorf("nonce: count: %w", err)
	}
	return nil
}

// Spent implements Store: one read of jti's key.
func (b *Bolt) Spent(ctx context.Context, jti string, expires time.Time) error {
	if err := checkJTI(jti, expires); err != nil {
		return err
	}
	if b.closed.Load() {
		return &UnavailableError{Backend: "bbolt", Err: store.ErrClosed}
	}
	key := append(encodeSeconds(expSeconds(expires)), jti...)
	var spent bool
	if err := b.db.View(ctx, func(tx *bolt.Tx) error {
		if nonces := tx.Bucket(bucketNonces); nonces != nil {
			spent = nonces.Get(key) != nil
		}
		return nil
	}); err != nil {
		return &UnavailableError{Backend: "bbolt", Err: err}
	}
	if spent {
		return ErrReplayed
	}
	return nil
}

// Consume implements Store in its own (group) commit.
func (b *Bolt) Consume(ctx context.Context, jti string, expires time.Time) error {
	if b.closed.Load() {
		return &UnavailableError{Backend: "bbolt", Err: store.ErrClosed}
	}
	err := b.db.Update(ctx, func(tx *bolt.Tx) error { return b.ConsumeTx(tx, jti, expires) })
	switch {
	case err == nil, errors.Is(err, ErrReplayed), errors.Is(err, ErrExpired), errors.Is(err, ErrMalformed):
		return err
	default:
		return &UnavailableError{Backend: "bbolt", Err: err}
	}
}

// Len implements Store.
func (b *Bolt) Len(ctx context.Context) (int, error) {
	var n int
	err := b.db.View(ctx, func(tx *bolt.Tx) error {
		if nonces := tx.Bucket(bucketNonces); nonces != nil {
			n = int(nonces.Sequence())
		}
		return nil
	})
	if err != nil {
		return 0, &UnavailableError{Backend: "bbolt", Err: err}
	}
	return n, nil
}

// Close implements Store. It leaves the shared store.DB open; Run stops with its context.
func (b *Bolt) Close() error {
	b.closed.Store(true)
	return nil
}

// Collect deletes every entry no longer needed (exp + skew ≤ now), in commits of at most
// GCBatch deletions, and returns how many it deleted.
func (b *Bolt) Collect(ctx context.Context) (int, error) {
	cutoff := b.cutoff(b.now())
	limit := encodeSeconds(cutoff)
	total := 0
	for {
		n := 0
		err := b.db.Update(ctx, func(tx *bolt.Tx) error {
			n = 0
			meta, nonces := tx.Bucket(bucketMeta), tx.Bucket(bucketNonces)
			if h := meta.Get(keyHorizon); h == nil || decodeSeconds(h) < cutoff {
				if err := meta.Put(keyHorizon, limit); err != nil {
					return err
				}
			}
			// Collect first: deleting under a bbolt cursor can skip keys.
			var doomed [][]byte
			c := nonces.Cursor()
			for k, _ := c.First(); k != nil && len(doomed) < b.gcBatch && bytes.Compare(k[:8], limit) <= 0; k, _ = c.Next() {
				doomed = append(doomed, bytes.Clone(k))
			}
			for _, k := range doomed {
				if err := nonces.Delete(k); err != nil {
					return err
				}
			}
			n = len(doomed)
			return nonces.SetSequence(nonces.Sequence() - uint64(n))
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("nonce: collect: %w", err)
		}
		if n < b.gcBatch {
			return total, nil
		}
	}
}

// Run collects expired entries at once and then every GCInterval until ctx ends, when it
// returns ctx.Err(). It returns early with the error of a failed collection (a closed store
// among them).
func (b *Bolt) Run(ctx context.Context) error {
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		if _, err := b.Collect(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
