package mcpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/verdictgate/verdict/mcpgate"
)

// Every nested section of the gateway's config is decoded strictly: a misspelt key anywhere is
// an error at its place, with the key it was probably meant to be.
func TestConfigUnknownKeysAnywhere(t *testing.T) {
	s := bankStack(t)
	tests := []struct {
		name string
		edit func(raw map[string]any)
		want string
	}{
		{"top level", func(raw map[string]any) { raw["refresh_intervall"] = "1s" },
			`unknown field "refresh_intervall" (did you mean "refresh_interval"?)`},
		{"a tools entry", func(raw map[string]any) {
			raw["tools"] = map[string]any{"bank/transfer": map[string]any{"when_cse": "immediate"}}
		}, `tools["bank/transfer"]: unknown field "when_cse" (did you mean "when_case"?)`},
		{"a principal", func(raw map[string]any) {
			raw["principals"].(map[string]any)["u_02"] = map[string]any{"token_sha265": "x"}
		}, `principals.u_02: unknown field "token_sha265" (did you mean "token_sha256"?)`},
		{"an endpoint", func(raw map[string]any) {
			raw["verdictd"] = map[string]any{"url": "http://127.0.0.1:1", "tokn": "t"}
		}, `verdictd: unknown field "tokn" (did you mean "token"?)`},
		{"a servers entry", func(raw map[string]any) {
			raw["servers"] = map[string]any{"bank": map[string]any{"urls": "http://127.0.0.1:1/mcp"}}
		}, `servers.bank: unknown field "urls" (did you mean "url"?)`},
		{"the state section", func(raw map[string]any) {
			raw["state"] = map[string]any{"kind": "etcd", "endpoints": []string{"http://127.0.0.1:1"}, "principal_pendng": 4}
		}, `state: unknown field "principal_pendng" (did you mean "principal_pending"?)`},
		{"tls", func(raw map[string]any) {
			raw["tls"] = map[string]any{"cert": "c", "key": "k", "clent_ca": "ca"}
		}, `tls: unknown field "clent_ca" (did you mean "client_ca"?)`},
		{"a forward timeout of no server", func(raw map[string]any) {
			raw["forward_timeouts"] = map[string]any{"bnak": "10s"}
		}, `forward_timeouts.bnak: the policy declares no server "bnak" (did you mean "bank"?)`},
		{"a forward timeout past the most", func(raw map[string]any) { raw["forward_timeout"] = "2h" },
			`forward_timeout: 2h0m0s: want at most 1h0m0s (0 or absent: 2m0s)`},
		{"max_upstream_sessions past the most", func(raw map[string]any) { raw["max_upstream_sessions"] = 20000 },
			`max_upstream_sessions 20000: want 1 to 10000 (0 or absent: 100)`},
		{"a keep-alive too long to keep anything", func(raw map[string]any) { raw["sse_keepalive"] = "10m" },
			`sse_keepalive 10m0s is longer than 5m0s`},
		{"a principal's share past the whole", func(raw map[string]any) {
			raw["max_upstream_sessions"] = 5
			raw["max_upstream_sessions_per_principal"] = 6
		}, `max_upstream_sessions_per_principal 6: want 1 to max_upstream_sessions, 5 (0 or absent: 10, or max_upstream_sessions if lower)`},
		{"a server's forward timeout past the most", func(raw map[string]any) {
			raw["forward_timeouts"] = map[string]any{"bank": "61m"}
		}, `forward_timeouts.bank: 1h1m0s: want at most 1h0m0s (0 or absent: 2m0s)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			raw := s.gatewayConfig(dir)
			tt.edit(raw)
			path := filepath.Join(dir, "mcpgate.yaml")
			if err := writeJSON(path, raw); err != nil {
				t.Fatal(err)
			}
			_, err := mcpgate.LoadConfig(path)
			if err == nil {
				t.Fatal("loaded")
			}
			placed := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:\d+:\d+: ` + regexp.QuoteMeta(tt.want) + `$`)
			if !placed.MatchString(err.Error()) {
				t.Fatalf("error %q, want %s:L:C: %s", err, path, tt.want)
			}
		})
	}
}

// A tools entry for a server the policy does not declare is refused at load and at start; one
// for a tool its server does not list is logged at error level, once, and the gateway serves.
func TestToolsEntriesNameRealTools(t *testing.T) {
	s := bankStack(t)
	t.Run("unknown server", func(t *testing.T) {
		dir := t.TempDir()
		raw := s.gatewayConfig(dir)
		raw["tools"] = map[string]any{"bnak/transfer": map[string]any{"when_case": "immediate"}}
		path := filepath.Join(dir, "mcpgate.yaml")
		if err := writeJSON(path, raw); err != nil {
			t.Fatal(err)
		}
		const want = `tools["bnak/transfer"]: the policy declares no server "bnak" (did you mean "bank"?)`
		_, err := mcpgate.LoadConfig(path)
		if err == nil || !regexp.MustCompile(`^`+regexp.QuoteMeta(path)+`:\d+:\d+: `+regexp.QuoteMeta(want)+`$`).MatchString(err.Error()) {
			t.Fatalf("LoadConfig: %v, want %s at its place", err, want)
		}
		// New refuses it too: the policy may have changed since the config was loaded.
		delete(raw, "tools")
		if err := writeJSON(path, raw); err != nil {
			t.Fatal(err)
		}
		cfg, err := mcpgate.LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tools = map[string]mcpgate.ToolConfig{"bnak/transfer": {WhenCase: "immediate"}}
		if gw, err := mcpgate.New(ctxT(t), *cfg, mcpgate.Options{Logger: slog.New(slog.DiscardHandler)}); err == nil {
			gw.Close(context.Background())
			t.Fatal("New started with a tools entry for an unknown server")
		} else if !strings.Contains(err.Error(), want) {
			t.Fatalf("New: %v, want %s", err, want)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		dir := t.TempDir()
		raw := s.gatewayConfig(dir)
		raw["tools"] = map[string]any{
			"bank/transfer": map[string]any{"when_case": "immediate"},
			"bank/transfr":  map[string]any{"action_name_preset": "send money"},
		}
		path := filepath.Join(dir, "mcpgate.yaml")
		if err := writeJSON(path, raw); err != nil {
			t.Fatal(err)
		}
		cfg, err := mcpgate.LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		var logs lockedBuffer
		ctx := ctxT(t)
		gw, err := mcpgate.New(ctx, *cfg, mcpgate.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer gw.Close(context.Background())
		// New lists the servers and syncs once; several more rounds, each a listing followed by
		// a sync, find the entry dead again and must not report it again.
		for range 3 {
			mcpgate.RefreshRound(ctx, gw)
		}
		var reports []map[string]any
		for line := range strings.Lines(logs.String()) {
			var e map[string]any
			if json.Unmarshal([]byte(line), &e) == nil && strings.HasPrefix(e["msg"].(string), "tools entry applies to nothing") {
				reports = append(reports, e)
			}
		}
		if len(reports) != 1 {
			t.Fatalf("%d reports, want one:\n%s", len(reports), logs.String())
		}
		if e := reports[0]; e["level"] != "ERROR" || e["entry"] != "bank/transfr" || e["did_you_mean"] != "bank/transfer" ||
			e["reason"] != "server bank lists no tool transfr" {
			t.Fatalf("report %v", e)
		}
	})
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
