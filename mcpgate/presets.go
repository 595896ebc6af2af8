package mcpgate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/suggest"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// The operator's tools entries are keyed "server/tool". An entry whose key names nothing is a
// typo whose presets silently apply to nothing, so:
//
//   - a server the policy does not declare is an error at load: LoadConfig reports it at its
//     place in the config file, and New refuses to start on it;
//   - a tool its server does not list can only be known once the server is listed, and is then
//     logged at error level (at start, and whenever a listing lacks it again), not refused. The
//     gate stays closed either way: without its preset, the real tool's action name and timing
//     are asked of the user, so a dead entry adds questions and never lets a call through;
//     whereas refusing to start on it would take every tool down at the next restart after a
//     server retired one.

// checkPolicyServers reports each tools entry and each servers override that names a server
// the policy does not declare, as *confx.PathError at its key.
func checkPolicyServers(c *Config, pol *policy.Policy) error {
	ids := slices.Sorted(maps.Keys(pol.Servers))
	unknown := func(server string) string {
		return fmt.Sprintf("the policy declares no server %q%s", server, suggest.DidYouMean(server, ids))
	}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(c.Tools)) {
		server, _, ok := strings.Cut(key, "/")
		if _, known := pol.Servers[server]; ok && !known {
			errs = append(errs, confx.Errorf(confx.Key("tools", key), "%s", unknown(server)))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.Servers)) {
		if _, known := pol.Servers[id]; !known {
			errs = append(errs, confx.Errorf(confx.Key("servers", id), "%s", unknown(id)))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.ForwardTimeouts)) {
		if _, known := pol.Servers[id]; !known {
			errs = append(errs, confx.Errorf(confx.Key("forward_timeouts", id), "%s", unknown(id)))
		}
	}
	return errors.Join(errs...)
}

// reportPresets logs at error level each tools entry that applies to nothing under the policy in
// force and the current listings: its server is no longer declared (a reload dropped it), or
// its server's listing has no such tool. Each is logged once until it applies again; a server
// without a listing right now says nothing either way. Caller holds g.mu.
func (g *Gateway) reportPresets(pol *policy.Policy) {
	for _, key := range slices.Sorted(maps.Keys(g.cfg.Tools)) {
		server, tool, ok := strings.Cut(key, "/")
		if !ok {
			continue
		}
		var attrs []any
		if _, declared := pol.Servers[server]; !declared {
			attrs = []any{"reason", "the policy in force declares no server " + server}
		} else if tools, listed := g.catalog.Tools(server); !listed {
			continue
		} else if names := toolNames(tools); !slices.Contains(names, tool) {
			attrs = []any{"reason", "server " + server + " lists no tool " + tool}
			if hint := suggest.Closest(tool, names); hint != "" {
				attrs = append(attrs, "did_you_mean", server+"/"+hint)
			}
		}
		if attrs == nil {
			delete(g.deadPresets, key)
			continue
		}
		if g.deadPresets[key] {
			continue
		}
		g.deadPresets[key] = true
		g.log.Error("tools entry applies to nothing; its presets are not used and the tool's user is asked instead",
			append([]any{"entry", key}, attrs...)...)
	}
}

func toolNames(tools []upstream.Tool) []string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}
