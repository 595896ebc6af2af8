package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
)

// ReasonCrashedInFlight is the reason RecoverStarted gives a record it found started.
const ReasonCrashedInFlight = "crashed_in_flight"

// ReasonConsumedWithoutStart is the reason of a not_executed record for a verdict its executor
// consumed in a shared nonce store and never started (no started record was committed, so the
// tool was never called). The executor writes it when it reconciles the store with its
// records. It and api.ExecutionReasonUpstreamUnavailable are the not_executed records that say
// a verdict was consumed.
const ReasonConsumedWithoutStart = "consumed_without_start"

// Executions are the executor's execution records, stored in their DB's file.
type Executions struct{ db *DB }

// Executions returns the execution records of db.
func (db *DB) Executions() *Executions { return &Executions{db: db} }

// StartTx stores x as a Started record inside tx, so that the caller can consume the verdict's
// nonce and record the start in one commit. An empty RecordID is filled in with
// NewRecordID("exe_", x.StartedAt); Decision is set to Started. It checks before it writes:
// on error, tx is unchanged.
func (s *Executions) StartTx(tx *bolt.Tx, x *api.ExecutionRecord) error {
	if x.RecordID == "" {
		x.RecordID = NewRecordID("exe_", x.StartedAt)
	}
	x.Decision = api.ExecutionStarted
	x.FinishedAt = time.Time{}
	switch {
	case x.VerdictID == "":
		return fmt.Errorf("%w: started execution %s has no verdict id", ErrInvalid, x.RecordID)
	case x.ExecutorID == "":
		return fmt.Errorf("%w: started execution %s has no executor id", ErrInvalid, x.RecordID)
	case x.StartedAt.IsZero():
		return fmt.Errorf("%w: started execution %s has no start time", ErrInvalid, x.RecordID)
	}
	id, err := s.insert(tx, x)
	if err != nil {
		return err
	}
	if err := tx.Bucket(bucketExecutionsStarted).Put(id, nil); err != nil {
		return fmt.Errorf("store: index started execution %s: %w", x.RecordID, err)
	}
	return nil
}

// Start stores x as a Started record in its own commit. See StartTx.
func (s *Executions) Start(ctx context.Context, x *api.ExecutionRecord) error {
	// Work on a copy so that a rerun of the transaction function sees the caller's input.
	var stored api.ExecutionRecord
	err := s.db.Update(ctx, func(tx *bolt.Tx) error {
		stored = *x
		return s.StartTx(tx, &stored)
	})
	if err == nil {
		*x = stored
	}
	return err
}

// RecordRefusal stores x as a NotExecuted record: a verdict the executor refused, with its
// reason code. An empty RecordID is filled in; a zero FinishedAt is set to StartedAt.
func (s *Executions) RecordRefusal(ctx context.Context, x *api.ExecutionRecord) error {
	stored := *x
	if stored.RecordID == "" {
		stored.RecordID = NewRecordID("exe_", stored.StartedAt)
	}
	stored.Decision = api.ExecutionNotExecuted
	if stored.FinishedAt.IsZero() {
		stored.FinishedAt = stored.StartedAt
	}
	switch {
	case stored.Reason == "":
		return fmt.Errorf("%w: refusal %s has no reason", ErrInvalid, stored.RecordID)
	case stored.ExecutorID == "":
		return fmt.Errorf("%w: refusal %s has no executor id", ErrInvalid, stored.RecordID)
	case stored.StartedAt.IsZero():
		return fmt.Errorf("%w: refusal %s has no time", ErrInvalid, stored.RecordID)
	}
	err := s.db.Update(ctx, func(tx *bolt.Tx) error {
		_, err := s.insert(tx, &stored)
		return err
	})
	if err == nil {
		*x = stored
	}
	return err
}

