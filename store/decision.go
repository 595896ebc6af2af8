package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	bolt "go.etcd.io/bbolt"
)

// DecisionMeta is what the store indexes a decision record by. verdictd supplies it beside the
// record's JSON, so the store never parses records on the write path.
type DecisionMeta struct {
	RecordID  string
	ActionKey string // "" for a record without an action key (Gate 1 failed before one existed)
	Outcome   string
	VerdictID string // "" unless a verdict was issued
	Time      time.Time
}

// Decision is a stored decision record: its index metadata and its JSON, byte for byte as
// appended (compacted).
type Decision struct {
	DecisionMeta
	Record json.RawMessage
}

// Decisions are verdictd's decision records, stored append-only in their DB's file.
type Decisions struct{ db *DB }

// Decisions returns the decision records of db.
func (db *DB) Decisions() *Decisions { return &Decisions{db: db} }

// Append stores a new decision record in its own commit. See AppendTx.
func (s *Decisions) Append(ctx context.Context, meta DecisionMeta, record []byte) error {
	d, err := EncodeDecision(meta, record)
	if err != nil {
		return err
	}
	return s.db.Update(ctx, func(tx *bolt.Tx) error { return s.AppendEncodedTx(tx, d) })
}

// AppendTx stores a new decision record inside tx, with its indexes, so that verdictd can
// write it in the same commit as the state the run changed. record must be one JSON object; it
// is stored compacted, so an export holds it on one line. A record id or verdict id that is
// already stored is refused with ErrExists: records are append-only and a verdict is issued
// once. It checks before it writes: on error, tx is unchanged.
func (s *Decisions) AppendTx(tx *bolt.Tx, meta DecisionMeta, record []byte) error {
	val, err := encodeDecision(meta, record)
	if err != nil {
		return err
	}
	return s.appendTx(tx, meta, val)
}

// EncodedDecision is a decision record checked and encoded for storage by EncodeDecision, ready
// for AppendEncodedTx. Encoding before the commit keeps the work out of the single writer,
// which every other request waits on.
type EncodedDecision struct {
	meta DecisionMeta
	val  []byte
}

// EncodeDecision checks and encodes a decision record as AppendTx would store it.
func EncodeDecision(meta DecisionMeta, record []byte) (EncodedDecision, error) {
	val, err := encodeDecision(meta, record)
	if err != nil {
		return EncodedDecision{}, err
	}
	return EncodedDecision{meta: meta, val: val}, nil
}

// EncodeDecisionWith is EncodeDecision for a record that appendRecord writes straight into the
// stored value, so that a record is encoded once: the returned record is those bytes (they
// share memory with the encoded value; neither may be changed), ready to be the response as
// well. appendRecord must append one compact JSON object, as json.Marshal writes one; since it
// is trusted to, the store checks only that it appended an object on one line (an export
// writes one record per line), where EncodeDecision checks and compacts every byte. sizeHint
// is the record's expected length.
func EncodeDecisionWith(meta DecisionMeta, sizeHint int, appendRecord func(b []byte) ([]byte, error)) (EncodedDecision, []byte, error) {
	if err := checkDecisionMeta(meta); err != nil {
		return EncodedDecision{}, nil, err
	}
	b := appendDecisionHeader(make([]byte, 0, decisionHeaderLen(meta)+max(sizeHint, 0)), meta)
	n := len(b)
	b, err := appendRecord(b)
	if err != nil {
		return EncodedDecision{}, nil, fmt.Errorf("store: encode decision record %s: %w", meta.RecordID, err)
	}
	if len(b) < n {
		return EncodedDecision{}, nil, fmt.Errorf("%w: decision record %s: encoder dropped bytes", ErrInvalid, meta.RecordID)
	}
	record := b[n:len(b):len(b)]
	if len(record) < 2 || record[0] != '{' || record[len(record)-1] != '}' ||
		bytes.IndexByte(record, '\n') >= 0 || bytes.IndexByte(record, '\r') >= 0 {
		return EncodedDecision{}, nil, fmt.Errorf("%w: decision record %s is not a JSON object on one line", ErrInvalid, meta.RecordID)
	}
	return EncodedDecision{meta: meta, val: b}, record, nil
}

