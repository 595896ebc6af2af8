package mcpgate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/waiting"
)

// Kinds of the continuation store.
const (
	StateStoreMemory = "memory"
	StateStoreEtcd   = "etcd"
)

// Defaults of the state section. Every continuation is counted at its encoded size, which
// includes the host's instruction segments (up to 1 MiB each at verdictd), so the byte bounds,
// not the counts, are what bound memory under a flood of large calls.
const (
	// DefaultMaxPending bounds the continuations waiting in the whole gateway (or, with etcd,
	// the deployment).
	DefaultMaxPending = 10000
	// DefaultMaxBytes bounds their encoded bytes: 256 MiB.
	DefaultMaxBytes = 256 << 20
	// DefaultPrincipalPending is one principal's share of waiting continuations: a user has a
	// few questions open at once, not hundreds.
	DefaultPrincipalPending = 16
	// DefaultPrincipalBytes is one principal's share of bytes: 8 MiB, room for a handful of
	// continuations carrying a conversation near verdictd's 1 MiB segment limit.
	DefaultPrincipalBytes = 8 << 20
	// DefaultCallsPerMinute and DefaultCallBurst are the token bucket of one principal's
	// first-round gated calls: a burst of 10, refilled at 30 a minute. A person approving
	// irreversible actions does not start more.
	DefaultCallsPerMinute = 30
	DefaultCallBurst      = 10
)

// StateConfig is the state section: where continuations wait between question rounds, and the
// bounds that keep one principal from taking the room of another.
type StateConfig struct {
	// Kind is memory (the default: this process only) or etcd (shared by every replica; the
	// connection keys are those of etcdx.Config, at the section's own level).
	Kind string `json:"kind,omitempty"`
	etcdx.Config
	// MaxPending and MaxBytes bound all waiting continuations together (count and encoded
	// bytes); a call past them is refused busy.
	MaxPending int `json:"max_pending,omitempty"`
	MaxBytes   int `json:"max_bytes,omitempty"`
	// PrincipalPending and PrincipalBytes are one principal's share; a call past them is
	// refused busy_principal, and a continuation larger than PrincipalBytes alone
	// state_too_large.
	PrincipalPending int `json:"principal_pending,omitempty"`
	PrincipalBytes   int `json:"principal_bytes,omitempty"`
	// CallsPerMinute and CallBurst rate-limit one principal's first-round gated calls
	// (rate_limited). Continuations of a call already asked are not limited.
	CallsPerMinute int `json:"calls_per_minute,omitempty"`
	CallBurst      int `json:"call_burst,omitempty"`
}

// limits are the bounds of the waiting continuations in force, defaults applied.
func (s *StateConfig) limits() waiting.Limits {
	return waiting.Limits{
		MaxPending:       cmp.Or(s.MaxPending, DefaultMaxPending),
		MaxBytes:         cmp.Or(s.MaxBytes, DefaultMaxBytes),
		PrincipalPending: cmp.Or(s.PrincipalPending, DefaultPrincipalPending),
		PrincipalBytes:   cmp.Or(s.PrincipalBytes, DefaultPrincipalBytes),
	}
}

// callRate is the token bucket of one principal's first-round gated calls in force, defaults
// applied: its refill a minute and its burst.
func (s *StateConfig) callRate() (perMinute, burst int) {
	return cmp.Or(s.CallsPerMinute, DefaultCallsPerMinute), cmp.Or(s.CallBurst, DefaultCallBurst)
}

// minPrincipalBytes is the least per-principal byte share accepted: one continuation of a
// small call encodes to a few KiB.
const minPrincipalBytes = 64 << 10

// validate reports the problems of the state section. A principal's share must be at most half
// of the whole: then one principal's flood leaves at least half of every bound to the others
// (see docs/gateway.md, Waiting requests).
func (s *StateConfig) validate() []error {
	var errs []error
	bad := func(key string, err error) { errs = append(errs, confx.Place(confx.Key("state", key), err)) }
	switch s.Kind {
	case "", StateStoreMemory:
		if !s.Config.Empty() {
			errs = append(errs, confx.Place("state", errors.New("state: endpoints, prefix, tls, username, password_file and timeouts apply only to kind etcd")))
		}
	case StateStoreEtcd:
		errs = append(errs, s.Config.Validate("state", "")...)
	default:
		bad("kind", fmt.Errorf("state.kind %q: want memory or etcd", s.Kind))
	}
	for _, b := range []struct {
		key string
		v   int
	}{{"max_pending", s.MaxPending}, {"max_bytes", s.MaxBytes}, {"principal_pending", s.PrincipalPending},
		{"principal_bytes", s.PrincipalBytes}, {"calls_per_minute", s.CallsPerMinute}, {"call_burst", s.CallBurst}} {
		if b.v < 0 {
			bad(b.key, fmt.Errorf("state.%s must not be negative", b.key))
		}
	}
	l := s.limits()
	if l.PrincipalPending*2 > l.MaxPending {
		bad("principal_pending", fmt.Errorf("state.principal_pending %d is more than half of max_pending %d: one principal could make every other call busy", l.PrincipalPending, l.MaxPending))
	}
	if l.PrincipalBytes*2 > l.MaxBytes {
		bad("principal_bytes", fmt.Errorf("state.principal_bytes %d is more than half of max_bytes %d: one principal could make every other call busy", l.PrincipalBytes, l.MaxBytes))
	}
	if s.PrincipalBytes != 0 && s.PrincipalBytes < minPrincipalBytes {
		bad("principal_bytes", fmt.Errorf("state.principal_bytes %d is under %d: no call would fit", s.PrincipalBytes, minPrincipalBytes))
	}
	return errs
}

// Kinds of entry the state section's store keeps, each in a store of its own (see
// waiting.EtcdOptions.Kind): the continuations of gated calls, and the relayed questions of
// pass-through tools, which a continuation's token can never reach.
const (
	entriesCalls  = ""
	entriesRelays = "relay"
)

// openStore opens a store of the state section for entries of kind entries: this process's for
// kind memory, the etcd cluster's for kind etcd, where an entry's keys live for ttl (see
// waiting.Etcd). now decides expiry.
func (s *StateConfig) openStore(ctx context.Context, entries string, ttl time.Duration, now func() time.Time) (waiting.Store, error) {
	if s.Kind != StateStoreEtcd {
		return waiting.NewMemory(now), nil
	}
	pw, err := s.ReadPassword("state")
	if err != nil {
		return nil, err
	}
	e, err := waiting.NewEtcd(ctx, waiting.EtcdOptions{Endpoints: s.Endpoints, Prefix: s.Prefix, Kind: entries, TLS: s.TLS,
		Username: s.Username, Password: pw, DialTimeout: s.DialTimeout.D(), RequestTimeout: s.RequestTimeout.D(),
		TTL: ttl, Now: now})
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return e, nil
}

// limiter returns the rate limit of first-round gated calls in force over calls, the
// continuations' store: with kind etcd each principal's bucket is a key of its cluster, shared
// by every replica (waiting.EtcdLimiter); with kind memory, this process's. now is the clock
// that refills the buckets.
func (s *StateConfig) limiter(calls waiting.Store, now func() time.Time) waiting.Limiter {
	perMinute, burst := s.callRate()
	r := waiting.Rate{PerMinute: perMinute, Burst: burst}
	if e, ok := calls.(*waiting.Etcd); ok {
		return e.Limiter(r)
	}
	return waiting.NewMemoryLimiter(r, now)
}

// closeStore closes st; its error is the state section's.
func closeStore(st waiting.Store) error {
	if err := st.Close(); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}
