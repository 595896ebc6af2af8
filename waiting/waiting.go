// Package waiting keeps the continuations of calls waiting for their user's answer: the
// single-use state behind an input_required result, keyed by the nonce of its requestState
// token, until the host answers with that token or the continuation expires.
//
// A [Store] holds them, bounded per principal and in total, by count and by encoded bytes
// ([Limits]); a continuation past a bound is refused with the error of that bound ([ErrBusy],
// [ErrBusyPrincipal], [ErrStateTooLarge]), and a store that cannot give a definite answer
// refuses with [ErrStateUnavailable]. A continuation is taken at most once, by the principal it
// was issued to, before its expiry; anything else finds [ErrNotFound].
//
// The memory backend ([Memory]) keeps continuations in the process: one replica. The etcd
// backend ([Etcd]) is shared by every replica of a deployment, so that a question asked
// through one replica can be answered through any other, and answered once across all of them.
// The gateway keeps the relayed questions of pass-through tools in a second store of the same
// backend, of another kind (EtcdOptions.Kind), under the same bounds counted apart.
//
// The store never reads what it keeps: an [Entry]'s data is the caller's encoding, and its
// length is what the byte bounds count.
package waiting

import (
	"context"
	"errors"
	"time"

	"github.com/verdictgate/verdict/api"
)

// Reasons a continuation is refused a place in the store. Each text is the reason code the
// gateway ends the refused call with, in _meta["io.verdict/reason"], and is package api's.
var (
	// ErrBusy: the store as a whole is at its count or byte bound.
	ErrBusy = errors.New(api.ReasonBusy)
	// ErrBusyPrincipal: the principal already has its share of waiting continuations (count or
	// bytes).
	ErrBusyPrincipal = errors.New(api.ReasonBusyPrincipal)
	// ErrStateTooLarge: the continuation alone is larger than a principal's byte share; it
	// could never be stored.
	ErrStateTooLarge = errors.New(api.ReasonStateTooLarge)
	// ErrStateUnavailable: the store could not give a definite answer (etcd unreachable, a
	// request timed out). The call is refused; nothing is assumed.
	ErrStateUnavailable = errors.New(api.ReasonStateUnavailable)
)

// ErrNotFound: Take found nothing under the nonce (never stored, already taken, expired, or
// issued to another principal).
var ErrNotFound = errors.New("no continuation")

// Entry is one continuation as a store keeps it: opaque encoded bytes, whose length is what
// the byte bounds count.
type Entry struct {
	Nonce     string
	Principal string
	Data      []byte
	Expiry    time.Time
}

// Usage is what one principal, or the whole store, holds.
type Usage struct {
	Count int
	Bytes int
}

// Limits are the bounds of a store: MaxPending and MaxBytes of all continuations together,
// PrincipalPending and PrincipalBytes of one principal's.
type Limits struct {
	MaxPending, MaxBytes             int
	PrincipalPending, PrincipalBytes int
}

// Store keeps the single-use continuations of input_required results, keyed by their
// requestState nonce. Each kind of backend (memory, etcd) implements it; implementations are
// safe for concurrent use.
type Store interface {
	// Put stores e unless a bound of lim would be passed: ErrStateTooLarge,
	// ErrBusyPrincipal, ErrBusy, or ErrStateUnavailable when the store cannot tell.
	Put(ctx context.Context, e Entry, lim Limits) error
	// Take removes and returns the continuation under nonce, issued to principal. Of any
	// number of concurrent takes of one nonce, on any replica, at most one gets it; the others
	// get ErrNotFound. An expired continuation is ErrNotFound.
	Take(ctx context.Context, principal, nonce string) ([]byte, error)
	// Principal reports what principal holds now (expired continuations may still count
	// until swept: the check is on the safe side).
	Principal(ctx context.Context, principal string) (Usage, error)
	// Total reports what the whole store holds, for the metrics.
	Total() Usage
	// Ready reports whether the store answers now (for /readyz).
	Ready(ctx context.Context) error
	Close() error
}

// Admit checks one more continuation of size bytes against lim, given what its principal
// (mine) and the store (all) hold: nil, or the error of the first bound it would pass.
func Admit(size int, mine, all Usage, lim Limits) error {
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