// AppendEncodedTx is AppendTx for a record encoded beforehand.
func (s *Decisions) AppendEncodedTx(tx *bolt.Tx, d EncodedDecision) error {
	if d.val == nil {
		return fmt.Errorf("%w: decision record not encoded", ErrInvalid)
	}
	return s.appendTx(tx, d.meta, d.val)
}

func (s *Decisions) appendTx(tx *bolt.Tx, meta DecisionMeta, val []byte) error {
	id := []byte(meta.RecordID)
	recs := tx.Bucket(bucketDecisions)
	if recs.Get(id) != nil {
		return fmt.Errorf("%w: decision record %s", ErrExists, meta.RecordID)
	}
	byVerdict := tx.Bucket(bucketDecisionsByVerdict)
	if meta.VerdictID != "" {
		if prev := byVerdict.Get([]byte(meta.VerdictID)); prev != nil {
			return fmt.Errorf("%w: verdict id of decision record %s already issued in %s", ErrExists, meta.RecordID, prev)
		}
	}
	if err := recs.Put(id, val); err != nil {
		return fmt.Errorf("store: write decision record %s: %w", meta.RecordID, err)
	}
	tk := timeKey(meta.Time)
	if err := tx.Bucket(bucketDecisionsByTime).Put(slices.Concat(tk, id), nil); err != nil {
		return fmt.Errorf("store: index decision record %s: %w", meta.RecordID, err)
	}
	if err := tx.Bucket(bucketDecisionsByActionKey).Put(slices.Concat(lenPrefixed(meta.ActionKey), tk, id), nil); err != nil {
		return fmt.Errorf("store: index decision record %s: %w", meta.RecordID, err)
	}
	if meta.VerdictID != "" {
		if err := byVerdict.Put([]byte(meta.VerdictID), id); err != nil {
			return fmt.Errorf("store: index decision record %s: %w", meta.RecordID, err)
		}
	}
	return s.db.note(tx, OutboxDecision, meta.RecordID)
}

// Stored form of a decision: a version byte, the metadata the record id key does not carry,
// then the record JSON.
const decisionEncoding = 1

func checkDecisionMeta(meta DecisionMeta) error {
	switch {
	case meta.RecordID == "":
		return fmt.Errorf("%w: decision record without record id", ErrInvalid)
	case meta.Time.IsZero():
		return fmt.Errorf("%w: decision record %s without time", ErrInvalid, meta.RecordID)
	case meta.Outcome == "":
		return fmt.Errorf("%w: decision record %s without outcome", ErrInvalid, meta.RecordID)
	}
	return nil
}

// decisionHeaderLen bounds the length of meta's header.
func decisionHeaderLen(meta DecisionMeta) int {
	return len(meta.ActionKey) + len(meta.Outcome) + len(meta.VerdictID) + 1 + 3*binary.MaxVarintLen64 + 8
}

// appendDecisionHeader appends what a stored decision holds before its record JSON.
func appendDecisionHeader(b []byte, meta DecisionMeta) []byte {
	b = append(b, decisionEncoding)
	b = appendString(b, meta.ActionKey)
	b = appendString(b, meta.Outcome)
	b = appendString(b, meta.VerdictID)
	return binary.BigEndian.AppendUint64(b, uint64(meta.Time.UnixNano()))
}

