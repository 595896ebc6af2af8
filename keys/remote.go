package keys

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/verdictgate/verdict/internal/loopback"
	"github.com/verdictgate/verdict/internal/opfile"
)

// Defaults for fetching a JWKS.
const (
	DefaultFetchTimeout    = 10 * time.Second
	DefaultMaxJWKSBytes    = 1 << 20
	DefaultRefreshInterval = 5 * time.Minute
	DefaultMinRefetch      = 30 * time.Second
)

// FetchOptions bound one JWKS fetch.
type FetchOptions struct {
	// Client fetches http(s) locations. Nil means a client that refuses redirects from https to
	// plain http.
	Client *http.Client
	// Timeout bounds one fetch, file or HTTP. Zero means DefaultFetchTimeout.
	Timeout time.Duration
	// MaxBytes bounds the size of the set. Zero means DefaultMaxJWKSBytes.
	MaxBytes int64
}

func (o FetchOptions) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultFetchTimeout
}

func (o FetchOptions) maxBytes() int64 {
	if o.MaxBytes > 0 {
		return o.MaxBytes
	}
	return DefaultMaxJWKSBytes
}

func (o FetchOptions) client() *http.Client {
	if o.Client != nil {
		return o.Client
	}
	return &http.Client{CheckRedirect: noDowngrade}
}

func noDowngrade(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("too many redirects")
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("refusing redirect from https to %s", req.URL.Scheme)
	}
	if err := checkTransport(req.URL); err != nil {
		return fmt.Errorf("refusing redirect: %w", err)
	}
	return nil
}

// checkTransport refuses a key set location whose answer anyone on the path could replace:
// plain http is accepted from a loopback address only. A key set decides which signatures are
// trusted, and a token naming an unknown kid makes the holder fetch it again, so a swapped
// answer would let its author sign verdicts.
func checkTransport(u *url.URL) error {
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if loopback.Host(host) {
			return nil
		}
		return fmt.Errorf("plain http from %q: a key set over http is accepted from a loopback address only; use https", host)
	default:
		return fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
}

// LoadJWKS reads a public key set from location: an https:// URL, an http:// URL of a loopback
// address, or else a file path. Any other URL (plain http to another host, before or after a
// redirect, or another scheme) is an error. The set is parsed with [ParseJWKS].
func LoadJWKS(ctx context.Context, location string, opts FetchOptions) (*Set, error) {
	data, err := fetch(ctx, location, opts)
	if err != nil {
		return nil, err
	}
	subject := "this file"
	if strings.Contains(location, "://") {
		subject = "its answer"
	}
	set, err := parseJWKS(data, subject)
	if err != nil {
		return nil, fmt.Errorf("keys: parse JWKS %s: %w", location, err)
	}
	return set, nil
}

func fetch(ctx context.Context, location string, opts FetchOptions) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	limit := opts.maxBytes()

	var body io.Reader
	switch {
	case strings.HasPrefix(location, "http://") || strings.HasPrefix(location, "https://"):
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, location, nil)
		if err != nil {
			return nil, fmt.Errorf("keys: fetch JWKS: %w", err)
		}
		if err := checkTransport(req.URL); err != nil {
			return nil, fmt.Errorf("keys: fetch JWKS: %w", err)
		}
		req.Header.Set("Accept", "application/jwk-set+json, application/json")
		resp, err := opts.client().Do(req)
		if err != nil {
			return nil, fmt.Errorf("keys: fetch JWKS: %w", err)
		}
		defer resp.Body.Close()
		// A client given in FetchOptions may follow redirects without noDowngrade's checks:
		// the answer counts only if its final location passes them.
		if resp.Request != nil && resp.Request.URL != nil {
			if err := checkTransport(resp.Request.URL); err != nil {
				return nil, fmt.Errorf("keys: fetch JWKS %s: redirected: %w", location, err)
			}
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("keys: fetch JWKS %s: status %s", location, resp.Status)
		}
		body = resp.Body
	case strings.Contains(location, "://"):
		return nil, fmt.Errorf("keys: fetch JWKS %s: unsupported scheme (want a file path or http(s) URL)", location)
	default:
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("keys: read JWKS %s: %w", location, err)
		}
		f, err := opfile.Open(location)
		if err != nil {
			return nil, fmt.Errorf("keys: read JWKS: %w", err)
		}
		defer f.Close()
		body = f
	}
	data, err := readAtMost(body, limit)
	if err != nil {
		return nil, fmt.Errorf("keys: fetch JWKS %s: %w", location, err)
	}
	return data, nil
}

