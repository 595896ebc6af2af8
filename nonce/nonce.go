// Package nonce owns the single use of verdicts. A Store consumes a verdict's jti once,
// atomically, and refuses every later attempt for as long as the verdict could still verify:
// its expiry plus the executor's clock skew. Any error from a Store means the verdict must not
// run; Reason maps an error to the executor's reason code.
//
// The bbolt backend ([Bolt]) keeps its entries in the executor's own record file, so the
// executor can consume a nonce and record the start of the execution in one commit. The etcd
// backend ([Etcd]) is shared by several executors: a compare-and-create of the jti's key under a
// lease that outlives expiry plus skew. Its consume cannot share the executor's commit, so it
// is also a [Reconciler]: the executor finds with it every verdict it consumed and never
// started, and records it.
package nonce

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/verdict"
)

// Store consumes verdict nonces.
type Store interface {
	// Consume records jti as used unless it already is, in one atomic step. expires is the
	// verdict's signed exp claim. A jti already used returns an error matching ErrReplayed; a
	// store that cannot vouch for the answer returns an error matching ErrUnavailable.
	Consume(ctx context.Context, jti string, expires time.Time) error
	// Spent reports, without consuming, whether jti is consumed already: nil when it is not
	// (or may not be: a verdict whose consume is in doubt reads as not consumed, and its
	// Consume decides), else the error Consume would answer (ErrReplayed,
	// ErrConsumedNotStarted), or one matching ErrUnavailable. It is a look ahead for refusals
	// that must not be made for a verdict already used; Consume alone guards single use.
	Spent(ctx context.Context, jti string, expires time.Time) error
	// Len is the number of entries held, for the executor_nonce_entries gauge.
	Len(ctx context.Context) (int, error)
	// Close releases the store; Consume then fails with ErrUnavailable.
	Close() error
}

// Shared reports whether s guards single use across executors, every executor of a deployment
// consuming in it: only then may one verdict name several executors. Any other store, a local
// one or one this package does not know, is taken to guard its own executor alone.
func Shared(s Store) bool {
	sh, ok := s.(interface{ shared() bool })
	return ok && sh.shared()
}

// A Reconciler is a Store whose consume cannot share a commit with the executor's started
// record (the etcd store), so that a crash, or a consume whose answer was lost, can leave a
// verdict consumed that never started. It lets the executor find each such verdict, record
// it, and make every later Consume of it answer ErrConsumedNotStarted instead of ErrReplayed.
//
// Every key says which instance (the process that records the consumes, across its
// restarts), which run of it (one process's life, from Begin) and which attempt of that run
// consumed it. That is what keeps reconciliation from ever touching a
// verdict a live request is about to start: a verdict of an earlier run has no live request,
// since Begin fences every consume of earlier runs; a verdict of this run is handed over only
// for an attempt the caller gave up on (its answer was lost, or the caller Abandoned it), and
// only if the key is that attempt's — a key another attempt created belongs to the request
// that got its answer.
type Reconciler interface {
	Store
	// Begin starts this process's run of the store's instance, if it has not yet: from then on
	// no Consume sent by an earlier run can take effect, even one still on its way. Consume
	// begins the run itself when it must.
	Begin(ctx context.Context) error
	// EarlierRuns calls fn for every jti the store still holds that an earlier run of the
	// instance consumed (after beginning this run, so that the list is final). The caller decides from its
	// own records which of them never started.
	EarlierRuns(ctx context.Context, fn func(Orphan) error) error
	// Abandon hands over a jti whose Consume succeeded but that the caller will not start (its
	// started record could not be written).
	Abandon(jti string, expires time.Time)
	// Settle resolves every attempt of this run whose answer was lost or that was abandoned.
	// An attempt whose write may still be on its way is fenced: the jti's key is created
	// already marked as never started, unless another attempt created it first. fn is called
	// for each jti that this run consumed and gave up on; the others are dropped. An attempt
	// stays pending until fn returns nil for it. Settle returns how many remain.
	Settle(ctx context.Context, fn func(Orphan) error) (int, error)
	// Pending is the number of attempts Settle has still to resolve.
	Pending() int
	// MarkNotStarted records in the store that o never started: every later Consume of its jti
	// answers ErrConsumedNotStarted. A key already gone (past its lease) is left gone.
	MarkNotStarted(ctx context.Context, o Orphan) error
}