func encodeDecision(meta DecisionMeta, record []byte) ([]byte, error) {
	if err := checkDecisionMeta(meta); err != nil {
		return nil, err
	}
	if t := bytes.TrimLeft(record, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%w: decision record %s is not a JSON object", ErrInvalid, meta.RecordID)
	}
	b := appendDecisionHeader(make([]byte, 0, len(record)+decisionHeaderLen(meta)), meta)
	b, err := jsontext.AppendFormat(b, record)
	if err != nil {
		return nil, fmt.Errorf("%w: decision record %s: %v", ErrInvalid, meta.RecordID, err)
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decodeDecision parses a stored value; the result shares no memory with val only if val is
// already a copy.
func decodeDecision(id string, val []byte) (*Decision, error) {
	corrupt := func(what string) error { return fmt.Errorf("%w: decision record %s: %s", ErrCorrupt, id, what) }
	if len(val) == 0 || val[0] != decisionEncoding {
		return nil, corrupt("unknown encoding")
	}
	rest := val[1:]
	var fields [3]string
	for i := range fields {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, corrupt("truncated metadata")
		}
		fields[i] = string(rest[k : k+int(n)])
		rest = rest[k+int(n):]
	}
	if len(rest) < 8 {
		return nil, corrupt("truncated time")
	}
	d := &Decision{
		DecisionMeta: DecisionMeta{
			RecordID: id, ActionKey: fields[0], Outcome: fields[1], VerdictID: fields[2],
			Time: time.Unix(0, int64(binary.BigEndian.Uint64(rest))).UTC(),
		},
		Record: json.RawMessage(rest[8:]),
	}
	return d, nil
}

// Get returns the decision record with id, or an error wrapping ErrNotFound.
func (s *Decisions) Get(ctx context.Context, id string) (*Decision, error) {
	var d *Decision
	err := s.db.View(ctx, func(tx *bolt.Tx) error {
		var val []byte
		if b := tx.Bucket(bucketDecisions); b != nil {
			val = b.Get([]byte(id))
		}
		if val == nil {
			return fmt.Errorf("%w: decision record %s", ErrNotFound, id)
		}
		var err error
		d, err = decodeDecision(id, bytes.Clone(val))
		return err
	})
	return d, err
}

// ByVerdict returns the decision record that issued the verdict id jti, or an error wrapping
// ErrNotFound.
func (s *Decisions) ByVerdict(ctx context.Context, jti string) (*Decision, error) {
	var id string
	err := s.db.View(ctx, func(tx *bolt.Tx) error {
		var v []byte
		if b := tx.Bucket(bucketDecisionsByVerdict); b != nil {
			v = b.Get([]byte(jti))
		}
		if v == nil {
			return fmt.Errorf("%w: decision record for verdict %s", ErrNotFound, jti)
		}
		id = string(v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}

// ByActionKey calls fn for every record of the action key, in time order, until fn returns an
// error, which ByActionKey returns. Records without an action key are found under "". fn runs
// outside any transaction.
func (s *Decisions) ByActionKey(ctx context.Context, key string, fn func(*Decision) error) error {
	prefix := lenPrefixed(key)
	return s.walk(ctx, bucketDecisionsByActionKey, prefix, prefix, len(prefix)+8, fn)
}

// Since calls fn for every record at or after t, in time order, until fn returns an error,
// which Since returns. fn runs outside any transaction.
func (s *Decisions) Since(ctx context.Context, t time.Time, fn func(*Decision) error) error {
	return s.walk(ctx, bucketDecisionsByTime, nil, timeKey(t), 8, fn)
}

// walk scans an index whose keys end in the record id at offset.
func (s *Decisions) walk(ctx context.Context, index, prefix, from []byte, offset int, fn func(*Decision) error) error {
	load := func(tx *bolt.Tx, key []byte) ([]byte, error) {
		val := tx.Bucket(bucketDecisions).Get(key[offset:])
		if val == nil {
			return nil, fmt.Errorf("%w: index entry for missing decision record %s", ErrCorrupt, key[offset:])
		}
		return val, nil
	}
	return s.db.scan(ctx, index, prefix, from, load, func(key, val []byte) error {
		d, err := decodeDecision(string(key[offset:]), val)
		if err != nil {
			return err
		}
		return fn(d)
	})
}
