package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Cache timing of an issuer's signing keys.
const (
	// KeyMaxAge is how long fetched keys are used without asking the issuer again. Past it, a
	// token is verified only after a successful refetch: a key the issuer has withdrawn
	// stops working within KeyMaxAge, and an unreachable issuer fails closed.
	KeyMaxAge = 10 * time.Minute
	// RefetchInterval is the least time between two fetches of an issuer's keys (or two tries
	// after a failure), so that tokens with made-up key IDs cannot turn the resource server
	// into a load generator against its authorization server.
	RefetchInterval = 30 * time.Second
)

// keySet is one issuer's metadata and signing keys, fetched on demand and cached.
type keySet struct {
	issuer string
	client *http.Client
	now    func() time.Time

	// fetching is held (a token in the channel) by the one goroutine fetching; others wait
	// for it, or for their context.
	fetching chan struct{}

	mu      sync.Mutex
	meta    *metadata
	keys    []jose.JSONWebKey
	fetched time.Time // when keys were fetched; zero if never
	tried   time.Time // when a fetch was last started
	lastErr error     // the outcome of the last fetch
}

// candidates returns the keys that may have signed a token with this kid and alg: those
// with that key ID (any, when the token names none), no other algorithm and a key type
// that alg uses.
func candidates(keys []jose.JSONWebKey, kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range keys {
		if (kid == "" || k.KeyID == kid) && (k.Algorithm == "" || k.Algorithm == alg) &&
			(k.Use == "" || k.Use == "sig") && keyFits(k.Key, alg) {
			out = append(out, k)
		}
	}
	return out
}

func keyFits(key any, alg string) bool {
	switch key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return strings.HasPrefix(alg, "ES")
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// lookup returns the keys for kid and alg, fetching the key set when the cache is older than
// KeyMaxAge or holds no such key, at most once per RefetchInterval. It fails with
// UnknownKey when, after that, no key fits, and IdPUnavailable when the keys cannot be had.
func (s *keySet) lookup(ctx context.Context, kid, alg string) ([]jose.JSONWebKey, error) {
	if keys, fresh := s.cached(); fresh {
		if c := candidates(keys, kid, alg); len(c) > 0 {
			return c, nil
		}
	}
	select {
	case s.fetching <- struct{}{}:
	case <-ctx.Done():
		return nil, &Error{Reason: IdPUnavailable, Issuer: s.issuer, Err: ctx.Err()}
	}
	defer func() { <-s.fetching }()

	// Another goroutine may have fetched while this one waited.
	keys, fresh := s.cached()
	if fresh {
		if c := candidates(keys, kid, alg); len(c) > 0 {
			return c, nil
		}
	}
	now := s.now()
	s.mu.Lock()
	tried, fetched, lastErr := s.tried, s.fetched, s.lastErr
	recent := !tried.IsZero() && now.Sub(tried) < RefetchInterval
	if !recent {
		s.tried = now
	}
	s.mu.Unlock()
	if recent {
		if !fresh {
			return nil, &Error{Reason: IdPUnavailable, Issuer: s.issuer, Err: fmt.Errorf("keys not refreshed (last try %v ago): %v", now.Sub(tried), lastErr)}
		}
		return nil, refuse(UnknownKey, s.issuer, "no published key has kid %q for %s (keys fetched %v ago)", kid, alg, now.Sub(fetched))
	}

	keys, err := s.fetch(ctx)
	s.mu.Lock()
	s.lastErr = err
	if err == nil {
		s.keys, s.fetched = keys, now
	}
	s.mu.Unlock()
	if err != nil {
		return nil, &Error{Reason: IdPUnavailable, Issuer: s.issuer, Err: err}
	}
	if c := candidates(keys, kid, alg); len(c) > 0 {
		return c, nil
	}
	return nil, refuse(UnknownKey, s.issuer, "no published key has kid %q for %s", kid, alg)
}

func (s *keySet) cached() ([]jose.JSONWebKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys, !s.fetched.IsZero() && s.now().Sub(s.fetched) < KeyMaxAge
}

// metadata returns the issuer's metadata, discovering it if it has not been yet.
func (s *keySet) metadata(ctx context.Context) (*metadata, error) {
	s.mu.Lock()
	m := s.meta
	s.mu.Unlock()
	if m != nil {
		return m, nil
	}
	m, err := discover(ctx, s.client, s.issuer)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.meta = m
	s.mu.Unlock()
	return m, nil
}

// fetch reads the issuer's key set, keeping the public signature keys go-jose understands and
// skipping the rest (RFC 7517 §5: keys of unknown types are ignored, not fatal).
func (s *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	m, err := s.metadata(ctx)
	if err != nil {
		return nil, err
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := getJSON(ctx, s.client, m.JWKSURI, &set); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !k.Valid() {
			continue
		}
		if !k.IsPublic() {
			k = k.Public() // a published private key is the issuer's mistake; use only its public half
		}
		if k.Key == nil {
			continue
		}
		keys = append(keys, k)
	}
	return keys, nil
}
