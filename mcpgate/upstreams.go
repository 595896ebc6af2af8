package mcpgate

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/upstream"
)

// Upstream connections of host sessions.
//
// A server of a revision before 2026-07-28 asks its questions
// (elicitation/create), and sends its log messages, on its connection
// without naming the call they belong to. Over the gateway's one shared
// connection a question could then be any caller's, so it is relayed only
// while exactly one call is in flight there: two users calling at once
// would have one question refused. So a host that holds a session (stdio,
// or an older host's HTTP session), calling a pass-through tool of such a
// server, gets a connection of its own to that server, made at its first
// call and closed when its session ends: what the server sends on it is
// that session's. At most max_upstream_sessions such connections are open
// at once, and at most max_upstream_sessions_per_principal of one
// principal's sessions, so that one user opening sessions cannot take
// every other user's; past either a call takes the shared connection, as every call of
// a 2026-07-28 host does (such a host is asked with input_required
// results, each tied to its call), as does every call to a 2026-07-28
// server (which asks the same way).

// DefaultMaxUpstreamSessions bounds the connections of host sessions, all
// servers together; MaxMaxUpstreamSessions is the most the config may ask
// for (each holds a connection, or a server process over stdio).
// DefaultMaxUpstreamSessionsPerPrincipal is one principal's share.
const (
	DefaultMaxUpstreamSessions             = 100
	MaxMaxUpstreamSessions                 = 10000
	DefaultMaxUpstreamSessionsPerPrincipal = 10
)

// sessionUpstreams are the open connections of host sessions.
type sessionUpstreams struct {
	mu    sync.Mutex
	conns map[sessionServer]*sessionConn
	// held counts the connections of each principal's sessions.
	held map[string]int
	// levels are the log levels host sessions set, kept until the session ends.
	levels map[*mcp.ServerSession]mcp.LoggingLevel
}

// sessionServer names one host session's connection to one server.
type sessionServer struct {
	host   *mcp.ServerSession
	server string
}

// sessionConn is a connection being made (ready open) or made.
type sessionConn struct {
	principal string
	ready     chan struct{}
	cl        *upstream.Client
	err       error
	// made is set, under sessionUpstreams.mu, once cl can be set a level.
	made bool
	// rootsMu orders the host's roots set on cl.
	rootsMu sync.Mutex
	// levelMu orders the levels set on cl; level is the last one set.
	levelMu sync.Mutex
	level   mcp.LoggingLevel
}

// upstreamFor returns the connection a pass-through call of h takes to
// server: the host session's own where it needs one (see above), else the
// gateway's shared connection.
func (g *Gateway) upstreamFor(ctx context.Context, h host, server string) (*upstream.Client, error) {
	shared, err := g.catalog.Client(ctx, server)
	if err != nil || h.ss == nil {
		return shared, err
	}
	if caps, ok := shared.Capabilities(); !ok || caps.ProtocolVersion >= revisionStateless {
		return shared, nil
	}
	key := sessionServer{h.ss, server}
	most, mostPerPrincipal := g.upstreamBounds()
	u := &g.upstreams
	u.mu.Lock()
	sc, ok := u.conns[key]
	if !ok {
		if len(u.conns) >= most {
			u.mu.Unlock()
			g.log.Warn("max_upstream_sessions connections open: this call takes the shared connection", "server", server)
			return shared, nil
		}
		if u.held[h.principal] >= mostPerPrincipal {
			u.mu.Unlock()
			g.log.Warn("max_upstream_sessions_per_principal connections open: this call takes the shared connection", "server", server, "principal", h.principal)
			return shared, nil
		}
		if u.conns == nil {
			u.conns, u.held = map[sessionServer]*sessionConn{}, map[string]int{}
		}
		sc = &sessionConn{principal: h.principal, ready: make(chan struct{})}
		u.conns[key] = sc
		u.held[h.principal]++
		u.mu.Unlock()
		opts := g.clientOptions()
		if declaresRoots(key.host) {
			opts.Roots = g.sessionRoots(ctx, key)
		}
		// Made apart from the call's context: it outlives the call, until the session ends.
		sc.cl, sc.err = upstream.Dial(context.WithoutCancel(ctx), server, g.conns[server], opts)
		if sc.err == nil {
			u.mu.Lock()
			sc.made = true
			u.mu.Unlock()
			g.applyLevel(ctx, key, sc)
		}
		close(sc.ready)
		go g.closeWithSession(key, sc)
	} else {
		u.mu.Unlock()
	}
	select {
	case <-sc.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if sc.err != nil {
		g.log.Warn("no connection of the host's session to the server; this call takes the shared connection", "server", server, "error", sc.err.Error())
		return shared, nil
	}
	return sc.cl, nil
}

// madeFor returns the connections of host's session that are made (u.mu held).
func (u *sessionUpstreams) madeFor(host *mcp.ServerSession) map[sessionServer]*sessionConn {
	made := map[sessionServer]*sessionConn{}
	for key, sc := range u.conns {
		if key.host == host && sc.made {
			made[key] = sc
		}
	}
	return made
}

// declaresRoots reports whether the host of ss declared roots.
func declaresRoots(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.RootsV2 != nil
}

// sessionRoots asks the host of key for its roots, for its connection to
// key's server, under that server's forward_timeout. A host that does not
// answer gives its connection no roots (an empty list, never the shared
// connection's nothing-declared: the server is told when the host's roots
// change, and asks again).
func (g *Gateway) sessionRoots(ctx context.Context, key sessionServer) []*mcp.Root {
	ctx, cancel := g.forwarding(ctx, key.server)
	defer cancel()
	res, err := key.host.ListRoots(ctx, nil)
	if err != nil {
		g.log.Warn("the host did not list its roots; its connection to the server has none", "server", key.server, "error", err.Error())
		return []*mcp.Root{}
	}
	return slices.DeleteFunc(slices.Clone(res.Roots), func(r *mcp.Root) bool { return r == nil })
}

// rootsChanged is the library servers' handler of a host's
// notifications/roots/list_changed: the session's own connections are
// given its new roots (each server is told they changed).
func (g *Gateway) rootsChanged(ctx context.Context, req *mcp.RootsListChangedRequest) {
	if req == nil || req.Session == nil || !declaresRoots(req.Session) {
		return
	}
	u := &g.upstreams
	u.mu.Lock()
	made := u.madeFor(req.Session)
	u.mu.Unlock()
	// Asked apart from the notification: the library reads the host's
	// messages, the answer to this question among them, only once the
	// handler has returned.
	ctx = context.WithoutCancel(ctx)
	for key, sc := range made {
		go func() {
			// Whichever asks last sets what the host said last.
			sc.rootsMu.Lock()
			defer sc.rootsMu.Unlock()
			sc.cl.SetRoots(g.sessionRoots(ctx, key))
		}()
	}
}

// passLevel is the library servers' middleware that sets the level a host
// sets for its session (logging/setLevel) on the session's own
// connections, once the library has taken it for the session. A
// connection that does not take it is logged, and the host is answered as
// the library answered it: the level still bounds what is relayed to it.
func (g *Gateway) passLevel(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams])
		if err != nil || !ok || r.Session == nil || r.Params == nil {
			return res, err
		}
		u := &g.upstreams
		u.mu.Lock()
		if u.levels == nil {
			u.levels = map[*mcp.ServerSession]mcp.LoggingLevel{}
		}
		if _, known := u.levels[r.Session]; !known {
			go g.forgetLevel(r.Session)
		}
		u.levels[r.Session] = r.Params.Level
		made := u.madeFor(r.Session)
		u.mu.Unlock()
		for key, sc := range made {
			g.applyLevel(ctx, key, sc)
		}
		return res, err
	}
}

