package executor

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/verdictgate/verdict/upstream"
)

// /readyz answers without a token, so it names the servers that are not listed and nothing of
// their configuration: a server's URL can carry a credential in its query, and connection
// errors quote the URL. The detail is on the admin's /v1/catalog. One server of two listed
// keeps the executor ready: its replicas share the servers, so routing away from each of them
// would stop the calls to the listed one too.
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
		{"readyz without a token", "/readyz", "", 200, []string{`"unlisted_servers":["other"]`}, []string{secret, "127.0.0.1:1"}},
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

// A stdio server that fails to start is logged at error level with what it wrote to its stderr,
// and each of its stderr lines is a JSON log record of its own, never raw text between them.
func TestServerFailureIsLoggedWithItsStderr(t *testing.T) {
	e := newEnv(t, envOpts{})
	cfg := e.svc.cfg
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Servers = map[string]upstream.Config{
		"fs": {Command: []string{"sh", "-c", "echo 'None of the specified directories are accessible' >&2; exit 1"}},
	}
	var logs syncBuffer
	svc, err := New(context.Background(), cfg, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	if err := svc.Refresh(context.Background()); err == nil {
		t.Fatal("a server that exits at once was listed")
	}
	var failed, line bool
	for l := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line is not a JSON record: %q", l)
		}
		switch {
		case rec["level"] == "ERROR" && rec["server"] == "fs":
			failed = rec["stderr"] == "None of the specified directories are accessible"
		case rec["msg"] == "server stderr" && rec["server"] == "fs":
			line = rec["line"] == "None of the specified directories are accessible"
		}
	}
	if !failed || !line {
		t.Fatalf("want an error record with the stderr tail and a record of the line:\n%s", logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// With its only server unreachable the executor is not ready, and says which server, without
// its address.
func TestReadyzWithNoServerListed(t *testing.T) {
	const secret = "SECRET-api-key-123"
	e := newEnv(t, envOpts{})
	cfg := e.svc.cfg
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Servers = map[string]upstream.Config{"other": {URL: "http://127.0.0.1:1/mcp?api_key=" + secret}}
	svc, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	get := func() (int, string) {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := get(); status != 503 || !strings.Contains(body, "server other has not been listed yet") {
		t.Fatalf("before the first listing: %d %s", status, body)
	}
	_ = svc.Refresh(context.Background())
	status, body := get()
	if status != 503 || !strings.Contains(body, "server other has never answered tools/list") || strings.Contains(body, secret) {
		t.Fatalf("with its only server unreachable: %d %s", status, body)
	}
	if v, err := readSample(srv.URL+"/metrics", func(name string) bool { return name == "executor_ready" }); err != nil || v != 0 {
		t.Errorf("executor_ready: %v, %v; want 0", v, err)
	}
	if v, err := readSample(srv.URL+"/metrics", func(name string) bool { return name == `executor_upstream_listed{server="other"}` }); err != nil || v != 0 {
		t.Errorf("executor_upstream_listed: %v, %v; want 0", v, err)
	}
}
