// Package convstate owns the conversation state verdictd keeps between preflights: Gate-1 ask
// counters per (principal, conversation), value ask counts, question bindings, deferred intents
// and how many verdicts each was triggered to ([Uses]), and receipt-confirmed prior values (the
// executed baseline of an action key, ordered by record id: [Baseline.Newer]).
//
// A [Store] holds the state; each preflight works on its own [Run], a gates.State that reads
// through to the store and buffers its writes until one call, [Run.Commit], writes them with
// what the run decided (its decision record, and the console approval the record creates or
// uses). The commit keeps the order, so that nothing is asked or issued that is not on record.
//
// The bbolt backend ([Bolt]) keeps the state in the replica's own file, and a run's changes,
// its approval and its record are one transaction. The etcd backend ([Etcd]) is shared by
// several replicas: a run's changes are sent first, in one compare-and-swap transaction over
// every conversation it read, then its approval and record are one transaction of the
// replica's file. A conversation another replica changed meanwhile fails the commit with
// [ErrConflict] before anything is written, and the run is decided again. Every failure of a
// shared store to give a definite answer is an [*UnavailableError]: the preflight that met it
// issues nothing.
//
// Conversations are bounded on both backends, since their ids are the caller's to invent: one
// unchanged for its TTL is forgotten (bbolt: [Bolt.Collect], and every run sees it gone at
// once; etcd: a lease), and [Store.Admit] refuses with [ErrConversationLimit] a conversation
// that is not live when its principal already holds the most allowed. On bbolt the commit
// that starts a conversation checks the bound again, so it is exact; on etcd it may be exceeded
// by the first runs of new conversations in flight at once. Question bindings, deferred intents
// and their uses, and baselines are not conversation state and keep their own lifetimes.
package convstate

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/verdictgate/verdict/api"

	bolt "go.etcd.io/bbolt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/store"
)

// Store is where the conversation state lives. Implementations are safe for concurrent use;
// the caller serializes the runs of one conversation within a replica.
type Store interface {
	// Begin starts the state of one run.
	Begin() Run
	// Admit returns ErrConversationLimit when c is not a live conversation and its principal
	// already holds as many live conversations as allowed; a preflight it refuses records
	// nothing. A shared store that cannot answer returns an *UnavailableError.
	Admit(ctx context.Context, c gates.Conversation) error
	// Deferred returns the latest deferred record of actionKey, rebuilt with what a trigger
	// run needs, or nil when there is none.
	Deferred(ctx context.Context, actionKey string) (*api.Record, error)
	// Verdict returns what a receipt for verdict jti is checked against when the verdict was
	// issued by another replica, or nil. A store local to one replica knows none: its verdicts
	// are in the replica's own records.
	Verdict(ctx context.Context, jti string) (*Verdict, error)
	// SetBaseline makes b the executed baseline of actionKey if its execution is newer than
	// the stored baseline's (receipts can arrive out of order, and be replayed): see
	// [Baseline.Newer]. It reports what it did.
	SetBaseline(ctx context.Context, actionKey string, b Baseline) (BaselineResult, error)
	// Close releases the store; a shared store then fails every read and commit with
	// ErrUnavailable.
	Close() error
}

// Run is the state of one preflight: reads see the store plus the run's own writes, which stay
// in memory until the run is committed with its record.
type Run interface {
	gates.State
	// Prefetch may read ahead what the run will read of req, before the engine runs.
	Prefetch(ctx context.Context, req *api.Request) error
	// Uses returns how often the deferred record recordID has been triggered to a verdict,
	// as this run sees it; the commit fails if another run changes it meanwhile.
	Uses(ctx context.Context, recordID string) (Uses, error)
	// Consume records u as the uses of recordID once the run commits: the trigger run whose
	// record carries a verdict uses up an occurrence in the same commit. On the shared store a
	// concurrent consume makes the commit fail with ErrConflict, and the run is decided again
	// on the new uses; on bbolt the caller's conversation lock serializes the triggers of one
	// deferred record, and the commit refuses one whose uses moved with ErrUsesMoved.
	Consume(recordID string, u Uses)
	// Commit writes the run's changes with w, once, in the order the package documentation
	// gives: all of them or, on an error, none of w and nothing the run asked or issued. On
	// etcd an ErrConflict wrote nothing (decide again); a failure once the state was sent may
	// leave an ask counted that no record shows (a ceiling reached early, never lifted).
	Commit(ctx context.Context, w *Write) error
}

// Write is what a run's commit stores with the state the run changed: the decided record,
// which brings its outbox entry, and the console approval the record creates or uses.
type Write struct {
	Record   *api.Record
	Encoded  store.EncodedDecision // Record as the decision store keeps it
	Stored   []byte                // Record's JSON, as stored
	Audience []string              // the aud claim of the verdict Record carries, as signed
	Approval *store.ApprovalWrite  // the console approval Record creates or uses, or nil
	Attempt  int                   // the runs of the preflight so far, 1 for the first: traced
}

