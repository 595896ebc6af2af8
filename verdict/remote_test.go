package verdict

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/keys"
)

// TestVerifyWithRemoteJWKS runs the executor's arrangement end to end: verdictd's ring published
// over HTTP, the executor verifying through a keys.Remote. A rotation at the issuer is picked up
// on the first token signed with the new key; a retired key stops verifying once refreshed; an
// outage keeps the last good set.
func TestVerifyWithRemoteJWKS(t *testing.T) {
	f := newFixture(t)
	ring, err := keys.NewRing(f.a)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	down := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		json.NewEncoder(w).Encode(ring.Set())
	}))
	defer srv.Close()
	setDown := func(b bool) { mu.Lock(); down = b; mu.Unlock() }

	ctx := context.Background()
	remote, err := keys.NewRemote(ctx, srv.URL+"/.well-known/jwks.json", keys.RemoteOptions{MinRefetch: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	want := f.want
	want.Issuers = []TrustedIssuer{{ID: issuerA, Keys: remote}}

	old, _ := Sign(ring.Current(), f.claims)
	if _, err := VerifyContext(ctx, old, want); err != nil {
		t.Fatal(err)
	}
	next, _ := keys.Generate(keys.EdDSA)
	ring.Rotate(next)
	fresh, _ := Sign(ring.Current(), f.claims)
	if _, err := VerifyContext(ctx, fresh, want); err != nil {
		t.Fatalf("first token of the rotated key: %v", err)
	}
	setDown(true)
	if err := remote.Refresh(ctx); err == nil {
		t.Fatal("refresh during an outage succeeded")
	}
	for _, tok := range []string{old, fresh} {
		if _, err := VerifyContext(ctx, tok, want); err != nil {
			t.Fatalf("during an outage: %v", err)
		}
	}
	setDown(false)
	ring.Retire(f.a.KeyID())
	if err := remote.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyContext(ctx, old, want); ReasonOf(err) != UnknownKID {
		t.Fatalf("token of a retired key: %v, want unknown_kid", err)
	}
}
