package mcpgate

import "net/http"

// LibraryHandler is g's HTTP handler with every request left to the MCP
// library's handlers, the path servePlain must agree with.
func LibraryHandler(g *Gateway) http.Handler { return g.handler(nil) }