// Steps of a commit, in their order, as a store's Fault option names them.
const (
	StepSend     = "send"     // etcd: the run's changes, in one compare-and-swap transaction
	StepState    = "state"    // bbolt: the run's changes, in the record's transaction
	StepApproval = "approval" // the approval's compare and set
	StepRecord   = "record"   // the decision record, with its outbox entry
	StepEnd      = "end"      // the record's transaction, before bbolt makes it durable
)

// records writes the decision records of a replica in its own file, whichever store holds the
// state.
type records struct {
	db    *store.DB
	fault func(step string) error // the Fault option
}

// commitWrite is the one order of every commit: the run's changes sent ahead of the record by
// send (etcd), then one transaction of the file with the run's changes written by inTx
// (bbolt), the approval and the record. Once send succeeded, a failure leaves an ask counted
// that no record shows: a ceiling reached early, never lifted.
func (r *records) commitWrite(ctx context.Context, w *Write, send func(context.Context) error, inTx func(*bolt.Tx) error) error {
	tr := trace.SpanFromContext(ctx).TracerProvider().Tracer("github.com/verdictgate/verdict/convstate")
	cctx, span := tr.Start(ctx, "commit", trace.WithAttributes(attribute.Int("verdict.attempt", w.Attempt)))
	var err error
	if send != nil {
		err = r.step(StepSend, func() error { return send(cctx) })
	}
	span.End()
	if err != nil {
		return err
	}
	ctx, span = tr.Start(ctx, "store record")
	defer span.End()
	return r.db.Update(ctx, func(tx *bolt.Tx) error {
		if inTx != nil {
			if err := r.step(StepState, func() error { return inTx(tx) }); err != nil {
				return err
			}
		}
		if err := r.step(StepApproval, func() error { return r.db.Approvals().WriteTx(tx, w.Approval) }); err != nil {
			return err
		}
		if err := r.step(StepRecord, func() error { return r.db.Decisions().AppendEncodedTx(tx, w.Encoded) }); err != nil {
			return err
		}
		return r.step(StepEnd, func() error { return nil })
	})
}

// step runs do, step name of a commit, unless the Fault option fails it first.
func (r *records) step(name string, do func() error) error {
	if r.fault != nil {
		if err := r.fault(name); err != nil {
			return err
		}
	}
	return do()
}

// runWrites are what a run of either backend keeps in memory alike until its commit: the
// questions it issued and the occurrence of a deferred record it uses up.
type runWrites struct {
	questions map[string]storedBinding
	consumed  *consumed
}

func newRunWrites() runWrites { return runWrites{questions: map[string]storedBinding{}} }

// consumed is an occurrence a run uses up when it commits.
type consumed struct {
	recordID string
	uses     Uses
}

func (w *runWrites) Consume(recordID string, u Uses) { w.consumed = &consumed{recordID, u} }

func (w *runWrites) SaveQuestion(_ context.Context, id string, b gates.QuestionBinding) error {
	w.questions[id] = storedBinding(b)
	return nil
}

// Baseline is the executed baseline of an action key: the call arguments of the newest
// executed verdict a receipt reported.
type Baseline struct {
	IssuedAt  int64                      `json:"iat"` // the receipt's iat, kept for the operator
	VerdictID string                     `json:"jti"`
	RecordID  string                     `json:"record_id"` // the issuing record's id: orders baselines
	Values    map[string]json.RawMessage `json:"values"`
}

// Newer reports whether b reports a newer execution than cur. Executions are ordered by the
// id of the decision record that issued their verdict: its millisecond first, then the rest,
// which a replica mints strictly increasing (store.RecordIDs), so the order is total, never
// one-second receipt times, and a receipt replayed later can never put an older execution
// back. A cur without a record id (an unreadable value) is always replaced.
func (b *Baseline) Newer(cur *Baseline) bool {
	return cur == nil || cur.RecordID == "" || b.RecordID > cur.RecordID
}

// BaselineResult is what SetBaseline did with a receipt's baseline.
type BaselineResult int

const (
	// BaselineApplied: the receipt's execution is now the baseline.
	BaselineApplied BaselineResult = iota + 1
	// BaselineCurrent: the baseline already is this execution (the receipt was posted
	// before); nothing changed.
	BaselineCurrent
	// BaselineSuperseded: a newer execution is the baseline and stays.
	BaselineSuperseded
)

// String is the result's name in receipt answers and logs.
func (r BaselineResult) String() string {
	switch r {
	case BaselineApplied:
		return "applied"
	case BaselineCurrent:
		return "already_applied"
	case BaselineSuperseded:
		return "superseded"
	}
	return "none"
}

