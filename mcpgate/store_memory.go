package mcpgate

import (
	"context"
	"errors"
	"sync"
	"time"
)

// memoryStore keeps continuations in this process: one gateway replica only, and a restart
// voids every outstanding requestState (the host then sees request_state_replayed and the user
// starts over).
type memoryStore struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[string]pending // by nonce
	byUser  map[string]map[string]struct{}
	mine    map[string]usage
	all     usage
}

func newMemoryStore(now func() time.Time) *memoryStore {
	return &memoryStore{now: now, entries: map[string]pending{}, byUser: map[string]map[string]struct{}{}, mine: map[string]usage{}}
}

var _ continuationStore = (*memoryStore)(nil)

func (s *memoryStore) put(_ context.Context, p pending, lim stateLimits) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	size := len(p.Data)
	err := admit(size, s.mine[p.Principal], s.all, lim)
	if errors.Is(err, ErrBusyPrincipal) {
		s.sweepPrincipal(p.Principal, now)
		err = admit(size, s.mine[p.Principal], s.all, lim)
	}
	if errors.Is(err, ErrBusy) {
		// Sweeping all is O(entries): done only when the store is full, which the rate limit
		// and the principals' shares make rare.
		for nonce, e := range s.entries {
			if !now.Before(e.Expiry) {
				s.remove(nonce, e)
			}
		}
		err = admit(size, s.mine[p.Principal], s.all, lim)
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
	s.mine[p.Principal] = usage{Count: u.Count + 1, Bytes: u.Bytes + size}
	s.all = usage{Count: s.all.Count + 1, Bytes: s.all.Bytes + size}
	return nil
}

func (s *memoryStore) sweepPrincipal(principal string, now time.Time) {
	for nonce := range s.byUser[principal] {
		if e := s.entries[nonce]; !now.Before(e.Expiry) {
			s.remove(nonce, e)
		}
	}
}

// remove drops e (under nonce) and its counts. The caller holds mu.
func (s *memoryStore) remove(nonce string, e pending) {
	delete(s.entries, nonce)
	if set := s.byUser[e.Principal]; set != nil {
		delete(set, nonce)
		if len(set) == 0 {
			delete(s.byUser, e.Principal)
		}
	}
	u := s.mine[e.Principal]
	u = usage{Count: u.Count - 1, Bytes: u.Bytes - len(e.Data)}
	if u.Count == 0 {
		delete(s.mine, e.Principal)
	} else {
		s.mine[e.Principal] = u
	}
	s.all = usage{Count: s.all.Count - 1, Bytes: s.all.Bytes - len(e.Data)}
}

func (s *memoryStore) take(_ context.Context, principal, nonce string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[nonce]
	if !ok {
		return nil, errNoContinuation
	}
	if e.Principal != principal {
		// Not removed: a token is bound to its principal by its MAC, so this is another
		// principal guessing a nonce, and must not void the owner's continuation.
		return nil, errNoContinuation
	}
	s.remove(nonce, e)
	if !s.now().Before(e.Expiry) {
		return nil, errNoContinuation
	}
	return e.Data, nil
}

func (s *memoryStore) principal(_ context.Context, principal string) (usage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepPrincipal(principal, s.now())
	return s.mine[principal], nil
}

func (s *memoryStore) total() usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all
}

func (s *memoryStore) ready(context.Context) error { return nil }

func (s *memoryStore) close() error { return nil }
