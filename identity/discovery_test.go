package identity

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDiscoveryFallback: an issuer with no OpenID Connect discovery document is found by its
// RFC 8414 metadata, whose well-known path goes before the issuer's own path; metadata that
// names another issuer is refused.
func TestDiscoveryFallback(t *testing.T) {
	var issuer, claimed string
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server/tenant", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(metadata{Issuer: claimed, JWKSURI: issuer + "/keys"})
	})
	srv := httptest.NewServer(mux) // answers 404 for /tenant/.well-known/openid-configuration
	defer srv.Close()
	issuer = srv.URL + "/tenant"

	claimed = issuer
	m, err := discover(t.Context(), srv.Client(), issuer)
	if err != nil || m.JWKSURI != issuer+"/keys" {
		t.Fatalf("discover = %+v, %v", m, err)
	}
	claimed = srv.URL + "/other"
	if _, err := discover(t.Context(), srv.Client(), issuer); err == nil || !strings.Contains(err.Error(), "names issuer") {
		t.Fatalf("discover with another issuer's metadata: %v", err)
	}
}