// compareBaseline decides what storing next over cur does.
func compareBaseline(next, cur *Baseline) BaselineResult {
	switch {
	case next.Newer(cur):
		return BaselineApplied
	case cur.RecordID == next.RecordID:
		return BaselineCurrent
	}
	return BaselineSuperseded
}

// Uses is how often a deferred record has been triggered to a verdict, and when last.
type Uses struct {
	Count int `json:"count"`
	// LastMillis is when the last verdict was issued, in Unix milliseconds.
	LastMillis int64 `json:"last_ms,omitempty"`
	// LastRecordID is the record that carried it.
	LastRecordID string `json:"last_record_id,omitempty"`
}

// Verdict is what a receipt is checked against: the issuing record's bound call and the
// verdict's audience, never the token.
type Verdict struct {
	RecordID        string                     `json:"record_id"`
	ActionKey       *string                    `json:"action_key"`
	ArgumentsDigest *string                    `json:"arguments_digest"`
	CallArguments   map[string]json.RawMessage `json:"call_arguments"`
	Audience        []string                   `json:"aud"`
}

// storedVerdictRecord is what a Verdict reads of a stored decision record.
type storedVerdictRecord struct {
	ActionKey       *string                    `json:"action_key"`
	ArgumentsDigest *string                    `json:"arguments_digest"`
	CallArguments   map[string]json.RawMessage `json:"call_arguments"`
	Verdict         *string                    `json:"verdict"`
}

// VerdictOf reads the Verdict of a stored decision record (its JSON as the decision store keeps
// it), the audience from the verdict the record carries.
func VerdictOf(recordID string, stored []byte) (*Verdict, error) {
	v, token, err := verdictOf(recordID, stored)
	if err != nil {
		return nil, err
	}
	if token != nil {
		v.Audience = verdictAudience(*token)
	}
	return v, nil
}

// verdictOf reads the Verdict of a stored decision record but its audience, and the verdict.
func verdictOf(recordID string, stored []byte) (*Verdict, *string, error) {
	var rec storedVerdictRecord
	// apijson reads the few members named and skips the rest of the record as it tokenizes it,
	// each call argument kept as the bytes the record holds.
	if err := apijson.Unmarshal(stored, &rec); err != nil {
		return nil, nil, fmt.Errorf("decision record %s: %w: %v", recordID, store.ErrCorrupt, err)
	}
	return &Verdict{RecordID: recordID, ActionKey: rec.ActionKey, ArgumentsDigest: rec.ArgumentsDigest,
		CallArguments: rec.CallArguments}, rec.Verdict, nil
}

// verdictAudience reads the aud claim of a verdict verdictd itself signed and stored.
func verdictAudience(token string) []string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil
	}
	var c struct {
		Aud []string `json:"aud"`
	}
	if apijson.Unmarshal(payload, &c) != nil {
		return nil
	}
	return c.Aud
}

var (
	// ErrUnavailable is matched by every *UnavailableError.
	ErrUnavailable = errors.New("convstate: " + api.CodeStateStoreUnavailable)
	// ErrConflict is a commit whose compared revisions moved: another replica changed a
	// conversation this run read. The run is decided again on the new state.
	ErrConflict = errors.New("convstate: state changed by another replica")
	// ErrUsesMoved is a bbolt commit that found the uses of its deferred record changed since
	// the run read them: two triggers of one record were not serialized. Nothing is written.
	ErrUsesMoved = errors.New("convstate: the deferred record's uses changed during the run")
)

// UnavailableError is a shared state store that could not answer: unreachable, timed out,
// closed, or contended past the retries. Nothing was issued: no record, no verdict, no question.
type UnavailableError struct {
	Op  string // read, commit, deferred, receipt
	Err error
}

func (e *UnavailableError) Error() string {
	return "convstate: " + api.CodeStateStoreUnavailable + " (" + e.Op + "): " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true for every UnavailableError.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// convKey encodes a conversation. JSON escapes control characters, so the key holds no NUL and
// convKey(c)+"\x00" is a prefix no other conversation's keys share.
func convKey(c gates.Conversation) []byte {
	b, _ := json.Marshal([2]string{c.Principal, c.ID})
	return b
}

// storedBinding is the stored form of a gates.QuestionBinding: the same fields, in the same
// order, so that each converts to the other.
type storedBinding struct {
	Principal string     `json:"principal"`
	ActionKey string     `json:"action_key"`
	SlotID    string     `json:"slot_id"`
	Kind      string     `json:"kind"`
	Value     any        `json:"value,omitempty"`
	Shown     any        `json:"shown,omitempty"`
	Origin    api.Source `json:"origin,omitempty"`
	Options   [][]string `json:"options,omitempty"`
}
