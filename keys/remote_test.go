package keys

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// jwksServer serves whatever set it holds, or fails while broken, counting requests.
type jwksServer struct {
	mu     sync.Mutex
	body   []byte
	broken bool
	hits   atomic.Int64
}

func (s *jwksServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	s.mu.Lock()
	body, broken := s.body, s.broken
	s.mu.Unlock()
	if broken {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Write(body)
}

func (s *jwksServer) serve(t *testing.T, keys ...*Signer) {
	t.Helper()
	var pubs []PublicKey
	for _, k := range keys {
		pubs = append(pubs, k.Public())
	}
	set, err := NewSet(pubs...)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(set)
	s.mu.Lock()
	s.body, s.broken = body, false
	s.mu.Unlock()
}

func (s *jwksServer) setBroken(b bool) {
	s.mu.Lock()
	s.broken = b
	s.mu.Unlock()
}

// fakeClock is a settable clock for rate limiting.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestRemoteRefreshAndLastGood(t *testing.T) {
	ctx := context.Background()
	k1, _ := Generate(EdDSA)
	k2, _ := Generate(ES256)
	js := &jwksServer{}
	js.serve(t, k1)
	srv := httptest.NewServer(js)
	defer srv.Close()

	r, err := NewRemote(ctx, srv.URL+"/.well-known/jwks.json", RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Set().Lookup(k1.KeyID()); !ok {
		t.Fatal("initial set lacks k1")
	}

	// Rotation upstream: a refresh picks up the new set.
	js.serve(t, k2)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Set().Lookup(k2.KeyID()); !ok {
		t.Fatal("refreshed set lacks k2")
	}
	if _, ok := r.Set().Lookup(k1.KeyID()); ok {
		t.Fatal("refreshed set still has k1")
	}

	// Failures of every kind keep the last good set.
	for name, breakIt := range map[string]func(){
		"status 503": func() { js.setBroken(true) },
		"empty set":  func() { js.mu.Lock(); js.body, js.broken = []byte(`{"keys":[]}`), false; js.mu.Unlock() },
		"garbage":    func() { js.mu.Lock(); js.body = []byte(`<html>`); js.mu.Unlock() },
		"private keys": func() {
			b, _ := k1.MarshalPrivateJWK()
			js.mu.Lock()
			js.body = []byte(`{"keys":[` + string(b) + `]}`)
			js.mu.Unlock()
		},
	} {
		breakIt()
		if err := r.Refresh(ctx); err == nil {
			t.Fatalf("%s: refresh succeeded", name)
		}
		if r.Err() == nil {
			t.Fatalf("%s: Err() is nil after a failed refresh", name)
		}
		if _, ok := r.Key(ctx, k2.KeyID()); !ok {
			t.Fatalf("%s: last good set lost", name)
		}
	}
	js.serve(t, k2)
	if err := r.Refresh(ctx); err != nil || r.Err() != nil {
		t.Fatalf("recovery: %v / %v", err, r.Err())
	}
}

func TestRemoteRefetchOnUnknownKidIsRateLimited(t *testing.T) {
	ctx := context.Background()
	k1, _ := Generate(EdDSA)
	k2, _ := Generate(EdDSA)
	js := &jwksServer{}
	js.serve(t, k1)
	srv := httptest.NewServer(js)
	defer srv.Close()
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	r, err := NewRemote(ctx, srv.URL, RemoteOptions{MinRefetch: time.Minute, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	base := js.hits.Load()

	// The issuer rotates: the first token with the new kid triggers one refetch and verifies.
	js.serve(t, k1, k2)
	if _, ok := r.Key(ctx, k2.KeyID()); !ok {
		t.Fatal("unknown kid did not trigger a refetch")
	}
	if got := js.hits.Load() - base; got != 1 {
		t.Fatalf("%d fetches, want 1", got)
	}

	// A flood of random kids, concurrently, within MinRefetch of that refetch causes no fetch.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := r.Key(ctx, "no-such-kid-"+string(rune('a'+i%26))); ok {
				t.Error("found a kid that does not exist")
			}
			if _, ok := r.Key(ctx, k1.KeyID()); !ok {
				t.Error("known kid missing during a flood")
			}
		}()
	}
	wg.Wait()
	if got := js.hits.Load() - base; got != 1 {
		t.Fatalf("%d fetches after the flood, want 1", got)
	}
	clock.Add(time.Minute)
	r.Key(ctx, "still-unknown")
	r.Key(ctx, "unknown-again")
	if got := js.hits.Load() - base; got != 2 {
		t.Fatalf("%d fetches after MinRefetch passed, want 2", got)
	}
}