// applyLevel sets on sc the level its host session set last, if it is
// not the one sc was set already. Whoever calls it last for a connection
// sets the session's latest level there.
func (g *Gateway) applyLevel(ctx context.Context, key sessionServer, sc *sessionConn) {
	sc.levelMu.Lock()
	defer sc.levelMu.Unlock()
	g.upstreams.mu.Lock()
	level, ok := g.upstreams.levels[key.host]
	g.upstreams.mu.Unlock()
	if !ok || level == sc.level {
		return
	}
	ctx, cancel := g.forwarding(context.WithoutCancel(ctx), key.server)
	defer cancel()
	if err := sc.cl.SetLoggingLevel(ctx, level); err != nil {
		g.log.Warn("the host session's log level was not set at its connection to the server", "server", key.server, "level", level, "error", err.Error())
		return
	}
	sc.level = level
}

// forgetLevel forgets the level of host once its session ends.
func (g *Gateway) forgetLevel(host *mcp.ServerSession) {
	_ = host.Wait()
	g.upstreams.mu.Lock()
	delete(g.upstreams.levels, host)
	g.upstreams.mu.Unlock()
}

// closeWithSession closes sc when its host session ends (or at once when
// it could not be made), and forgets it.
func (g *Gateway) closeWithSession(key sessionServer, sc *sessionConn) {
	if sc.err == nil {
		_ = key.host.Wait()
		_ = sc.cl.Close()
	}
	u := &g.upstreams
	u.mu.Lock()
	if u.conns[key] == sc {
		delete(u.conns, key)
		if u.held[sc.principal]--; u.held[sc.principal] <= 0 {
			delete(u.held, sc.principal)
		}
	}
	u.mu.Unlock()
}

// closeUpstreams closes the connections of host sessions (the gateway is closing).
func (g *Gateway) closeUpstreams() {
	g.upstreams.mu.Lock()
	conns := g.upstreams.conns
	g.upstreams.conns, g.upstreams.held = nil, nil
	g.upstreams.mu.Unlock()
	for _, sc := range conns {
		<-sc.ready
		if sc.cl != nil {
			_ = sc.cl.Close()
		}
	}
}

// openUpstreams is the number of connections of host sessions open or being made.
func (g *Gateway) openUpstreams() int {
	g.upstreams.mu.Lock()
	defer g.upstreams.mu.Unlock()
	return len(g.upstreams.conns)
}

// upstreamBounds are max_upstream_sessions and max_upstream_sessions_per_principal in force,
// defaults applied (Validate refuses a negative one): a principal's default share is at most the whole.
func (g *Gateway) upstreamBounds() (most, perPrincipal int) {
	most = cmp.Or(g.cfg.MaxUpstreamSessions, DefaultMaxUpstreamSessions)
	return most, cmp.Or(g.cfg.MaxUpstreamSessionsPerPrincipal, min(DefaultMaxUpstreamSessionsPerPrincipal, most))
}
