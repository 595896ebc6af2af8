package executor

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/upstream"
)

// /readyz answers without a token, so it names the servers that are not listed and nothing of
// their configuration: a server's URL can carry a credential in its query, and connection
// errors quote the URL. The detail is on the admin's /v1/catalog.
func TestReadyzNamesServersOnly(t *testing.T) {
	const secret = "SECRET-api-key-123"
	e := newEnv(t, envOpts{})
	cfg := e.svc.cfg
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Servers = map[string]upstream.Config{
		"bank":  cfg.Servers["bank"],
		"other": {URL: "http://127.0.0.1:1/mcp?api_key=" + secret},
	}
	svc, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	_ = svc.Refresh(context.Background()) // "other" cannot be listed
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)

	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name, path, token string
		status            int
		mustHave          []string
		mustNotHave       []string
	}{
		{"readyz without a token", "/readyz", "", 503, []string{"other"}, []string{secret, "127.0.0.1:1"}},
		{"catalog without a token", "/v1/catalog", "", 401, nil, []string{secret}},
		{"catalog with the admin token", "/v1/catalog", adminToken, 200, []string{"other"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := get(tt.path, tt.token)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if !json.Valid([]byte(body)) {
				t.Fatalf("body is not JSON: %s", body)
			}
			for _, s := range tt.mustHave {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %q: %s", s, body)
				}
			}
			for _, s := range tt.mustNotHave {
				if strings.Contains(body, s) {
					t.Errorf("body holds %q: %s", s, body)
				}
			}
		})
	}
}