// insert writes a new record and its time and verdict indexes, refusing an existing id. It
// returns the record's key, which the caller may Put in tx too.
func (s *Executions) insert(tx *bolt.Tx, x *api.ExecutionRecord) ([]byte, error) {
	recs := tx.Bucket(bucketExecutions)
	id, byTime, byVerdict := executionKeys(x)
	if recs.Get(id) != nil {
		return nil, fmt.Errorf("%w: execution %s", ErrExists, x.RecordID)
	}
	val, err := x.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("store: encode execution %s: %w", x.RecordID, err)
	}
	if err := recs.Put(id, val); err != nil {
		return nil, fmt.Errorf("store: write execution %s: %w", x.RecordID, err)
	}
	if err := tx.Bucket(bucketExecutionsByTime).Put(byTime, nil); err != nil {
		return nil, fmt.Errorf("store: index execution %s: %w", x.RecordID, err)
	}
	if byVerdict != nil {
		if err := tx.Bucket(bucketExecutionsByVerdict).Put(byVerdict, nil); err != nil {
			return nil, fmt.Errorf("store: index execution %s: %w", x.RecordID, err)
		}
	}
	if err := s.db.note(tx, OutboxExecution, x.RecordID); err != nil {
		return nil, err
	}
	return id, nil
}

// executionKeys returns the keys a new record is written under, carved from one allocation:
// the record id, the time index key (timeKey of the start, then the id) and, when the record
// has a verdict id, the verdict index key (lenPrefixed verdict id, then the id). bbolt keeps
// the slices it is given until the commit, so they are never written to once made.
func executionKeys(x *api.ExecutionRecord) (id, byTime, byVerdict []byte) {
	n := 2*len(x.RecordID) + 8
	if x.VerdictID != "" {
		n += binary.MaxVarintLen64 + len(x.VerdictID) + len(x.RecordID)
	}
	buf := make([]byte, 0, n)
	buf = append(buf, x.RecordID...)
	id = buf[:len(buf):len(buf)]
	start := len(buf)
	buf = binary.BigEndian.AppendUint64(buf, timeBits(x.StartedAt))
	buf = append(buf, x.RecordID...)
	byTime = buf[start:len(buf):len(buf)]
	if x.VerdictID != "" {
		start = len(buf)
		buf = binary.AppendUvarint(buf, uint64(len(x.VerdictID)))
		buf = append(buf, x.VerdictID...)
		buf = append(buf, x.RecordID...)
		byVerdict = buf[start:len(buf):len(buf)]
	}
	return id, byTime, byVerdict
}

