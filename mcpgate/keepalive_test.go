package mcpgate_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPendingCallIsKeptAlive: while a call of an older host's HTTP session
// waits for its server, the host is pinged on the call's stream every
// sse_keepalive, and the call's answer comes once the server answers.
func TestPendingCallIsKeptAlive(t *testing.T) {
	release := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "waited"}}}, nil
	})
	g := withServers(t, bankStack(t), serverEntry("slow", olderHTTP(t, srv, true)), "  slow/wait: {class: read}\n",
		func(raw map[string]any) { raw["sse_keepalive"] = "20ms" })

	pinged := make(chan struct{}, 1)
	host := mcp.NewClient(&mcp.Implementation{Name: "patient-host", Version: "1"}, nil)
	host.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "ping" {
				select {
				case pinged <- struct{}{}:
				default:
				}
			}
			return next(ctx, method, req)
		}
	})
	sess, err := g.connectWith(t, "/mcp/slow", userToken, "2025-11-25", host)
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{}})
		if err != nil {
			t.Error(err)
		}
		answered <- res
	}()
	select {
	case <-pinged:
	case res := <-answered:
		t.Fatalf("the call ended before the host was pinged: %+v", res)
	case <-ctxT(t).Done():
		t.Fatal("the host was not pinged while its call was pending")
	}
	close(release)
	select {
	case res := <-answered:
		if res == nil || res.IsError || text(res) != "waited" {
			t.Fatalf("the call's answer: %+v", res)
		}
	case <-ctxT(t).Done():
		t.Fatal("no answer after the server answered")
	}
}
