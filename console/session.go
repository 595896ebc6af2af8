package console

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// A session is one signed-in approver.
type session struct {
	// Subject is the user as verdictd and the executor name principals: <issuer>#<value of
	// the principal claim>, sub by default.
	Subject string `json:"subject"`
	// Name is what the page shows: the ID token's name, preferred_username or email, else Subject.
	Name   string   `json:"name"`
	Groups []string `json:"groups,omitempty"`
	// AccessToken is the approver's access token, forwarded to verdictd's approvals API; it
	// never leaves the server otherwise.
	AccessToken string    `json:"access_token"`
	TokenExpiry time.Time `json:"token_expiry,omitzero"` // zero when the provider did not say
	// CSRF is the session's form token.
	CSRF string `json:"csrf"`
	// Created is the sign-in's time: the session ends at Created + session.ttl.
	Created time.Time `json:"created"`
}

// inGroup reports whether the session's groups hold any of groups.
func (s *session) inGroup(groups []string) bool {
	return slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(s.Groups, g) })
}

var (
	// errNoSession: the cookie names no live session (none, unknown, expired, idle too long,
	// or ended by a sign-out, here or on another replica).
	errNoSession = errors.New("no session")
	// errSessionStore: the session store did not answer. Nothing is accepted that cannot be
	// checked: the request is refused session_store_unavailable, never let through.
	errSessionStore = errors.New("session store unavailable")
)

// A storedSession is what a store holds of one session. The times and the principal's hash
// are in clear, for the store's bounds and its index; the session itself is sealed under a key
// derived from the cookie value, which the store never sees.
type storedSession struct {
	// Principal is the hex SHA-256 of the session's subject: "sign out everywhere" ends every
	// session stored under it.
	Principal string    `json:"principal"`
	Created   time.Time `json:"created"`
	Used      time.Time `json:"used"`
	Sealed    []byte    `json:"sealed"`

	// rev identifies this incarnation of the stored session (etcd: its key's create
	// revision), so that recording a use never brings back a session ended meanwhile.
	rev int64
}

// sessions are the console's sign-in sessions, kept in a sessionStore: the process's memory
// (one replica) or etcd (shared by replicas, kept across restarts). They end at ttl after
// sign-in or idle after their last use, checked at every read against now.
type sessions struct {
	store     sessionStore
	now       func() time.Time
	ttl, idle time.Duration
	max       int
}

func newSessions(store sessionStore, now func() time.Time, ttl, idle time.Duration, max int) *sessions {
	return &sessions{store: store, now: now, ttl: ttl, idle: idle, max: max}
}

// keysOf derives from a cookie value what the store may know of it, the key it is stored
// under, and what it must not, the key its session is sealed with: a store's contents (an etcd
// snapshot, a backup) neither name a cookie nor open a session.
func keysOf(id string) (key string, seal []byte) {
	k, kerr := hkdf.Key(sha256.New, []byte(id), nil, "verdict-console session key", 32)
	seal, serr := hkdf.Key(sha256.New, []byte(id), nil, "verdict-console session seal", 32)
	if err := errors.Join(kerr, serr); err != nil {
		panic(err) // only for a length SHA-256 cannot give
	}
	return hex.EncodeToString(k), seal
}

func principalKey(subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return hex.EncodeToString(sum[:])
}

// sealJSON encrypts v with AES-256-GCM under key, bound to ad (the stored key), so that a value
// moved to another key does not open.
func sealJSON(key []byte, ad string, v any) ([]byte, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	rand.Read(nonce)
	return aead.Seal(nonce, nonce, plain, []byte(ad)), nil
}

// openJSON reverses sealJSON; anything that does not open is no session.
func openJSON(key []byte, ad string, sealed []byte, v any) error {
	aead, err := newAEAD(key)
	if err != nil {
		return err
	}
	if len(sealed) < aead.NonceSize() {
		return errNoSession
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(ad))
	if err != nil || json.Unmarshal(plain, v) != nil {
		return errNoSession
	}
	return nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// create stores a session for s and returns the cookie value that names it (256 random bits)
// and the session as stored.
func (ss *sessions) create(ctx context.Context, s session) (string, session, error) {
	id := rand.Text() + rand.Text() // 2×128 bits, base32
	now := ss.now()
	s.CSRF = rand.Text() + rand.Text()
	s.Created = now
	key, sk := keysOf(id)
	sealed, err := sealJSON(sk, key, s)
	if err != nil {
		return "", session{}, err
	}
	rec := storedSession{Principal: principalKey(s.Subject), Created: now, Used: now, Sealed: sealed}
	if err := ss.store.create(ctx, key, rec, ss.max); err != nil {
		return "", session{}, err
	}
	return id, s, nil
}

// get returns the live session the cookie value id names, and records this use of it. A use is
// written at most once per touchEvery, so that a session read on every page does not make a
// write of each; the idle timeout counts from the use last written.
func (ss *sessions) get(ctx context.Context, id string) (session, error) {
	if id == "" {
		return session{}, errNoSession
	}
	key, sk := keysOf(id)
	rec, err := ss.store.get(ctx, key)
	if err != nil {
		return session{}, err
	}
	var s session
	if err := openJSON(sk, key, rec.Sealed, &s); err != nil {
		return session{}, err
	}
	now := ss.now()
	if ss.ended(s.Created, rec.Used, now) {
		if err := ss.store.end(ctx, key, rec.Principal); err != nil {
			return session{}, err
		}
		return session{}, errNoSession
	}
	if now.Sub(rec.Used) >= ss.touchEvery() {
		if err := ss.store.touch(ctx, key, rec, now); err != nil {
			return session{}, err
		}
	}
	return s, nil
}

// touchEvery is how often a session's use is written: a tenth of the idle timeout, at most a
// minute. A session thus ends at most that much before idle_timeout after its last use.
func (ss *sessions) touchEvery() time.Duration { return min(ss.idle/10, time.Minute) }

// end ends the session id names, if there is one.
func (ss *sessions) end(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	key, _ := keysOf(id)
	rec, err := ss.store.get(ctx, key)
	if errors.Is(err, errNoSession) {
		return nil
	}
	if err != nil {
		return err
	}
	return ss.store.end(ctx, key, rec.Principal)
}

// endAll ends every session of subject, on every replica sharing the store, and returns how
// many it ended.
func (ss *sessions) endAll(ctx context.Context, subject string) (int, error) {
	return ss.store.endAll(ctx, principalKey(subject))
}

func (ss *sessions) ended(created, used, now time.Time) bool {
	return !now.Before(created.Add(ss.ttl)) || !now.Before(used.Add(ss.idle))
}

// unavailable wraps a store's failure as errSessionStore.
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %v", errSessionStore, op, err)
}
