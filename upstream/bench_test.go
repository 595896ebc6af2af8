package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func benchmarkCall(b *testing.B, bk *bank) {
	c := dial(b, bk)
	ctx := testContext(b)
	args := json.RawMessage(`{"account":"1102534471"}`)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := c.Call(ctx, ToolCall{Tool: "get_balance", Args: args}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCall measures a read tool call round trip to the bank (which
// reads its state file under a lock on every call).
func BenchmarkCall(b *testing.B) {
	b.Run("stdio", func(b *testing.B) { benchmarkCall(b, stdioBank(b)) })
	b.Run("http", func(b *testing.B) { benchmarkCall(b, httpBank(b)) })
}

// BenchmarkCallRaw is BenchmarkCall asking for the result's bytes
// (ToolCall.Raw): the cost a measurement pays for their capture.
func BenchmarkCallRaw(b *testing.B) {
	for _, tc := range []struct {
		name  string
		start func(testing.TB, ...string) *bank
	}{{"stdio", stdioBank}, {"http", httpBank}} {
		b.Run(tc.name, func(b *testing.B) {
			c := dial(b, tc.start(b))
			ctx := testContext(b)
			args := json.RawMessage(`{"account":"1102534471"}`)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, raw, err := c.Call(ctx, ToolCall{Tool: "get_balance", Args: args, Raw: true}); err != nil || raw == nil {
						b.Error(err, raw == nil)
						return
					}
				}
			})
		})
	}
}

// BenchmarkTools measures one full listing with raw capture and digests.
func BenchmarkTools(b *testing.B) {
	for _, tc := range []struct {
		name  string
		start func(testing.TB, ...string) *bank
	}{{"stdio", stdioBank}, {"http", httpBank}} {
		b.Run(tc.name, func(b *testing.B) {
			c := dial(b, tc.start(b))
			ctx := testContext(b)
			for b.Loop() {
				if _, err := c.Tools(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseTool measures validating and digesting one definition
// the size of the bank's transfer tool.
func BenchmarkParseTool(b *testing.B) {
	raw := json.RawMessage(`{"name":"transfer","description":"Move money from one account to another, immediately.\n[Required] from_account\n[Verify] confirm_transfer: The user confirms the recipient and the amount.\n[Notice] Transfers are final.","inputSchema":{"type":"object","properties":{"from_account":{"type":"string","minLength":1,"maxLength":64,"description":"Account to debit."},"to_account":{"type":"string","minLength":1,"maxLength":64,"description":"Account to credit."},"amount":{"type":"integer","minimum":1,"description":"Amount in won."},"memo":{"type":"string","maxLength":140,"description":"Free text shown to the recipient."}},"required":["from_account","to_account","amount"],"additionalProperties":false},"annotations":{"destructiveHint":true,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}}`)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if t := parseTool("bank", raw); t.Err != nil {
			b.Fatal(t.Err)
		}
	}
}

// BenchmarkCallOverhead compares a call through Client with the same call
// through a bare SDK session, against an in-process streamable-HTTP
// server with a trivial tool, so the figure is the client's own cost.
func BenchmarkCallOverhead(b *testing.B) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer hs.Close()
	args := json.RawMessage(`{"amount":500000,"from_account":"1102534471","to_account":"110-222-333"}`)
	ctx := testContext(b)

	b.Run("client", func(b *testing.B) {
		c, err := Dial(ctx, "echo", Config{URL: hs.URL}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := c.Call(ctx, ToolCall{Tool: "echo", Args: args}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("sdk", func(b *testing.B) {
		cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{}, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
		sess, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkCallPlain measures a tool call made without the SDK's client
// (passcall.go): the executor's, over net/http's Transport, and the
// gateway's pass-through, over its own connections with the result decoded
// in one pass. The server, in the benchmark's process, is the SDK's for
// the connection and the listing (revision 2026-07-28, without sessions)
// and answers the plain calls with the same bytes each time, so that the
// figures are the client's own and net/http's.
func BenchmarkCallPlain(b *testing.B) {
	srv := plainServer()
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") != methodCallTool {
			sdk.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(body, &m) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"balance 12.50"}],"structuredContent":{"balance":12.5},"resultType":"complete"}}`, m.ID)
	}))
	defer hs.Close()
	ctx := testContext(b)
	c, err := Dial(ctx, "plain", Config{URL: hs.URL}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var def json.RawMessage
	for _, t := range tools {
		if t.Name == "text" {
			def = t.Raw
		}
	}
	if def == nil || c.plain.Load() == nil {
		b.Fatal("no plain calls to the server")
	}
	args := json.RawMessage(`{"account":"220-555-010"}`)
	b.Run("executor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := c.Call(ctx, ToolCall{Tool: "text", Args: args, Definition: def}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("passthrough", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := c.Call(ctx, ToolCall{Tool: "text", Args: args, Definition: def, PassThrough: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
