package verdictd

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// snapshot is one loaded policy with the tool catalog that serves it. A request takes the
// snapshot in force when it starts and keeps it to the end, so a reload never mixes two policies
// in one decision.
type snapshot struct {
	policy *policy.Policy
	hash   [sha256.Size]byte
	// remote are the servers listed over MCP (tools_from); catalog lists them, nil when none.
	remote  map[string]upstream.Config
	catalog *upstream.Catalog
	// inline are the servers whose tools the policy lists itself, by server and tool name.
	inline map[string]map[string]upstream.Tool
}

// errToolUnavailable means the tool's definition cannot be had: its server's listing is
// missing or stale, or the listed definition is unusable.
var errToolUnavailable = errors.New("tool definition unavailable")

// errUnknownTool means the policy names no such server, or the server's current listing has no
// such tool: a request that cannot succeed, refused before anything is decided or counted.
var errUnknownTool = errors.New("unknown tool")

// inForce is the policy in force and the digest of server's tool as listed now, "" when it has
// no usable definition: what the approvals are bound to.
func (s *Service) inForce(server, tool string) (*policy.Policy, string) {
	snap := s.snap.Load()
	if t, err := snap.lookup(server, tool); err == nil {
		return snap.policy, t.Digest
	}
	return snap.policy, ""
}

// lookup returns the tool as its server lists it now.
func (s *snapshot) lookup(server, tool string) (upstream.Tool, error) {
	if _, ok := s.policy.Servers[server]; !ok {
		return upstream.Tool{}, fmt.Errorf("%w: the policy has no server %q", errUnknownTool, server)
	}
	var (
		t      upstream.Tool
		ok     bool
		listed bool // the server has a current listing: a tool missing from it does not exist
	)
	if tools, isInline := s.inline[server]; isInline {
		t, ok = tools[tool]
		listed = true
	} else if s.catalog != nil {
		t, ok = s.catalog.Lookup(server, tool)
		if !ok {
			// Asked only on the way to a refusal: Tools copies the listing.
			_, listed = s.catalog.Tools(server)
		}
	}
	switch {
	case !ok && listed:
		return upstream.Tool{}, fmt.Errorf("%w: server %q lists no tool %q", errUnknownTool, server, tool)
	case !ok:
		return upstream.Tool{}, fmt.Errorf("%w: server %q has no current listing", errToolUnavailable, server)
	case t.Err != nil:
		return upstream.Tool{}, fmt.Errorf("%w: %v", errToolUnavailable, t.Err)
	case t.Digest == "":
		return upstream.Tool{}, fmt.Errorf("%w: no definition digest", errToolUnavailable)
	}
	if err := s.policy.CheckPin(server, tool, t.Digest); err != nil {
		return upstream.Tool{}, fmt.Errorf("%w: %w", errToolUnavailable, err)
	}
	return t, nil
}

// mismatches inspects every policy tool with field rules against its definition — inline, or as
// cat (the catalog of the same servers, nil when there is none yet) last listed it — and returns
// one problem per tool whose fields name an argument the tool does not declare. A policy with
// such a problem is not put in force: its constraint would silently vanish. A tool with no
// definition yet is left to the preflight, which repairs it for the same reason.
func (s *snapshot) mismatches(eng *gates.Engine, cat *upstream.Catalog) ([]policy.Problem, error) {
	var out []policy.Problem
	for _, key := range slices.Sorted(maps.Keys(s.policy.Tools)) {
		pt := s.policy.Tools[key]
		if len(pt.Fields) == 0 {
			continue
		}
		server, name, _ := strings.Cut(key, "/")
		var (
			t  upstream.Tool
			ok bool
		)
		if tools, isInline := s.inline[server]; isInline {
			t, ok = tools[name]
		} else if cat != nil {
			t, ok = cat.Lookup(server, name)
		}
		if !ok || t.Err != nil {
			continue
		}
		g, err := eng.Inspect(gateTool(t), pt)
		if err != nil {
			return nil, err
		}
		if g != nil && g.Kind == api.GatePolicyMismatch {
			out = append(out, policy.Problem{Path: fmt.Sprintf("tools[%q]", key), Msg: g.Detail})
		}
	}
	return out, nil
}

// readiness is the snapshot's part in verdictd's readiness: its catalog's (see
// upstream.Catalog.Readiness: the first listing of every tools_from server has been tried, and
// one of them at least is listed now). A policy that lists tools inline has servers that need
// no listing: verdictd decides their preflights whatever the others do, so it stays ready once
// the first listings have been tried.
func (s *snapshot) readiness() upstream.Readiness {
	if s.catalog == nil {
		return upstream.Readiness{Ready: true}
	}
	r := s.catalog.Readiness(nil)
	if !r.Ready && !r.Starting && len(s.inline) > 0 {
		r.Ready, r.Problems = true, nil
	}
	return r
}

// remoteServers returns the MCP connection config of every policy server with tools_from.
func remoteServers(p *policy.Policy) map[string]upstream.Config {
	out := map[string]upstream.Config{}
	for id, sv := range p.Servers {
		if sv.ToolsFrom != nil {
			out[id] = upstream.Config{Command: slices.Clone(sv.ToolsFrom.Command), URL: sv.ToolsFrom.URL}
		}
	}
	return out
}

func sameServers(a, b map[string]upstream.Config) bool {
	return maps.EqualFunc(a, b, func(x, y upstream.Config) bool {
		return slices.Equal(x.Command, y.Command) && x.URL == y.URL && maps.Equal(x.Env, y.Env) &&
			maps.Equal(x.Headers, y.Headers)
	})
}

// inlineTools reads the tools a policy lists itself (policy.Policy.InlineTools). A definition
// that cannot be used is kept with Err set: a preflight on it is a definition repair, never a
// tool without constraints.
func inlineTools(p *policy.Policy) map[string]map[string]upstream.Tool {
	out := map[string]map[string]upstream.Tool{}
	for id, tools := range p.InlineTools() {
		out[id] = map[string]upstream.Tool{}
		for name, t := range tools {
			out[id][name] = upstream.Tool{Server: id, Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
				Annotations: t.Annotations, Raw: t.Raw, Digest: t.Digest, Err: t.Err}
		}
	}
	return out
}

// gateTool is the engine's view of a listed tool.
func gateTool(t upstream.Tool) gates.Tool {
	return gates.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Annotations: t.Annotations}
}