func TestRemoteSlowServerTimesOut(t *testing.T) {
	k1, _ := Generate(EdDSA)
	js := &jwksServer{}
	js.serve(t, k1)
	release := make(chan struct{})
	var slow atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		js.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer close(release)

	ctx := context.Background()
	r, err := NewRemote(ctx, srv.URL, RemoteOptions{FetchOptions: FetchOptions{Timeout: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	slow.Store(true)
	err = r.Refresh(ctx)
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("slow refresh: err = %v, want a deadline error", err)
	}
	if _, ok := r.Key(ctx, k1.KeyID()); !ok {
		t.Fatal("last good set lost after a timeout")
	}
	// The caller's context bounds a fetch too.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := LoadJWKS(cctx, srv.URL, FetchOptions{}); err == nil {
		t.Fatal("LoadJWKS with a cancelled context succeeded")
	}
	if _, err := NewRemote(ctx, srv.URL, RemoteOptions{FetchOptions: FetchOptions{Timeout: 50 * time.Millisecond}}); err == nil {
		t.Fatal("NewRemote succeeded against a server that never answers")
	}
}

func TestLoadJWKSLimitsAndLocations(t *testing.T) {
	ctx := context.Background()
	k1, _ := Generate(EdDSA)
	set, _ := NewSet(k1.Public())
	body, _ := json.Marshal(set)
	big := `{"keys":[` + string(body[9:len(body)-2]) + `],"pad":"` + strings.Repeat("x", 4096) + `"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Write([]byte(big))
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		default:
			w.Write(body)
		}
	}))
	defer srv.Close()
	if _, err := LoadJWKS(ctx, srv.URL+"/big", FetchOptions{}); err != nil {
		t.Fatalf("padded set under the limit: %v", err)
	}
	if _, err := LoadJWKS(ctx, srv.URL+"/big", FetchOptions{MaxBytes: 1024}); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("over the size limit: err = %v", err)
	}
	if _, err := LoadJWKS(ctx, srv.URL+"/redirect", FetchOptions{}); err != nil {
		t.Fatalf("same-scheme redirect: %v", err)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "jwks.json")
	os.WriteFile(path, body, 0o644)
	if s, err := LoadJWKS(ctx, path, FetchOptions{}); err != nil || s.Len() != 1 {
		t.Fatalf("file: %v", err)
	}
	os.WriteFile(path, []byte(big), 0o644)
	if _, err := LoadJWKS(ctx, path, FetchOptions{MaxBytes: 1024}); err == nil {
		t.Fatal("file over the size limit loaded")
	}
	for _, loc := range []string{"ftp://example.com/jwks.json", "file:///etc/passwd", filepath.Join(dir, "missing.json")} {
		if _, err := LoadJWKS(ctx, loc, FetchOptions{}); err == nil {
			t.Errorf("LoadJWKS(%q) succeeded", loc)
		}
	}
}

func TestNoDowngradeRedirect(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:1/jwks.json", http.StatusFound)
	}))
	defer tlsSrv.Close()
	client := tlsSrv.Client()
	client.CheckRedirect = noDowngrade
	_, err := LoadJWKS(context.Background(), tlsSrv.URL, FetchOptions{Client: client})
	if err == nil || !strings.Contains(err.Error(), "refusing redirect") {
		t.Fatalf("https→http redirect: err = %v", err)
	}
}

// Run refreshes the set on its ticker: a key the source starts serving is in the set once a
// refresh has fetched it. Refreshes run one after another, so the second request after the
// source changed begins only once the first one's set is in place.
func TestRemoteRun(t *testing.T) {
	k1, _ := Generate(EdDSA)
	k2, _ := Generate(EdDSA)
	js := &jwksServer{}
	js.serve(t, k1)
	requests := make(chan struct{}, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		js.ServeHTTP(w, r)
		select {
		case requests <- struct{}{}:
		default:
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := NewRemote(ctx, srv.URL, RemoteOptions{RefreshInterval: 5 * time.Millisecond, MinRefetch: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	<-requests // NewRemote's own fetch
	js.serve(t, k2)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Run(runCtx, nil); close(done) }()
	for range 2 {
		select {
		case <-requests:
		case <-ctx.Done():
			t.Fatal("Run did not refresh twice")
		}
	}
	if _, ok := r.Lookup(k2.KeyID()); !ok {
		t.Error("a refresh fetched the new set, and the key is not in it")
	}
	if _, ok := r.Lookup(k1.KeyID()); ok {
		t.Error("the key the source dropped is still in the set")
	}
	stop()
	<-done
}
