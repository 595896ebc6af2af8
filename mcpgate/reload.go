package mcpgate

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/verdictgate/verdict/internal/daemon"
	"github.com/verdictgate/verdict/internal/metricx"
	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// DefaultPolicyPoll is how often the policy file is checked for a change:
// the same default as verdictd's (verdictd.DefaultPolicyPoll), so that the
// gateway and the gate it fronts pick up an edit within the same bound.
// It is restated here rather than imported because the verdictd package
// would bring its storage and etcd client into the gateway's binary.
const DefaultPolicyPoll = 2 * time.Second

// policySnap is one loaded policy file. It is never modified once in
// force: a reload installs a new one with a single pointer swap, and a
// call reads the pointer once, so it runs to its end under one policy.
type policySnap struct {
	pol  *policy.Policy
	hash [sha256.Size]byte
}

// parsePolicy parses and validates a policy file's content whole. Nothing
// of a content that fails is used.
func parsePolicy(path string, data []byte) (*policySnap, error) {
	p, err := policy.Parse(data)
	if err != nil {
		if pe, ok := errors.AsType[*policy.Error](err); ok {
			pe.File = path
		}
		return nil, err
	}
	return &policySnap{pol: p, hash: sha256.Sum256(data)}, nil
}

// policy returns the policy in force.
func (g *Gateway) policy() *policy.Policy { return g.snap.Load().pol }

// PolicyVersion returns the version of the policy in force.
func (g *Gateway) PolicyVersion() string { return g.policy().Version }

// Reload reads the policy file and, if it loads, puts it in force for
// every call that starts afterwards; calls already running finish under
// the policy they started with. A file that does not load (unreadable,
// not YAML, or not a valid policy) leaves the policy in force untouched,
// is logged at error level and counted as a failed reload, and its error
// is returned. An unchanged file is counted as a successful reload.
func (g *Gateway) Reload(context.Context) error {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	data, err := opfile.ReadFile(g.cfg.Policy)
	if err != nil {
		err = fmt.Errorf("policy: %w", err)
		g.reloadFailed(err)
		return err
	}
	return g.apply(data, true)
}

// apply puts the policy file content data in force. explicit says
// whether an unchanged content still counts as a reload (SIGHUP) or is
// skipped silently (the file watcher). Caller holds reloadMu.
func (g *Gateway) apply(data []byte, explicit bool) error {
	cur := g.snap.Load()
	next, err := parsePolicy(g.cfg.Policy, data)
	if err != nil {
		g.reloadFailed(err)
		return err
	}
	if next.hash == cur.hash {
		if explicit {
			g.metrics.reloads.WithLabelValues("ok").Inc()
			g.log.Info("policy unchanged", "version", cur.pol.Version)
		}
		return nil
	}
	g.snap.Store(next)
	metricx.SetInfo(g.metrics.policyInfo, next.pol.Version)
	g.metrics.reloads.WithLabelValues("ok").Inc()
	g.log.Info("policy reloaded", "from", cur.pol.Version, "to", next.pol.Version)
	g.reportServers(next.pol)
	// The listing follows at once: tools of servers the policy dropped
	// disappear now (and sessions are told), not at the next refresh.
	g.syncTools()
	return nil
}

func (g *Gateway) reloadFailed(err error) {
	g.metrics.reloads.WithLabelValues("error").Inc()
	g.log.Error("policy reload failed; keeping the policy in force", "version", g.policy().Version, "error", err.Error())
}

// watchPolicy reloads the policy whenever the file's content changes,
// until ctx ends (daemon.WatchFile: a content that failed to load counts
// as one failed reload, not one per tick; SIGHUP still tries it).
func (g *Gateway) watchPolicy(ctx context.Context) {
	daemon.WatchFile(ctx, g.cfg.Policy, g.cfg.PolicyPoll.Or(DefaultPolicyPoll),
		func() [sha256.Size]byte { return g.snap.Load().hash },
		func(data []byte) error {
			g.reloadMu.Lock()
			defer g.reloadMu.Unlock()
			return g.apply(data, false)
		})
}

// reportServers says where the new policy's servers differ from the
// connections the gateway made at start. A reload connects to nothing, so
// it never exposes a server the gateway did not connect to then: a server
// the policy added stays unexposed until restart; a server it dropped has
// its tools withdrawn (its connection stays, so a policy that brings it
// back exposes it again); a server whose tools_from changed keeps the
// connection made at start.
func (g *Gateway) reportServers(p *policy.Policy) {
	for _, id := range slices.Sorted(maps.Keys(p.Servers)) {
		s := p.Servers[id]
		have, connected := g.conns[id]
		_, override := g.cfg.Servers[id]
		switch {
		case !connected && s.ToolsFrom == nil:
			g.log.Warn("server added by the policy is not exposed: it lists its tools inline, so the gateway needs a servers entry for it, and the gateway does not start without one",
				"server", id)
		case !connected:
			g.log.Warn("server added by the policy is not exposed: the gateway connects to it at restart", "server", id)
		case override:
		case s.ToolsFrom == nil:
			g.log.Warn("server's tools_from was replaced by an inline list: the gateway keeps its connection until restart and does not start without a servers entry for it",
				"server", id)
		case have.URL != s.ToolsFrom.URL || !slices.Equal(have.Command, s.ToolsFrom.Command):
			g.log.Warn("server's tools_from changed: the gateway keeps the connection it made at start until restart", "server", id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(g.conns)) {
		if _, ok := p.Servers[id]; ok {
			continue
		}
		if _, override := g.cfg.Servers[id]; override {
			g.log.Warn("server removed by the policy: its tools are no longer exposed; remove servers."+id+" from the gateway config, which does not start with an entry for a server the policy lacks",
				"server", id)
			continue
		}
		g.log.Warn("server removed by the policy: its tools are no longer exposed", "server", id)
	}
}

// connections is how the gateway itself reaches each server of p: the
// config's servers entry, else the policy's tools_from.
func connections(p *policy.Policy, overrides map[string]upstream.Config) (map[string]upstream.Config, error) {
	out := map[string]upstream.Config{}
	for _, id := range slices.Sorted(maps.Keys(p.Servers)) {
		s := p.Servers[id]
		if c, ok := overrides[id]; ok {
			out[id] = c
			continue
		}
		if s.ToolsFrom == nil {
			return nil, fmt.Errorf("server %s: the policy lists its tools inline; give the gateway a servers.%s entry to reach it", id, id)
		}
		out[id] = upstream.Config{Command: s.ToolsFrom.Command, URL: s.ToolsFrom.URL}
	}
	for _, id := range slices.Sorted(maps.Keys(overrides)) {
		if _, ok := p.Servers[id]; !ok {
			return nil, fmt.Errorf("servers.%s: not a server of the policy", id)
		}
	}
	return out, nil
}
