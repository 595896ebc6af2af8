package mcpgate

import (
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PathAggregated is the HTTP path of the aggregated endpoint, where every
// server's tools are offered under "<server>.<tool>". One server's own
// endpoint is PathAggregated + "/" + its id.
const PathAggregated = "/mcp"

// nameSeparator joins a server id and a tool name at the aggregated
// endpoint. A server id holds no '.' (the policy refuses one), so the
// first '.' of an aggregated name always ends the server id, and two
// servers' tools can never take the same name.
const nameSeparator = "."

// A surface is one endpoint at which the gateway offers the servers'
// tools: the aggregated endpoint, or one server's own, where the tools
// keep the names the server gives them — the names a host configured for
// the server alone already uses.
//
// Whatever the endpoint, a call is the gate's by its aggregated name
// ("<server>.<tool>"): that is the name a requestState binds, a relayed
// question is kept under and a tools entry's scopes are found by, so a
// call asked at one endpoint is the same call at the other.
type surface struct {
	// server is the id of the one server offered, or "" at the aggregated endpoint.
	server string
	// The library's servers of the endpoint, one per way in: 2026-07-28
	// hosts over HTTP (stateless), older hosts' HTTP sessions, and stdio.
	stateless, sessions, stdio *mcp.Server
	// features is what the surface offers beyond tools (guarded by Gateway.mu).
	features features
}

// path is the surface's HTTP path.
func (s *surface) path() string {
	if s.server == "" {
		return PathAggregated
	}
	return PathAggregated + "/" + s.server
}

// offers reports whether the surface offers the tools of server.
func (s *surface) offers(server string) bool { return s.server == "" || s.server == server }

// exposedName is the name under which the surface offers the gate's tool
// name (an aggregated name of a server it offers).
func (s *surface) exposedName(gateName string) string {
	if s.server == "" {
		return gateName
	}
	return strings.TrimPrefix(gateName, s.server+nameSeparator)
}

// gateName is the aggregated name of the tool the surface offers as name.
func (s *surface) gateName(name string) string {
	if s.server == "" {
		return name
	}
	return s.server + nameSeparator + name
}

// servers are the surface's library servers.
func (s *surface) servers() []*mcp.Server { return []*mcp.Server{s.stateless, s.sessions, s.stdio} }

// surfaceFor returns the surface of --server id for stdio: the aggregated
// one for "", or the server's own, which must be one the gateway connected
// to at start.
func (g *Gateway) surfaceFor(server string) (*surface, error) {
	for _, s := range g.surfaces {
		if s.server == server {
			return s, nil
		}
	}
	return nil, fmt.Errorf("server %q is not a server of the policy the gateway connected to at start", server)
}
