package upstream

import (
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SetRoots makes roots the list the client answers the server's
// roots/list with, and tells the server the list changed
// (notifications/roots/list_changed). A client dialed without
// Options.Roots declares no roots: SetRoots does nothing there.
//
// The MCP library keeps the list and sends the notification: roots it no
// longer holds are removed, then the new list is added (replacing any
// with the same URI), so the server may be told twice and asks for the
// list whole each time.
func (c *Client) SetRoots(roots []*mcp.Root) {
	if c.opts.Roots == nil {
		return
	}
	c.rootsMu.Lock()
	defer c.rootsMu.Unlock()
	roots = slices.DeleteFunc(slices.Clone(roots), func(r *mcp.Root) bool { return r == nil })
	uris := rootURIs(roots)
	c.mcp.RemoveRoots(slices.DeleteFunc(slices.Clone(c.roots), func(uri string) bool { return slices.Contains(uris, uri) })...)
	c.mcp.AddRoots(roots...)
	c.roots = uris
}

func rootURIs(roots []*mcp.Root) []string {
	out := make([]string, 0, len(roots))
	for _, r := range roots {
		out = append(out, r.URI)
	}
	return out
}
