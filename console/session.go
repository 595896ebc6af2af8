package console

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"slices"
	"sync"
	"time"
)

// A session is one signed-in approver. It is immutable once created, but for its last use.
type session struct {
	// Subject is the user as verdictd and the executor name principals: <issuer>#<value of
	// the principal claim>, sub by default.
	Subject string
	// Name is what the page shows: the ID token's name, preferred_username or email, else Subject.
	Name   string
	Groups []string
	// AccessToken is the approver's access token, forwarded to verdictd's approvals API; it
	// never leaves the server otherwise.
	AccessToken string
	TokenExpiry time.Time // zero when the provider did not say
	// CSRF is the session's form token.
	CSRF string

	created  time.Time
	lastSeen time.Time
}

// inGroup reports whether the session's groups hold any of groups.
func (s *session) inGroup(groups []string) bool {
	for _, g := range groups {
		if slices.Contains(s.Groups, g) {
			return true
		}
	}
	return false
}

// errNoSession: the cookie names no live session (none, unknown, expired or idle too long).
var errNoSession = errors.New("no session")

// sessions are the console's sign-in sessions, in memory: a restart signs everyone out. They
// are bounded: when full, a new session replaces the one closest to its end. The map is keyed
// by the SHA-256 of the cookie value, so that what is held is not what a browser presents.
type sessions struct {
	now       func() time.Time
	ttl, idle time.Duration
	max       int

	mu   sync.Mutex
	byID map[[sha256.Size]byte]*session
}

func newSessions(now func() time.Time, ttl, idle time.Duration, max int) *sessions {
	return &sessions{now: now, ttl: ttl, idle: idle, max: max, byID: map[[sha256.Size]byte]*session{}}
}

// create stores a session for s and returns the cookie value that names it (256 random bits)
// and the session as stored.
func (ss *sessions) create(s session) (string, session) {
	id := rand.Text() + rand.Text() // 2×128 bits, base32
	now := ss.now()
	s.CSRF = rand.Text() + rand.Text()
	s.created, s.lastSeen = now, now
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sweep(now)
	for len(ss.byID) >= ss.max {
		ss.evictOne()
	}
	stored := s
	ss.byID[sha256.Sum256([]byte(id))] = &stored
	return id, s
}

// get returns the live session the cookie value id names, and counts this as its use.
func (ss *sessions) get(id string) (session, error) {
	if id == "" {
		return session{}, errNoSession
	}
	key := sha256.Sum256([]byte(id))
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[key]
	if !ok {
		return session{}, errNoSession
	}
	if ss.ended(s, now) {
		delete(ss.byID, key)
		return session{}, errNoSession
	}
	s.lastSeen = now
	return *s, nil
}

// end removes the session id names, if there is one.
func (ss *sessions) end(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byID, sha256.Sum256([]byte(id)))
}

// len is the number of sessions held, ended ones included until they are swept.
func (ss *sessions) len() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byID)
}

func (ss *sessions) ended(s *session, now time.Time) bool {
	return !now.Before(s.created.Add(ss.ttl)) || !now.Before(s.lastSeen.Add(ss.idle))
}

// sweep removes every ended session; the caller holds mu.
func (ss *sessions) sweep(now time.Time) {
	for k, s := range ss.byID {
		if ss.ended(s, now) {
			delete(ss.byID, k)
		}
	}
}

// evictOne removes the session closest to its end; the caller holds mu.
func (ss *sessions) evictOne() {
	var victim [sha256.Size]byte
	var soonest time.Time
	first := true
	for k, s := range ss.byID {
		end := earlier(s.created.Add(ss.ttl), s.lastSeen.Add(ss.idle))
		if first || end.Before(soonest) {
			victim, soonest, first = k, end, false
		}
	}
	delete(ss.byID, victim)
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
