package mcpgate

import (
	"context"
	"errors"
	"time"
)

// Reasons a continuation is refused a place in the store. Each is also the reason code of the
// tool error the call ends with, in _meta["io.verdict/reason"].
var (
	// ErrBusy: the store as a whole is at its count or byte bound.
	ErrBusy = errors.New("busy")
	// ErrBusyPrincipal: the principal already has its share of waiting continuations (count or
	// bytes).
	ErrBusyPrincipal = errors.New("busy_principal")
	// ErrStateTooLarge: the continuation alone is larger than a principal's byte share; it
	// could never be stored.
	ErrStateTooLarge = errors.New("state_too_large")
	// ErrStateUnavailable: the store could not give a definite answer (etcd unreachable, a
	// request timed out). The call is refused; nothing is assumed.
	ErrStateUnavailable = errors.New("state_unavailable")
)

// errNoContinuation: take found nothing under the nonce (never stored, already taken, or
// expired).
var errNoContinuation = errors.New("no continuation")

// pending is one continuation as a store keeps it: opaque encoded bytes (see encodeState),
// whose length is what the byte bounds count.
type pending struct {
	Nonce     string
	Principal string
	Data      []byte
	Expiry    time.Time
}

// usage is what one principal, or the whole store, holds.
type usage struct {
	Count int
	Bytes int
}

// continuationStore keeps the single-use continuations of input_required results, keyed by
// their requestState nonce. Each kind of backend (memory, etcd) implements it.
type continuationStore interface {
	// put stores p unless a bound of lim would be passed: ErrStateTooLarge,
	// ErrBusyPrincipal, ErrBusy, or ErrStateUnavailable when the store cannot tell.
	put(ctx context.Context, p pending, lim stateLimits) error
	// take removes and returns the continuation under nonce, issued to principal. Of any
	// number of concurrent takes of one nonce, on any replica, at most one gets it; the others
	// get errNoContinuation. An expired continuation is errNoContinuation.
	take(ctx context.Context, principal, nonce string) ([]byte, error)
	// principal reports what principal holds now (expired continuations may still count
	// until swept: the check is on the safe side).
	principal(ctx context.Context, principal string) (usage, error)
	// total reports what the whole store holds, for the metrics.
	total() usage
	// ready reports whether the store answers now (for /readyz).
	ready(ctx context.Context) error
	close() error
}

// admit checks one more continuation of size bytes against lim, given what its principal
// (mine) and the store (all) hold.
func admit(size int, mine, all usage, lim stateLimits) error {
	switch {
	case size > lim.PrincipalBytes:
		return ErrStateTooLarge
	case mine.Count+1 > lim.PrincipalPending || mine.Bytes+size > lim.PrincipalBytes:
		return ErrBusyPrincipal
	case all.Count+1 > lim.MaxPending || all.Bytes+size > lim.MaxBytes:
		return ErrBusy
	}
	return nil
}

// ReasonRateLimited: the principal started more first-round gated calls than its
// calls_per_minute and call_burst allow.
const ReasonRateLimited = "rate_limited"

// storeReasons are the reason codes of calls refused for the waiting continuations' bounds,
// the rate limit, or the store.
func storeReasons() []string {
	return []string{ErrBusy.Error(), ErrBusyPrincipal.Error(), ErrStateTooLarge.Error(), ErrStateUnavailable.Error(), ReasonRateLimited}
}

// storeReason is the reason code of a store error; one the store did not classify is
// state_unavailable (the store could not give a definite answer).
func storeReason(err error) string {
	for _, e := range []error{ErrBusy, ErrBusyPrincipal, ErrStateTooLarge} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return ErrStateUnavailable.Error()
}