// Finish records the outcome of a Started execution and returns the finished record. decision
// must be final; a record that is not Started is refused with ErrNotStarted, so an outcome is
// written at most once.
func (s *Executions) Finish(ctx context.Context, recordID string, decision api.ExecutionDecision,
	reason, resultDigest string, finishedAt time.Time) (*api.ExecutionRecord, error) {
	if !decision.Final() {
		return nil, fmt.Errorf("%w: finish %s with execution_decision %q", ErrInvalid, recordID, decision)
	}
	if finishedAt.IsZero() {
		return nil, fmt.Errorf("%w: finish %s without a time", ErrInvalid, recordID)
	}
	var out *api.ExecutionRecord
	err := s.db.Update(ctx, func(tx *bolt.Tx) error {
		x, err := s.getTx(tx, recordID)
		if err != nil {
			return err
		}
		if x.Decision != api.ExecutionStarted {
			return fmt.Errorf("%w: execution %s is %s", ErrNotStarted, recordID, x.Decision)
		}
		x.Decision, x.Reason, x.ResultDigest, x.FinishedAt = decision, reason, resultDigest, finishedAt
		if err := s.finishTx(tx, x); err != nil {
			return err
		}
		out = x
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FinishStarted records the outcome of x, a record the caller started (StartTx or Start) and
// holds as it was stored, and returns the finished record's stored JSON, which the caller may
// send as it is. It is Finish without reading the record back: the finished record is encoded
// before the commit, and the transaction only compares the stored bytes with x's started form,
// derived from the finished encoding (a caller whose x differs from the stored record gets
// ErrInvalid and nothing is written), and checks the started index, so an outcome is still
// written at most once (ErrNotStarted). On success x is the finished record.
func (s *Executions) FinishStarted(ctx context.Context, x *api.ExecutionRecord, decision api.ExecutionDecision,
	reason, resultDigest string, finishedAt time.Time) ([]byte, error) {
	if !decision.Final() {
		return nil, fmt.Errorf("%w: finish %s with execution_decision %q", ErrInvalid, x.RecordID, decision)
	}
	if finishedAt.IsZero() {
		return nil, fmt.Errorf("%w: finish %s without a time", ErrInvalid, x.RecordID)
	}
	if x.Decision != api.ExecutionStarted {
		return nil, fmt.Errorf("%w: execution %s is %s", ErrNotStarted, x.RecordID, x.Decision)
	}
	fin := *x
	fin.Decision, fin.Reason, fin.ResultDigest, fin.FinishedAt = decision, reason, resultDigest, finishedAt
	val, err := fin.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("store: encode execution %s: %w", x.RecordID, err)
	}
	id := []byte(x.RecordID)
	err = s.db.Update(ctx, func(tx *bolt.Tx) error {
		stored := tx.Bucket(bucketExecutions).Get(id)
		switch {
		case stored == nil:
			return fmt.Errorf("%w: execution %s", ErrNotFound, x.RecordID)
		case tx.Bucket(bucketExecutionsStarted).Get(id) == nil:
			return fmt.Errorf("%w: execution %s is no longer started", ErrNotStarted, x.RecordID)
		}
		if same, err := isStartedForm(stored, x, val); err != nil {
			return err
		} else if !same {
			return fmt.Errorf("%w: execution %s differs from the stored record", ErrInvalid, x.RecordID)
		}
		return s.putFinishedTx(tx, x.RecordID, val)
	})
	if err != nil {
		return nil, err
	}
	*x = fin
	return val, nil
}

// The members of an execution record's JSON that finishing it changes, and their started form.
// Each is found by its ",\"name\":" text, which occurs nowhere else in a record: inside a JSON
// string every quote is escaped.
var (
	decisionMember   = []byte(`,"execution_decision":`)
	startedAtMember  = []byte(`,"started_at":`)
	finishedAtMember = []byte(`,"finished_at":`)
	verdictMember    = []byte(`,"verdict":`)
)

const (
	startedDecisionAndReason = `,"execution_decision":"started","reason":null`
	startedFinishAndResult   = `,"finished_at":null,"result_digest":null`
)

// isStartedForm reports whether stored is x's JSON, x being a Started record and fin the JSON of
// x finished. It is bytes.Equal(stored, x.MarshalJSON()) without encoding x again: a record's
// members come in a fixed order, and finishing changes only execution_decision, reason,
// finished_at and result_digest, which in a started record with no reason and no result digest
// are "started" and three nulls. So stored must be fin with those four members in their started
// form. Only a match is taken from that comparison; otherwise x is encoded and compared in full.
func isStartedForm(stored []byte, x *api.ExecutionRecord, fin []byte) (bool, error) {
	if x.Reason == "" && x.ResultDigest == "" && x.FinishedAt.IsZero() && finishedFrom(stored, fin) {
		return true, nil
	}
	was, err := x.MarshalJSON()
	if err != nil {
		return false, fmt.Errorf("store: encode execution %s: %w", x.RecordID, err)
	}
	return bytes.Equal(stored, was), nil
}

// finishedFrom reports whether stored is fin with execution_decision "started" and reason,
// finished_at and result_digest null.
func finishedFrom(stored, fin []byte) bool {
	i := bytes.Index(fin, decisionMember)
	if i <= 0 {
		return false
	}
	j := bytes.Index(fin[i:], startedAtMember)
	if j < 0 {
		return false
	}
	j += i
	k := bytes.Index(fin[j:], finishedAtMember)
	if k < 0 {
		return false
	}
	k += j
	l := bytes.Index(fin[k:], verdictMember)
	if l < 0 {
		return false
	}
	l += k
	rest, ok := bytes.CutPrefix(stored, fin[:i])
	if ok {
		rest, ok = bytes.CutPrefix(rest, []byte(startedDecisionAndReason))
	}
	if ok {
		rest, ok = bytes.CutPrefix(rest, fin[j:k])
	}
	if ok {
		rest, ok = bytes.CutPrefix(rest, []byte(startedFinishAndResult))
	}
	return ok && bytes.Equal(rest, fin[l:])
}

// finishTx rewrites a record that was Started and drops it from the started index.
func (s *Executions) finishTx(tx *bolt.Tx, x *api.ExecutionRecord) error {
	val, err := x.MarshalJSON()
	if err != nil {
		return fmt.Errorf("store: encode execution %s: %w", x.RecordID, err)
	}
	return s.putFinishedTx(tx, x.RecordID, val)
}

// putFinishedTx writes val, the finished record id, over its started form and drops it from the
// started index.
func (s *Executions) putFinishedTx(tx *bolt.Tx, id string, val []byte) error {
	if err := tx.Bucket(bucketExecutions).Put([]byte(id), val); err != nil {
		return fmt.Errorf("store: write execution %s: %w", id, err)
	}
	if err := tx.Bucket(bucketExecutionsStarted).Delete([]byte(id)); err != nil {
		return fmt.Errorf("store: unindex started execution %s: %w", id, err)
	}
	return s.db.note(tx, OutboxExecution, id)
}

// RecoverStarted turns every record still Started into OutcomeUnknown with reason
// ReasonCrashedInFlight and finish time now, in one commit, and returns them. The executor
// calls it once at start, before it accepts requests: an execution in flight when the process
// died may or may not have reached the tool, so it is never run again.
func (s *Executions) RecoverStarted(ctx context.Context, now time.Time) ([]*api.ExecutionRecord, error) {
	var out []*api.ExecutionRecord
	err := s.db.Update(ctx, func(tx *bolt.Tx) error {
		out = out[:0]
		var ids [][]byte
		c := tx.Bucket(bucketExecutionsStarted).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			ids = append(ids, bytes.Clone(k))
		}
		for _, id := range ids {
			x, err := s.getTx(tx, string(id))
			if err != nil {
				return err
			}
			if x.Decision != api.ExecutionStarted {
				return fmt.Errorf("%w: execution %s is indexed as started but is %s", ErrCorrupt, id, x.Decision)
			}
			x.Decision, x.Reason, x.FinishedAt = api.ExecutionOutcomeUnknown, ReasonCrashedInFlight, now
			if err := s.finishTx(tx, x); err != nil {
				return err
			}
			out = append(out, x)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Executions) getTx(tx *bolt.Tx, id string) (*api.ExecutionRecord, error) {
	val := tx.Bucket(bucketExecutions).Get([]byte(id))
	if val == nil {
		return nil, fmt.Errorf("%w: execution %s", ErrNotFound, id)
	}
	return decodeExecution(id, val)
}

func decodeExecution(id string, val []byte) (*api.ExecutionRecord, error) {
	x := new(api.ExecutionRecord)
	if err := x.UnmarshalJSON(val); err != nil {
		return nil, fmt.Errorf("%w: execution %s: %v", ErrCorrupt, id, err)
	}
	return x, nil
}

// Get returns the record with id, or an error wrapping ErrNotFound.
func (s *Executions) Get(ctx context.Context, id string) (*api.ExecutionRecord, error) {
	var x *api.ExecutionRecord
	err := s.db.View(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExecutions)
		if b == nil {
			return fmt.Errorf("%w: execution %s", ErrNotFound, id)
		}
		var err error
		x, err = s.getTx(tx, id)
		return err
	})
	return x, err
}

// ByVerdict returns every record of the verdict id jti (usually one; a replay refused as
// not_executed adds another), in record id order.
func (s *Executions) ByVerdict(ctx context.Context, jti string) ([]*api.ExecutionRecord, error) {
	var out []*api.ExecutionRecord
	prefix := lenPrefixed(jti)
	err := s.db.scan(ctx, bucketExecutionsByVerdict, prefix, prefix, s.loadIndexed(len(prefix)),
		func(key, val []byte) error {
			x, err := decodeExecution(string(key[len(prefix):]), val)
			if err != nil {
				return err
			}
			out = append(out, x)
			return nil
		})
	return out, err
}

// Since calls fn for every record started at or after t, in start time order, until fn
// returns an error, which Since returns. fn runs outside any transaction.
func (s *Executions) Since(ctx context.Context, t time.Time, fn func(*api.ExecutionRecord) error) error {
	return s.since(ctx, t, func(id string, val []byte) error {
		x, err := decodeExecution(id, val)
		if err != nil {
			return err
		}
		return fn(x)
	})
}

// since walks the time index handing fn the stored JSON of each record.
func (s *Executions) since(ctx context.Context, t time.Time, fn func(id string, val []byte) error) error {
	return s.db.scan(ctx, bucketExecutionsByTime, nil, timeKey(t), s.loadIndexed(8),
		func(key, val []byte) error { return fn(string(key[8:]), val) })
}

// loadIndexed resolves an index key whose record id starts at offset.
func (s *Executions) loadIndexed(offset int) func(tx *bolt.Tx, key []byte) ([]byte, error) {
	return func(tx *bolt.Tx, key []byte) ([]byte, error) {
		val := tx.Bucket(bucketExecutions).Get(key[offset:])
		if val == nil {
			return nil, fmt.Errorf("%w: index entry for missing execution %s", ErrCorrupt, key[offset:])
		}
		return val, nil
	}
}
