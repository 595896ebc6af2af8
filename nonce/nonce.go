// Package nonce owns the single use of verdicts. A Store consumes a verdict's jti once,
// atomically, and refuses every later attempt for as long as the verdict could still verify:
// its expiry plus the executor's clock skew. Any error from a Store means the verdict must not
// run; Reason maps an error to the executor's reason code.
//
// The bbolt backend ([Bolt]) keeps its entries in the executor's own record file, so the
// executor can consume a nonce and record the start of the execution in one commit. The etcd
// backend ([Etcd]) is shared by several executors: a compare-and-create of the jti's key under a
// lease that outlives expiry plus skew.
package nonce

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/verdictgate/verdict/verdict"
)

// Store consumes verdict nonces.
type Store interface {
	// Consume records jti as used unless it already is, in one atomic step. expires is the
	// verdict's signed exp claim. A jti already used returns an error matching ErrReplayed; a
	// store that cannot vouch for the answer returns an error matching ErrUnavailable.
	Consume(ctx context.Context, jti string, expires time.Time) error
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

// Reason codes of the executor's refusals that a Store decides.
const (
	ReasonReplayed    = string(verdict.Replayed)
	ReasonExpired     = "expired"
	ReasonMalformed   = "malformed"
	ReasonUnavailable = "nonce_store_unavailable"
)

var (
	// ErrReplayed: the jti was already consumed. It is the verifier's own refusal, so
	// errors.Is(err, verdict.ErrReplayed) and verdict.ReasonOf hold for it too.
	ErrReplayed error = verdict.ErrReplayed
	// ErrExpired: the verdict is past its expiry plus skew, so the store no longer keeps what
	// it would need to catch a replay and refuses it instead.
	ErrExpired = errors.New("nonce: verdict past its expiry plus skew")
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
