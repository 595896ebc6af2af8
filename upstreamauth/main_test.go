package upstreamauth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

var opCmd = testbin.New(testop.Package)

func TestMain(m *testing.M) {
	code := m.Run()
	opCmd.Remove()
	os.Exit(code)
}

// startOP starts the example provider with args.
func startOP(t *testing.T, args ...string) *testop.OP {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs the example OpenID Provider")
	}
	return testop.Start(t, opCmd.Path(t), args...)
}

// claims decodes a JWT's payload without verifying it: these tests check what the client got,
// not whether the provider signs well (the identity package's tests do that).
func claims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want a JWS", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// audience returns a token's aud as a list.
func audience(c map[string]any) []string {
	var out []string
	switch a := c["aud"].(type) {
	case string:
		out = append(out, a)
	case []any:
		for _, x := range a {
			s, _ := x.(string)
			out = append(out, s)
		}
	}
	return out
}

// mcpServer is an upstream MCP server as far as authorization goes: the project's own resource
// server answers (identity's RFC 9728 metadata and its 401), in front of an authorization
// server set once the test knows it.
type mcpServer struct {
	srv *httptest.Server
	URL string // the resource: srv.URL + "/mcp"

	mu     sync.Mutex
	issuer string
}

func newMCPServer(t *testing.T) *mcpServer {
	t.Helper()
	m := &mcpServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+identity.WellKnownPath+"/mcp", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		identity.ResourceMetadata{Resource: m.URL, AuthorizationServers: []string{m.issuer}, ScopesSupported: []string{"files:read"}, BearerMethodsSupported: []string{"header"}}.ServeHTTP(w, r)
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		meta, _ := identity.MetadataURL(m.URL)
		identity.WriteError(w, meta, &identity.Error{Reason: identity.TokenMissing}, "files:read")
	})
	m.srv = httptest.NewServer(mux)
	t.Cleanup(m.srv.Close)
	m.URL = m.srv.URL + "/mcp"
	return m
}

func (m *mcpServer) setIssuer(issuer string) {
	m.mu.Lock()
	m.issuer = issuer
	m.mu.Unlock()
}

// isOAuth reports whether err is an *Error of endpoint with code.
func isOAuth(err error, endpoint, code string) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Endpoint == endpoint && e.Code == code
}
