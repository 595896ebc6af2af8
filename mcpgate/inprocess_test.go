package mcpgate_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/verdictgate/verdict/mcpgate"
)

// runGateway runs the gateway of config raw in the test process, its config file and
// log in dir, until the test ends; its log is printed when the test fails. Servers the caller
// starts on its handlers after this are closed first (cleanups run last-registered first).
func runGateway(t testing.TB, dir string, raw map[string]any) (gw *mcpgate.Gateway, logPath string) {
	t.Helper()
	return runGatewayWith(t, dir, raw, mcpgate.Options{})
}

// runGatewayWith is runGateway with opts (its Logger replaced by the log in dir).
func runGatewayWith(t testing.TB, dir string, raw map[string]any, opts mcpgate.Options) (gw *mcpgate.Gateway, logPath string) {
	t.Helper()
	cfgPath := filepath.Join(dir, "mcpgate.yaml")
	if err := writeJSON(cfgPath, raw); err != nil {
		t.Fatal(err)
	}
	cfg, err := mcpgate.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logPath = filepath.Join(dir, "mcpgate.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts.Logger = slog.New(slog.NewJSONHandler(logf, nil))
	gw, err = mcpgate.New(ctx, *cfg, opts)
	if err != nil {
		cancel()
		logf.Close()
		t.Fatal(err)
	}
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = gw.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-runDone
		gw.Close(context.Background())
		logf.Close()
		if t.Failed() {
			t.Logf("mcpgate log:\n%s", readFile(logPath))
		}
	})
	return gw, logPath
}

// withServers runs, in the test process, a gateway over the bank stack's policy with servers
// (policy text of more servers, indented under servers:) and tools (likewise, under tools:)
// added, edit (if not nil) adjusting its config first, and serves it over HTTP.
func withServers(t *testing.T, s *stack, servers, tools string, edit func(raw map[string]any)) *gateway {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "gateway-policy.yaml")
	if err := os.WriteFile(policy, []byte(s.policyText(t, "gateway.1", "servers:\n", "servers:\n"+servers, "tools:\n", "tools:\n"+tools)), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := s.gatewayConfig(dir)
	raw["policy"] = policy
	if edit != nil {
		edit(raw)
	}
	gw, _ := runGateway(t, dir, raw)
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return &gateway{url: srv.URL}
}

// serverEntry is the policy text of server id at url, indented under servers:, with extra
// lines of its entry.
func serverEntry(id, url string, extra ...string) string {
	e := "  " + id + ":\n    audience: [\"executor-test\"]\n    tools_from: {url: \"" + url + "\"}\n"
	for _, x := range extra {
		e += "    " + x + "\n"
	}
	return e
}
