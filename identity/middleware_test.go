package identity_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/identity"
)

// TestMiddleware serves a resource the way mcpgate will: metadata at the well-known URL, and
// a handler that learns its caller from the request context.
func TestMiddleware(t *testing.T) {
	op := startOP(t)
	token := op.ClientCredentials(t, "agent", "agent-secret", "tools:read")
	_, claims, _ := decode(t, token)
	cfg := identity.Config{Issuers: []identity.Issuer{{Issuer: op.Issuer, Audience: resource, Scopes: []string{"tools:read"}}}}
	v, err := identity.NewVerifier(cfg, identity.WithClock(func() time.Time { return time.Unix(claims.Iat, 0) }))
	if err != nil {
		t.Fatal(err)
	}
	md, err := identity.MetadataURL(resource)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(identity.WellKnownPath+"/mcp", cfg.ResourceMetadata(resource))
	mux.Handle("/mcp", identity.Middleware(v, md, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := identity.FromContext(r.Context())
		if !ok {
			t.Error("no principal in the context")
			return
		}
		io.WriteString(w, p.ID)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path, auth string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}

	resp, body := get("/mcp", "Bearer "+token)
	if resp.StatusCode != 200 || body != op.Issuer+"#agent" {
		t.Errorf("with a token: %s %q", resp.Status, body)
	}
	resp, _ = get("/mcp", "")
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Bearer resource_metadata="`+md+`"` {
		t.Errorf("without a token: %s %q", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	resp, _ = get("/mcp", "Bearer "+op.ClientCredentials(t, "other", "other-secret", "tools:read"))
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || !strings.Contains(ch, `error="invalid_token"`) {
		t.Errorf("with a token for another resource: %s %q", resp.Status, ch)
	}
	resp, _ = get("/mcp", "Bearer "+op.ClientCredentials(t, "agent", "agent-secret"))
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 403 || !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="tools:read"`) {
		t.Errorf("without the scope: %s %q", resp.Status, ch)
	}
	resp, body = get(strings.TrimPrefix(md, "https://gateway.test"), "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"authorization_servers":["`+op.Issuer+`"]`) {
		t.Errorf("metadata: %s %s", resp.Status, body)
	}
}
