package mcpgate

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Keeping a pending call's stream alive.
//
// A call of an older host's HTTP session is answered on an event stream
// that carries nothing until the call ends: a gated call waits for the
// user's answers and approvals, a pass-through call for its server. A
// proxy between host and gateway that ends a response idle for a minute
// (a common default) would cut the call. So while such a call is pending,
// the host is sent a ping (MCP's own keep-alive) on the call's stream
// every sse_keepalive: the stream carries an event, and the host answers
// on a request of its own. A host that does not answer is not held to it;
// the call goes on. A 2026-07-28 host is answered with one JSON message
// and is sent nothing meanwhile; over stdio there is no proxy to keep.

// DefaultSSEKeepAlive is sse_keepalive when unset; MaxSSEKeepAlive bounds
// it (past a few minutes it keeps nothing alive).
const (
	DefaultSSEKeepAlive = 15 * time.Second
	MaxSSEKeepAlive     = 5 * time.Minute
)

// keptAlive is h pinging the host on the call's stream every sse_keepalive
// while the call is pending.
func (g *Gateway) keptAlive(h mcp.ToolHandler) mcp.ToolHandler {
	interval := g.cfg.SSEKeepAlive.Or(DefaultSSEKeepAlive)
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		pings, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-pings.Done():
					return
				case <-t.C:
					// A ping made under the call's context goes on the call's stream.
					pctx, cancel := context.WithTimeout(pings, interval)
					_ = req.Session.Ping(pctx, nil)
					cancel()
				}
			}
		})
		defer func() {
			stop()
			wg.Wait()
		}()
		return h(ctx, req)
	}
}
