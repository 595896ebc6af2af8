package keys

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A key set fetched over plain http from another host can be swapped by anyone on the path,
// who then signs verdicts the executor trusts (a token with the attacker's kid even triggers
// the refetch). Plain http is accepted from loopback addresses only, also after a redirect.
func TestPlainHTTPJWKSOnlyFromLoopback(t *testing.T) {
	k, _ := Generate(EdDSA)
	js := &jwksServer{}
	js.serve(t, k)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
			return
		}
		js.ServeHTTP(w, r)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	// Every host name reaches the test server, as it would an attacker on the path.
	client := &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
		}},
		CheckRedirect: noDowngrade,
	}
	tests := []struct {
		location string
		ok       bool
	}{
		{"http://127.0.0.1:" + port + "/jwks.json", true},
		{"http://127.0.0.2:" + port + "/jwks.json", true},
		{"http://[::1]:" + port + "/jwks.json", true},
		{"http://localhost:" + port + "/jwks.json", true},
		{"http://verdictd.example.com:" + port + "/jwks.json", false},
		{"http://192.0.2.10:" + port + "/jwks.json", false},
		{"http://[::ffff:192.0.2.10]:" + port + "/jwks.json", false},
		{"http://127.0.0.1:" + port + "/redirect?to=http://verdictd.example.com/jwks.json", false},
		{"http://127.0.0.1:" + port + "/redirect?to=/jwks.json", true},
	}
	// A client that follows redirects without checking them: the final location still counts.
	lax := &http.Client{Transport: client.Transport}
	for _, c := range []*http.Client{client, lax} {
		for _, tt := range tests {
			before := js.hits.Load()
			_, err := LoadJWKS(context.Background(), tt.location, FetchOptions{Client: c})
			if (err == nil) != tt.ok {
				t.Errorf("%s (CheckRedirect set: %v): err = %v, want ok=%v", tt.location, c.CheckRedirect != nil, err, tt.ok)
			}
			if !tt.ok && !strings.Contains(tt.location, "/redirect") && js.hits.Load() != before {
				t.Errorf("%s: a request was sent", tt.location)
			}
		}
	}
}
