package waiting

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Memory keeps continuations in this process: one gateway replica only, and a restart voids
// every outstanding requestState (the host then sees request_state_replayed and the user
// starts over).
type Memory struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[string]Entry // by nonce
	byUser  map[string]map[string]struct{}
	mine    map[string]Usage
	all     Usage
}

// NewMemory returns an empty store on the clock now, which decides expiry.
func NewMemory(now func() time.Time) *Memory {
	return &Memory{now: now, entries: map[string]Entry{}, byUser: map[string]map[string]struct{}{}, mine: map[string]Usage{}}
}

var _ Store = (*Memory)(nil)

// Put stores p unless a bound of lim would be passed. Expired continuations are swept only
// when a bound would refuse p: first the principal's, then, at the global bound, all.
func (s *Memory) Put(_ context.Context, p Entry, lim Limits) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	size := len(p.Data)
	err := Admit(size, s.mine[p.Principal], s.all, lim)
	if errors.Is(err, ErrBusyPrincipal) {
		s.sweepPrincipal(p.Principal, now)
		err = Admit(size, s.mine[p.Principal], s.all, lim)
	}
	if errors.Is(err, ErrBusy) {
		// Sweeping all is O(entries): done only when the store is full, which the rate limit
		// and the principals' shares make rare.
		for nonce, e := range s.entries {
			if !now.Before(e.Expiry) {
				s.remove(nonce, e)
			}
		}
		err = Admit(size, s.mine[p.Principal], s.all, lim)
	}
	if err != nil {
		return err
	}
	if old, ok := s.entries[p.Nonce]; ok {
		s.remove(p.Nonce, old) // a nonce is 128 random bits; never in practice
	}
	s.entries[p.Nonce] = p
	set := s.byUser[p.Principal]
	if set == nil {
		set = map[string]struct{}{}
		s.byUser[p.Principal] = set
	}
	set[p.Nonce] = struct{}{}
	u := s.mine[p.Principal]
	s.mine[p.Principal] = Usage{Count: u.Count + 1, Bytes: u.Bytes + size}
	s.all = Usage{Count: s.all.Count + 1, Bytes: s.all.Bytes + size}
	return nil
}

func (s *Memory) sweepPrincipal(principal string, now time.Time) {
	for nonce := range s.byUser[principal] {
		if e := s.entries[nonce]; !now.Before(e.Expiry) {
			s.remove(nonce, e)
		}
	}
}

// remove drops e (under nonce) and its counts. The caller holds mu.
func (s *Memory) remove(nonce string, e Entry) {
	delete(s.entries, nonce)
	if set := s.byUser[e.Principal]; set != nil {
		delete(set, nonce)
		if len(set) == 0 {
			delete(s.byUser, e.Principal)
		}
	}
	u := s.mine[e.Principal]
	u = Usage{Count: u.Count - 1, Bytes: u.Bytes - len(e.Data)}
	if u.Count == 0 {
		delete(s.mine, e.Principal)
	} else {
		s.mine[e.Principal] = u
	}
	s.all = Usage{Count: s.all.Count - 1, Bytes: s.all.Bytes - len(e.Data)}
}

// Take removes the continuation under nonce when it was issued to principal (another
// principal's take leaves it in place), and returns it unless it has expired.
func (s *Memory) Take(_ context.Context, principal, nonce string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[nonce]
	// Another principal's take removes nothing: a token is bound to its principal by its
	// MAC, so this is another principal guessing a nonce, and must not void the owner's
	// continuation.
	if !ok || e.Principal != principal {
		return nil, ErrNotFound
	}
	s.remove(nonce, e)
	if !s.now().Before(e.Expiry) {
		return nil, ErrNotFound
	}
	return e.Data, nil
}

// Principal sweeps principal's expired continuations and reports what remains.
func (s *Memory) Principal(_ context.Context, principal string) (Usage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepPrincipal(principal, s.now())
	return s.mine[principal], nil
}

// Total reports what the store holds, expired continuations not yet swept included.
func (s *Memory) Total() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all
}

// Ready is always nil: the store is this process.
func (s *Memory) Ready(context.Context) error { return nil }

// Close does nothing; the store is dropped with the process.
func (s *Memory) Close() error { return nil }
