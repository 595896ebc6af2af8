package store

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The outbox is a transactional log of record changes for shipping (package ship): when
// Options.Outbox is set, every commit that writes a decision record or writes or finishes an
// execution record also appends an entry naming that record, in the same transaction. A
// shipper reads entries after its cursor, sends the records as they are stored when read, and
// moves its cursor forward in this same file; so a record committed is shipped even when the
// process dies right after the commit, and at most the batch in flight at a crash is sent again.
//
// Each sink has its own cursor. Entries every cursor has passed are pruned. The outbox never
// makes a record write fail for lack of a shipper: Prune with a bound drops the oldest entries
// (and says how many) when a sink lags too far, so a sink outage costs records shipped, never a
// decision or an execution.
var (
	// outbox: sequence (8 bytes, big endian) → kind byte ‖ record id.
	bucketOutbox = []byte("outbox")
	// outbox_cursors: sink name → last sequence shipped (8 bytes).
	bucketOutboxCursors = []byte("outbox_cursors")
)

// Kinds of outbox entries.
const (
	OutboxDecision  = 'd'
	OutboxExecution = 'e'
)

// An OutboxEntry is one record change, with the record as stored when it was read.
type OutboxEntry struct {
	Seq      uint64
	Kind     byte   // OutboxDecision or OutboxExecution
	RecordID string // the record's id
	// Record is the record's JSON (a decision record, or an execution record). It is nil when
	// the record is no longer stored.
	Record []byte
}

// Outbox is the record-change log of a DB opened with Options.Outbox.
type Outbox struct{ db *DB }

// Outbox returns db's record-change log.
func (db *DB) Outbox() *Outbox { return &Outbox{db: db} }

// note appends an entry for a record change inside tx, when the outbox is on.
func (db *DB) note(tx *bolt.Tx, kind byte, recordID string) error {
	if !db.outbox {
		return nil
	}
	b := tx.Bucket(bucketOutbox)
	seq, err := b.NextSequence()
	if err != nil {
		return fmt.Errorf("store: outbox sequence: %w", err)
	}
	val := make([]byte, 0, 1+len(recordID))
	val = append(val, kind)
	val = append(val, recordID...)
	if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), val); err != nil {
		return fmt.Errorf("store: outbox entry for %s: %w", recordID, err)
	}
	return nil
}

// Read returns up to limit entries after sequence after, oldest first, each with its record.
func (o *Outbox) Read(ctx context.Context, after uint64, limit int) ([]OutboxEntry, error) {
	var out []OutboxEntry
	err := o.db.View(ctx, func(tx *bolt.Tx) error {
		out = out[:0]
		c := tx.Bucket(bucketOutbox).Cursor()
		from := binary.BigEndian.AppendUint64(nil, after+1)
		for k, v := c.Seek(from); k != nil && len(out) < limit; k, v = c.Next() {
			if len(k) != 8 || len(v) < 1 {
				return fmt.Errorf("%w: outbox entry %x", ErrCorrupt, k)
			}
			e := OutboxEntry{Seq: binary.BigEndian.Uint64(k), Kind: v[0], RecordID: string(v[1:])}
			switch e.Kind {
			case OutboxDecision:
				if val := tx.Bucket(bucketDecisions).Get(v[1:]); val != nil {
					d, err := decodeDecision(e.RecordID, val)
					if err != nil {
						return err
					}
					e.Record = append([]byte(nil), d.Record...)
				}
			case OutboxExecution:
				if val := tx.Bucket(bucketExecutions).Get(v[1:]); val != nil {
					e.Record = append([]byte(nil), val...)
				}
			default:
				return fmt.Errorf("%w: outbox entry %d has kind %q", ErrCorrupt, e.Seq, e.Kind)
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// Last returns the sequence of the newest entry ever appended (0 if none).
func (o *Outbox) Last(ctx context.Context) (uint64, error) {
	var seq uint64
	err := o.db.View(ctx, func(tx *bolt.Tx) error {
		seq = tx.Bucket(bucketOutbox).Sequence()
		return nil
	})
	return seq, err
}

// Cursor returns the last sequence shipped to sink (0 if none yet).
func (o *Outbox) Cursor(ctx context.Context, sink string) (uint64, error) {
	var seq uint64
	err := o.db.View(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketOutboxCursors).Get([]byte(sink))
		switch {
		case v == nil:
		case len(v) != 8:
			return fmt.Errorf("%w: outbox cursor of %s", ErrCorrupt, sink)
		default:
			seq = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return seq, err
}

// Advance moves sink's cursor to seq (never backwards) and prunes entries every cursor among
// sinks has passed. sinks names every sink configured now; cursors of sinks no longer
// configured are deleted, so a removed sink does not keep entries forever.
func (o *Outbox) Advance(ctx context.Context, sink string, seq uint64, sinks []string) error {
	return o.db.Update(ctx, func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucketOutboxCursors)
		if v := cur.Get([]byte(sink)); len(v) == 8 && binary.BigEndian.Uint64(v) >= seq {
			return nil
		}
		if err := cur.Put([]byte(sink), binary.BigEndian.AppendUint64(nil, seq)); err != nil {
			return fmt.Errorf("store: outbox cursor of %s: %w", sink, err)
		}
		return pruneOutbox(tx, sinks)
	})
}

// pruneOutbox deletes the cursors of sinks not in sinks, then every entry at or below the
// smallest remaining cursor.
func pruneOutbox(tx *bolt.Tx, sinks []string) error {
	cur := tx.Bucket(bucketOutboxCursors)
	keep := map[string]bool{}
	for _, s := range sinks {
		keep[s] = true
	}
	var stale [][]byte
	low, seen := uint64(0), 0
	err := cur.ForEach(func(k, v []byte) error {
		if !keep[string(k)] {
			stale = append(stale, append([]byte(nil), k...))
			return nil
		}
		if len(v) != 8 {
			return fmt.Errorf("%w: outbox cursor of %s", ErrCorrupt, k)
		}
		if s := binary.BigEndian.Uint64(v); seen == 0 || s < low {
			low = s
		}
		seen++
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range stale {
		if err := cur.Delete(k); err != nil {
			return fmt.Errorf("store: outbox cursor %s: %w", k, err)
		}
	}
	if seen < len(keep) {
		return nil // a configured sink has shipped nothing yet: its entries are all still due
	}
	c := tx.Bucket(bucketOutbox).Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= low; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return fmt.Errorf("store: prune outbox: %w", err)
		}
	}
	return nil
}
