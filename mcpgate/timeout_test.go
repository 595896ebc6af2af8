package mcpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hangServer is an MCP server whose tool hang never answers: it says it
// started, and waits for the call to be cancelled, which it reports. A
// stateless server cannot end a call on a notification (it comes in a
// request of its own), so notified reports every notifications/cancelled
// the server is sent.
type hangServer struct {
	url                          string
	started, cancelled, notified chan struct{}
}

func newHangServer(t *testing.T, stateless bool) *hangServer {
	t.Helper()
	// release ends a call left hanging when the test ends (a stateless server's), before
	// the server is closed, which waits for it.
	release := make(chan struct{})
	h := &hangServer{started: make(chan struct{}, 1), cancelled: make(chan struct{}, 1), notified: make(chan struct{}, 4)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	srv.AddTool(&mcp.Tool{Name: "hang", InputSchema: obj}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		h.started <- struct{}{}
		select {
		case <-ctx.Done():
			h.cancelled <- struct{}{}
			return nil, ctx.Err()
		case <-release:
			return nil, errors.New("the test ended")
		}
	})
	srv.AddTool(&mcp.Tool{Name: "quick", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "quick"}}}, nil
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: stateless})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "notifications/cancelled" && len(msg.Params.RequestID) > 0 {
			select {
			case h.notified <- struct{}{}:
			default:
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) })
	h.url = hs.URL
	return h
}

// TestHungUpstream: a pass-through call its server never answers ends for
// the host with upstream_timeout once forward_timeout passes, its server
// sees the call cancelled, and meanwhile another user's call to the same
// server is answered. The server is stateless (the gateway's own calls) and
// stateful (the library's, in a session).
func TestHungUpstream(t *testing.T) {
	s := bankStack(t)
	for _, stateless := range []bool{true, false} {
		name := map[bool]string{true: "stateless", false: "session"}[stateless]
		t.Run(name, func(t *testing.T) {
			h := newHangServer(t, stateless)
			// Long enough for the other user's call below to be answered first on a slow
			// machine; the host's answer is awaited, never timed.
			g := withServers(t, s, serverEntry("slow", h.url), "  slow/hang:\n    class: read\n  slow/quick:\n    class: read\n",
				func(raw map[string]any) { raw["forward_timeouts"] = map[string]any{"slow": "3s"} })
			a := g.connect(t, userToken, nil)
			b := g.connect(t, otherToken, nil)

			// The whole exchange is bounded only so that a gateway that never answers fails
			// the test instead of holding the run.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			hung := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "slow.hang", Arguments: map[string]any{}})
				if err != nil {
					res = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "error: " + err.Error()}}}
				}
				hung <- res
			}()
			select {
			case <-h.started:
			case <-ctx.Done():
				t.Fatal("the hung call never reached its server")
			}
			res, err := b.CallTool(ctx, &mcp.CallToolParams{Name: "slow.quick", Arguments: map[string]any{}})
			if err != nil || res.IsError || text(res) != "quick" {
				t.Fatalf("another user's call while one hangs: %v %+v", err, res)
			}
			var got *mcp.CallToolResult
			select {
			case got = <-hung:
			case <-ctx.Done():
				t.Fatal("the host of the hung call was never answered")
			}
			if !got.IsError || reason(got) != "upstream_timeout" {
				t.Fatalf("the hung call ended with isError=%v %q %v, want upstream_timeout", got.IsError, text(got), got.Meta)
			}
			// A session's call ends on the notification; a stateless server is sent it.
			seen := h.cancelled
			if stateless {
				seen = h.notified
			}
			select {
			case <-seen:
			case <-ctx.Done():
				t.Fatal("the server never saw the hung call cancelled")
			}
		})
	}
}

// TestHostCancelEndsForwardedCall: a host in a session that cancels its
// pass-through call (notifications/cancelled) ends the forwarded call, and
// its server sees the call cancelled, whether it keeps sessions (the call
// ends on the notification) or not (it is sent one).
func TestHostCancelEndsForwardedCall(t *testing.T) {
	s := bankStack(t)
	for _, stateless := range []bool{true, false} {
		name := map[bool]string{true: "stateless", false: "session"}[stateless]
		t.Run(name, func(t *testing.T) {
			h := newHangServer(t, stateless)
			g := withServers(t, s, serverEntry("slow", h.url), "  slow/hang:\n    class: read\n  slow/quick:\n    class: read\n", nil)
			sess, err := g.connectAs(t, userToken, "2025-11-25", nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			callCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := sess.CallTool(callCtx, &mcp.CallToolParams{Name: "slow.hang", Arguments: map[string]any{}})
				done <- err
			}()
			select {
			case <-h.started:
			case <-ctx.Done():
				t.Fatal("the call never reached its server")
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("the host's cancelled call returned %v", err)
			}
			seen := h.cancelled
			if stateless {
				seen = h.notified
			}
			select {
			case <-seen:
			case <-ctx.Done():
				t.Fatal("the server never saw the call cancelled")
			}
		})
	}
}
