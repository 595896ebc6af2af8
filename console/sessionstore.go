package console

import (
	"context"
	"sync"
	"time"
)

// Session store kinds (session.store.kind).
const (
	SessionStoreMemory = "memory"
	SessionStoreEtcd   = "etcd"
)

// A sessionStore keeps the sessions: memoryStore in the process (one replica; a restart signs
// everyone out), etcdStore in an etcd cluster every replica shares. Keys are derived from
// cookie values (keysOf); a store never sees a cookie value. Every method but len fails with
// errSessionStore when the store cannot answer, and the console then refuses the request.
type sessionStore interface {
	// create stores rec under key; a store holding max sessions first ends one to make room.
	create(ctx context.Context, key string, rec storedSession, max int) error
	// get returns the session stored under key, errNoSession when there is none.
	get(ctx context.Context, key string) (storedSession, error)
	// touch records a use of the session read as rec, errNoSession when it was ended since.
	touch(ctx context.Context, key string, rec storedSession, used time.Time) error
	// end removes the session stored under key for principal, if it is there.
	end(ctx context.Context, key, principal string) error
	// endAll removes every session of principal and returns how many it removed.
	endAll(ctx context.Context, principal string) (int, error)
	// len is the number of sessions held (as last counted, for a store that counts remotely).
	len() int
	// ready reports whether the store answers.
	ready(ctx context.Context) error
	// shared reports whether other replicas read the same store: then sign-ins in progress
	// are kept in it too (putLogin, takeLogin), so that the callback may reach any replica.
	shared() bool
	putLogin(ctx context.Context, key string, sealed []byte) error
	// takeLogin removes and returns the sign-in in progress stored under key, errNoSession
	// when there is none: of two callbacks with one state, on any replicas, one gets it.
	takeLogin(ctx context.Context, key string) ([]byte, error)
	close() error
}

// memoryStore keeps sessions in the process. It is bounded: when full, a new session replaces
// the one closest to its end.
type memoryStore struct {
	now       func() time.Time
	ttl, idle time.Duration

	mu          sync.Mutex
	byKey       map[string]*storedSession
	byPrincipal map[string]map[string]bool
}

var _ sessionStore = (*memoryStore)(nil)

func newMemoryStore(now func() time.Time, ttl, idle time.Duration) *memoryStore {
	return &memoryStore{now: now, ttl: ttl, idle: idle, byKey: map[string]*storedSession{}, byPrincipal: map[string]map[string]bool{}}
}

func (m *memoryStore) create(_ context.Context, key string, rec storedSession, max int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(m.now())
	for len(m.byKey) >= max {
		m.evictOne()
	}
	m.byKey[key] = &rec
	if m.byPrincipal[rec.Principal] == nil {
		m.byPrincipal[rec.Principal] = map[string]bool{}
	}
	m.byPrincipal[rec.Principal][key] = true
	return nil
}

func (m *memoryStore) get(_ context.Context, key string) (storedSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.byKey[key]
	if !ok {
		return storedSession{}, errNoSession
	}
	return *rec, nil
}

func (m *memoryStore) touch(_ context.Context, key string, _ storedSession, used time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.byKey[key]
	if !ok {
		return errNoSession
	}
	rec.Used = used
	return nil
}

func (m *memoryStore) end(_ context.Context, key, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.remove(key)
	return nil
}

func (m *memoryStore) endAll(_ context.Context, principal string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for key := range m.byPrincipal[principal] {
		m.remove(key)
		n++
	}
	return n, nil
}

func (m *memoryStore) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byKey)
}

func (m *memoryStore) ready(context.Context) error { return nil }
func (m *memoryStore) shared() bool                { return false }
func (m *memoryStore) close() error                { return nil }

// The process's own table of sign-ins (flows.Table) is the only one: nothing is put here.
func (m *memoryStore) putLogin(context.Context, string, []byte) error { return nil }
func (m *memoryStore) takeLogin(context.Context, string) ([]byte, error) {
	return nil, errNoSession
}

// remove removes the session under key and its index entry; the caller holds mu.
func (m *memoryStore) remove(key string) {
	rec, ok := m.byKey[key]
	if !ok {
		return
	}
	delete(m.byKey, key)
	if keys := m.byPrincipal[rec.Principal]; keys != nil {
		delete(keys, key)
		if len(keys) == 0 {
			delete(m.byPrincipal, rec.Principal)
		}
	}
}

// endOf is when rec ends, unless it is used again.
func (m *memoryStore) endOf(rec *storedSession) time.Time {
	end := rec.Created.Add(m.ttl)
	if idle := rec.Used.Add(m.idle); idle.Before(end) {
		return idle
	}
	return end
}

// sweep removes every ended session; the caller holds mu.
func (m *memoryStore) sweep(now time.Time) {
	for k, rec := range m.byKey {
		if !now.Before(m.endOf(rec)) {
			m.remove(k)
		}
	}
}

// evictOne removes the session closest to its end; the caller holds mu.
func (m *memoryStore) evictOne() {
	var victim string
	var soonest time.Time
	first := true
	for k, rec := range m.byKey {
		if end := m.endOf(rec); first || end.Before(soonest) {
			victim, soonest, first = k, end, false
		}
	}
	m.remove(victim)
}
