package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPFailureAfterTheToolRan answers a tools/call that the server
// has run with what a crashing server or a proxy in front of it sends:
// a 5xx status, or a connection dropped before the response. None of
// them is the server's refusal, so none may read as ErrRejected ("nothing
// ran"): the call is ErrOutcomeUnknown.
func TestHTTPFailureAfterTheToolRan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
	}{
		{"500", func(w http.ResponseWriter) { http.Error(w, "boom", http.StatusInternalServerError) }},
		{"502", func(w http.ResponseWriter) { http.Error(w, "bad gateway", http.StatusBadGateway) }},
		{"503", func(w http.ResponseWriter) { http.Error(w, "unavailable", http.StatusServiceUnavailable) }},
		{"504", func(w http.ResponseWriter) { http.Error(w, "timeout", http.StatusGatewayTimeout) }},
		{"429", func(w http.ResponseWriter) { http.Error(w, "slow down", http.StatusTooManyRequests) }},
		{"500 with a JSON-RPC error body", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"internal"}}`)
		}},
		{"connection dropped", func(w http.ResponseWriter) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran atomic.Int64
			srv := mcp.NewServer(&mcp.Implementation{Name: "flaky", Version: "1"}, nil)
			srv.AddTool(&mcp.Tool{Name: "pay", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					ran.Add(1)
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil
				})
			inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
				&mcp.StreamableHTTPOptions{Stateless: true})
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if !bytes.Contains(body, []byte(`"tools/call"`)) {
					inner.ServeHTTP(w, r)
					return
				}
				// The tool runs; its answer is lost on the way back.
				inner.ServeHTTP(httptest.NewRecorder(), r)
				tc.answer(w)
			}))
			t.Cleanup(hs.Close)
			c, err := Dial(testContext(t), "flaky", Config{URL: hs.URL}, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			_, err = callTool(testContext(t), c, "pay", json.RawMessage(`{}`))
			if n := ran.Load(); n != 1 {
				t.Fatalf("the tool ran %d times, want 1", n)
			}
			if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrRejected) {
				t.Fatalf("err %v, want ErrOutcomeUnknown: the tool ran", err)
			}
		})
	}
}
