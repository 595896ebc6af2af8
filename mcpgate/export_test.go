package mcpgate

import (
	"context"
	"net/http"
)

// LibraryHandler is g's HTTP handler with every request left to the MCP
// library's handlers, the path servePlain must agree with.
func LibraryHandler(g *Gateway) http.Handler { return g.handler(false) }

// RefreshRound is one round of Run's periodic refresh, done now: every server listed again,
// then the sync that follows it. Tests call it to know that a round has ended.
func RefreshRound(ctx context.Context, g *Gateway) {
	_ = g.catalog.Refresh(ctx)
	g.syncTools()
}