// RemoteOptions configure a [Remote].
type RemoteOptions struct {
	FetchOptions
	// RefreshInterval is the period of [Remote.Run]. Zero means DefaultRefreshInterval.
	RefreshInterval time.Duration
	// MinRefetch is the least time between two fetches caused by unknown kids, so that tokens
	// naming random kids cannot make the Remote hammer its source. Zero means DefaultMinRefetch.
	MinRefetch time.Duration
	// Now is the clock for rate limiting. Nil means time.Now.
	Now func() time.Time
}

// A Remote is a key set loaded from a file or an http(s) URL and kept fresh. A failed refresh
// keeps the last good set. An unknown kid causes a refetch, at most once per MinRefetch, so a
// rotated issuer key is picked up on the first token it signed. A Remote is safe for concurrent
// use.
type Remote struct {
	location string
	opts     RemoteOptions

	fetchMu sync.Mutex // held across a fetch: one fetch at a time

	mu          sync.RWMutex
	set         *Set
	lastErr     error
	lastRefetch time.Time // last fetch caused by an unknown kid
}

// NewRemote loads the set at location. The first load must succeed: there is no last good set to
// fall back on yet.
func NewRemote(ctx context.Context, location string, opts RemoteOptions) (*Remote, error) {
	r := &Remote{location: location, opts: opts}
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Remote) now() time.Time {
	if r.opts.Now != nil {
		return r.opts.Now()
	}
	return time.Now()
}

// Location returns the file path or URL the set is loaded from.
func (r *Remote) Location() string { return r.location }

// Refresh fetches the set now. On failure the last good set stays in use and the error is
// returned (and kept for [Remote.Err]).
func (r *Remote) Refresh(ctx context.Context) error {
	r.fetchMu.Lock()
	defer r.fetchMu.Unlock()
	return r.refreshLocked(ctx)
}

func (r *Remote) refreshLocked(ctx context.Context) error {
	set, err := LoadJWKS(ctx, r.location, r.opts.FetchOptions)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastErr = err
	if err != nil {
		return err
	}
	r.set = set
	return nil
}

// Err returns the error of the last fetch, or nil if it succeeded.
func (r *Remote) Err() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lastErr
}

// Set returns the current set.
func (r *Remote) Set() *Set {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.set
}

// Lookup returns the key named kid from the set held now, without fetching.
func (r *Remote) Lookup(kid string) (PublicKey, bool) { return r.Set().Lookup(kid) }

// Key returns the key named kid. On a miss it refetches the set, unless another unknown kid
// caused a fetch less than MinRefetch ago, and looks again.
func (r *Remote) Key(ctx context.Context, kid string) (PublicKey, bool) {
	if k, ok := r.Set().Lookup(kid); ok {
		return k, true
	}
	r.fetchMu.Lock()
	defer r.fetchMu.Unlock()
	// A fetch that ran while we waited for the lock may have brought the key.
	if k, ok := r.Set().Lookup(kid); ok {
		return k, true
	}
	minGap := r.opts.MinRefetch
	if minGap <= 0 {
		minGap = DefaultMinRefetch
	}
	now := r.now()
	r.mu.Lock()
	allowed := r.lastRefetch.IsZero() || now.Sub(r.lastRefetch) >= minGap
	if allowed {
		r.lastRefetch = now
	}
	r.mu.Unlock()
	if !allowed {
		return PublicKey{}, false
	}
	if err := r.refreshLocked(ctx); err != nil {
		return PublicKey{}, false
	}
	return r.Set().Lookup(kid)
}

// Run refreshes the set every RefreshInterval until ctx is done. Failures keep the last good set;
// onError, if not nil, is told about each one.
func (r *Remote) Run(ctx context.Context, onError func(error)) {
	every := r.opts.RefreshInterval
	if every <= 0 {
		every = DefaultRefreshInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Refresh(ctx); err != nil && onError != nil && ctx.Err() == nil {
				onError(err)
			}
		}
	}
}
