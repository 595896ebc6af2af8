package mcpgate_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/mcpgate"
	"github.com/verdictgate/verdict/upstream"
)

// BenchmarkReadDirect and BenchmarkReadThroughGateway compare one read
// tool call made straight to the bank with the same call through the
// gateway process (bearer check, class lookup, upstream forward).
func BenchmarkReadDirect(b *testing.B) {
	s := bankStack(b)
	ctx := context.Background()
	cl, err := upstream.Dial(ctx, "bank", upstream.Config{URL: s.bankURL}, upstream.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	args := []byte(`{"account":"220-555-010"}`)
	for b.Loop() {
		if _, _, err := cl.Call(ctx, upstream.ToolCall{Tool: "get_balance", Args: args}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadThroughGateway(b *testing.B) {
	s := bankStack(b)
	g := startGateway(b, s.gatewayConfig(b.TempDir()))
	sess := g.connect(b, userToken, nil)
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "bank.get_balance", Arguments: map[string]any{"account": "220-555-010"}}
	for b.Loop() {
		res, err := sess.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkGatedTransfer is one whole gated call as a host sees it: three
// preflights, two input_required rounds answered by the user, and the
// execution through the executor (each iteration moves 1 won). The
// principal's rate limit is lifted: the benchmark is one user starting
// calls as fast as the stack answers.
func BenchmarkGatedTransfer(b *testing.B) {
	s := bankStack(b)
	cfg := s.gatewayConfig(b.TempDir())
	cfg["state"] = map[string]any{"calls_per_minute": 1 << 30, "call_burst": 1 << 30}
	g := startGateway(b, cfg)
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1}}
	sess := g.connect(b, userToken, &mcp.ClientOptions{ElicitationHandler: u.answer})
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()}
	for b.Loop() {
		res, err := sess.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkPlainRead is one read call of a 2026-07-28 host served by the
// gateway's own path (plain.go), in the test process, in front of the bank:
// what the gateway adds to a pass-through call, with the host's HTTP client
// and the bank's answer included.
//
// Sub-benchmark library is the same call with every request left to the
// MCP library's handler: what the gateway's own path saves.
func BenchmarkPlainRead(b *testing.B) {
	s := bankStack(b)
	dir := b.TempDir()
	gw, _ := runGateway(b, dir, s.gatewayConfig(dir))
	for _, h := range []struct {
		name    string
		handler http.Handler
		plain   bool
	}{{"own", gw.Handler(), true}, {"library", mcpgate.LibraryHandler(gw), false}} {
		b.Run(h.name, func(b *testing.B) { benchPlainRead(b, h.handler, h.plain) })
	}
}

func benchPlainRead(b *testing.B, h http.Handler, plain bool) {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	body := callBody("1", "bank.get_balance", `{"account":"220-555-010"}`)
	header := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"bank.get_balance"},
		"Authorization": {"Bearer " + userToken}}
	before := (&gateway{url: srv.URL}).metric(b, "mcpgate_plain_calls_total")
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header = header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"resultType":"complete"`)) {
			b.Fatalf("%d %s %v", resp.StatusCode, out, err)
		}
	}
	b.StopTimer()
	// The CPU of the whole test process (host client and gateway, not the bank) per call.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	served := (&gateway{url: srv.URL}).metric(b, "mcpgate_plain_calls_total") - before
	if plain && served < float64(b.N) || !plain && served != 0 {
		b.Fatalf("served without the library %v times of %d", served, b.N)
	}
}

// processCPU is the user and system CPU time the test process has used.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