// An Orphan is a jti consumed by the store's instance whose call the consuming request will
// never start.
type Orphan struct {
	JTI        string
	Expires    time.Time // the verdict's exp
	ConsumedAt time.Time
	// Marked: the store already answers ErrConsumedNotStarted for it.
	Marked bool
	// Revision is the key's modification revision when it was read.
	Revision int64
	val      consumed
}

// Reason codes of the executor's refusals that a Store decides.
const (
	ReasonReplayed    = string(verdict.Replayed)
	ReasonExpired     = string(verdict.Expired)
	ReasonMalformed   = string(verdict.Malformed)
	ReasonUnavailable = "nonce_store_unavailable"
)

var (
	// ErrReplayed: the jti was already consumed. It is the verifier's own refusal, so
	// errors.Is(err, verdict.ErrReplayed) and verdict.ReasonOf hold for it too.
	ErrReplayed error = verdict.ErrReplayed
	// ErrExpired: the verdict is past its expiry plus skew, so the store no longer keeps what
	// it would need to catch a replay and refuses it instead.
	ErrExpired = errors.New("nonce: verdict past its expiry plus skew")
	// ErrConsumedNotStarted: the jti was consumed, and the executor that consumed it has
	// recorded that its call never started. It is a replay that did not run: errors.Is(err,
	// ErrReplayed) is false for it, so that a caller cannot answer it as one by mistake.
	ErrConsumedNotStarted = errors.New("nonce: " + api.ExecutionReasonConsumedNotStarted)
	// ErrSuperseded: another process began a run of this store's instance (see
	// Reconciler.Begin), so this one may no longer consume; it is matched together with
	// ErrUnavailable.
	ErrSuperseded = errors.New("nonce: another process began a run of this instance")
	// ErrMalformed: an empty or oversized jti, or no expiry.
	ErrMalformed = errors.New("nonce: malformed jti or expiry")
	// ErrUnavailable is matched by every *UnavailableError.
	ErrUnavailable = errors.New("nonce: " + ReasonUnavailable)
)

// UnavailableError is a store that could not answer: closed, unreachable, a disk error, a
// context that ended. The verdict was not executed and may or may not be marked used.
type UnavailableError struct {
	Backend string // "bbolt", "etcd"
	Err     error
}

func (e *UnavailableError) Error() string {
	return "nonce: " + ReasonUnavailable + " (" + e.Backend + "): " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true for every UnavailableError.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Reason returns the refusal reason code for an error from a Store: "" for nil, and
// nonce_store_unavailable for any error it does not recognise, so that an unexpected failure
// is still a refusal with a reason.
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrReplayed):
		return ReasonReplayed
	case errors.Is(err, ErrConsumedNotStarted):
		return api.ExecutionReasonConsumedNotStarted
	case errors.Is(err, ErrExpired):
		return ReasonExpired
	case errors.Is(err, ErrMalformed):
		return ReasonMalformed
	default:
		return ReasonUnavailable
	}
}

// MaxJTIBytes bounds a jti: verdictd's are 30 bytes (a millisecond time and 128 random bits,
// base64url).
const MaxJTIBytes = 256

func checkJTI(jti string, expires time.Time) error {
	switch {
	case jti == "":
		return fmt.Errorf("%w: empty jti", ErrMalformed)
	case len(jti) > MaxJTIBytes:
		return fmt.Errorf("%w: jti longer than %d bytes", ErrMalformed, MaxJTIBytes)
	case expires.IsZero():
		return fmt.Errorf("%w: no expiry", ErrMalformed)
	}
	return nil
}
