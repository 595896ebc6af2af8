package mcpgate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// The rest of MCP: resources, resource templates, prompts, completion and
// subscriptions pass through as each server gives them. Nothing of them is
// gated: none of them runs an action. What a resource or a prompt returns
// is the server's content, exactly like a tool's result: a host that hands
// it to the gate labels it untrusted, and untrusted text grounds nothing.
//
// At a server's own endpoint its resources, templates and prompts keep
// their URIs and names. At the aggregated endpoint a prompt is
// "<server>.<prompt>", as a tool is; a resource or template keeps its URI
// (a URI names the thing itself, and rewriting it would break what the
// host builds on it), and one that two servers list is offered by neither
// there, since a read could not say whose it is: each server's endpoint
// still offers it.

// offeredItem is one resource, template or prompt a surface offers.
type offeredItem struct {
	server string          // whose it is
	name   string          // its URI, URI template or name at the server
	raw    json.RawMessage // as last listed
}

// features is what each surface offers beyond tools, kept in step with the
// catalog by syncFeatures; its maps are keyed by the name offered.
type features struct {
	resources, templates, prompts map[string]offeredItem
}

// subscriptions counts the hosts' subscriptions per server and URI, so that
// the gateway's own subscription upstream ends with the last host's.
type subscriptions struct {
	mu sync.Mutex
	n  map[[2]string]int
}

// syncFeatures makes every surface's resources, templates and prompts
// match the catalog for the servers of the policy in force. Caller holds
// g.mu.
func (g *Gateway) syncFeatures(pol *policy.Policy, servers []string) {
	for _, sf := range g.surfaces {
		want := features{resources: map[string]offeredItem{}, templates: map[string]offeredItem{}, prompts: map[string]offeredItem{}}
		dup := map[string]bool{}
		for _, id := range servers {
			// A user server's resources and prompts are not offered: reading them would take
			// the gateway's own credential, not the user's (featureClient refuses them too).
			if !sf.offers(id) || slices.Contains(g.cfg.UserServers, id) {
				continue
			}
			withhold := pol.Servers[id].Withhold
			res, _ := g.catalog.Resources(id)
			for _, r := range res {
				if r.Err == nil && !withhold.Resource(r.URI) {
					addOffered(want.resources, dup, r.URI, offeredItem{id, r.URI, r.Raw})
				}
			}
			tmpl, _ := g.catalog.ResourceTemplates(id)
			for _, r := range tmpl {
				if r.Err == nil && !withhold.Resource(r.URITemplate) {
					addOffered(want.templates, dup, r.URITemplate, offeredItem{id, r.URITemplate, r.Raw})
				}
			}
			prompts, _ := g.catalog.Prompts(id)
			for _, p := range prompts {
				if p.Err == nil && !withhold.Prompt(p.Name) {
					addOffered(want.prompts, dup, sf.exposedName(id+nameSeparator+p.Name), offeredItem{id, p.Name, p.Raw})
				}
			}
		}
		for name := range dup {
			g.log.Warn("resource listed by two servers; not offered at the aggregated endpoint", "uri", name)
			delete(want.resources, name)
			delete(want.templates, name)
		}
		g.applyFeatures(sf, want)
	}
}

// addOffered adds it under name, or marks name as listed twice.
func addOffered(m map[string]offeredItem, dup map[string]bool, name string, it offeredItem) {
	if old, ok := m[name]; ok && old.server != it.server {
		dup[name] = true
		return
	}
	m[name] = it
}

// applyFeatures brings sf's library servers from what they offer to want.
func (g *Gateway) applyFeatures(sf *surface, want features) {
	have := &sf.features
	have.resources = offerKind(g, sf, have.resources, want.resources, (*mcp.Server).RemoveResources,
		func(srv *mcp.Server, r *mcp.Resource, _ string, it offeredItem) {
			srv.AddResource(r, g.readResource(it.server))
		})
	have.templates = offerKind(g, sf, have.templates, want.templates, (*mcp.Server).RemoveResourceTemplates,
		func(srv *mcp.Server, t *mcp.ResourceTemplate, _ string, it offeredItem) {
			srv.AddResourceTemplate(t, g.readResource(it.server))
		})
	have.prompts = offerKind(g, sf, have.prompts, want.prompts, (*mcp.Server).RemovePrompts,
		func(srv *mcp.Server, p *mcp.Prompt, name string, it offeredItem) {
			p.Name = name
			srv.AddPrompt(p, g.getPrompt(it.server, it.name))
		})
}

// offerKind brings one kind of what sf offers from have to want, and returns what sf offers
// now: an item gone, or now another server's, is removed from every library server of sf
// (remove), and one new or changed is decoded from its listed definition and added to each, a
// copy apiece, under the name offered (add). One that does not decode is not offered.
func offerKind[T any](g *Gateway, sf *surface, have, want map[string]offeredItem, remove func(*mcp.Server, ...string),
	add func(srv *mcp.Server, def *T, name string, it offeredItem)) map[string]offeredItem {
	var gone []string
	for name, it := range have {
		if w, ok := want[name]; !ok || w.server != it.server {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		for _, srv := range sf.servers() {
			remove(srv, gone...)
		}
	}
	out := map[string]offeredItem{}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		it := want[name]
		if old, ok := have[name]; !ok || old.server != it.server || string(old.raw) != string(it.raw) {
			var def T
			if err := json.Unmarshal(it.raw, &def); err != nil {
				g.log.Warn("not offered", "server", it.server, "name", it.name, "error", err.Error())
				continue
			}
			for _, srv := range sf.servers() {
				c := def
				add(srv, &c, name, it)
			}
		}
		out[name] = it
	}
	return out
}

// readResource reads a resource of server for the host, under the
// server's forward_timeout.
func (g *Gateway) readResource(server string) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if s := g.policy().Servers[server]; s != nil && s.Withhold.Resource(req.Params.URI) {
			// A template of the server's may fit a URI the policy withholds.
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		return askFor(ctx, g, server, func(ctx context.Context, cl *upstream.Client) (*mcp.ReadResourceResult, json.RawMessage, error) {
			return cl.ReadResource(ctx, req.Params.URI)
		})
	}
}

// getPrompt gets the prompt the server names name for the host.
func (g *Gateway) getPrompt(server, name string) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return askFor(ctx, g, server, func(ctx context.Context, cl *upstream.Client) (*mcp.GetPromptResult, json.RawMessage, error) {
			return cl.GetPrompt(ctx, name, req.Params.Arguments)
		})
	}
}

// complete passes a completion/complete on to the server whose prompt or
// resource template the reference names at sf.
func (g *Gateway) complete(sf *surface) func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	return func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		p := *req.Params
		if p.Ref == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion/complete names no reference"}
		}
		ref := *p.Ref
		p.Ref = &ref
		g.mu.Lock()
		var it offeredItem
		var ok bool
		switch ref.Type {
		case "ref/prompt":
			it, ok = sf.features.prompts[ref.Name]
		case "ref/resource":
			it, ok = sf.features.templates[ref.URI]
			if !ok {
				it, ok = sf.features.resources[ref.URI]
			}
		}
		g.mu.Unlock()
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("completion/complete: no %s %q here", strings.TrimPrefix(ref.Type, "ref/"), cmp.Or(ref.Name, ref.URI))}
		}
		if ref.Type == "ref/prompt" {
			ref.Name = it.name // the server's own name for it
		}
		return askFor(ctx, g, it.server, func(ctx context.Context, cl *upstream.Client) (*mcp.CompleteResult, json.RawMessage, error) {
			return cl.Complete(ctx, &p)
		})
	}
}

// subscribe subscribes the gateway to a resource at its server for a host
// at sf; the library then keeps the host's session subscribed, and
// resourceUpdated tells it of updates.
func (g *Gateway) subscribe(sf *surface) func(context.Context, *mcp.SubscribeRequest) error {
	return func(ctx context.Context, req *mcp.SubscribeRequest) error {
		server, ok := g.resourceServerOf(sf, req.Params.URI)
		if s := g.policy().Servers[server]; !ok || s == nil || s.Withhold.Resource(req.Params.URI) {
			return mcp.ResourceNotFoundError(req.Params.URI)
		}
		if err := g.askServer(ctx, server, func(ctx context.Context, cl *upstream.Client) error { return cl.Subscribe(ctx, req.Params.URI) }); err != nil {
			return err
		}
		g.subs.mu.Lock()
		defer g.subs.mu.Unlock()
		if g.subs.n == nil {
			g.subs.n = map[[2]string]int{}
		}
		g.subs.n[[2]string{server, req.Params.URI}]++
		return nil
	}
}

// unsubscribe ends a host's subscription, and the gateway's own at the
// server with the last host's.
func (g *Gateway) unsubscribe(sf *surface) func(context.Context, *mcp.UnsubscribeRequest) error {
	return func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
		server, ok := g.resourceServerOf(sf, req.Params.URI)
		if !ok {
			return nil
		}
		key := [2]string{server, req.Params.URI}
		g.subs.mu.Lock()
		last := g.subs.n[key] == 1
		if g.subs.n[key] > 0 {
			g.subs.n[key]--
		}
		if g.subs.n[key] == 0 {
			delete(g.subs.n, key)
		}
		g.subs.mu.Unlock()
		if !last {
			return nil
		}
		return g.askServer(ctx, server, func(ctx context.Context, cl *upstream.Client) error { return cl.Unsubscribe(ctx, req.Params.URI) })
	}
}

// resourceUpdated passes a server's notifications/resources/updated on to
// the sessions subscribed to the URI, at every surface offering the
// server: the library sends it to those sessions only.
func (g *Gateway) resourceUpdated(server, uri string) {
	for _, sf := range g.surfaces {
		if !sf.offers(server) {
			continue
		}
		for _, srv := range sf.servers() {
			_ = srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
		}
	}
}

// resourceServerOf is the server whose resource (or template match) uri is
// at sf.
func (g *Gateway) resourceServerOf(sf *surface, uri string) (string, bool) {
	if sf.server != "" {
		return sf.server, true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if it, ok := sf.features.resources[uri]; ok {
		return it.server, true
	}
	return "", false
}

// askServer makes a request of server's that is not a tool call for the host, under the
// server's forward_timeout, over featureClient's connection; its error is upstreamError's.
func (g *Gateway) askServer(ctx context.Context, server string, ask func(context.Context, *upstream.Client) error) error {
	ctx, cancel := g.forwarding(ctx, server)
	defer cancel()
	cl, err := g.featureClient(ctx, server)
	if err != nil {
		return err
	}
	if err := ask(ctx, cl); err != nil {
		return g.upstreamError(ctx, server, err)
	}
	return nil
}

// askFor is askServer for a request with a result (an upstream.Client method's, whose raw
// answer is not needed), which the host is answered without the server's serverInfo.
func askFor[R mcp.Result](ctx context.Context, g *Gateway, server string, ask func(context.Context, *upstream.Client) (R, json.RawMessage, error)) (R, error) {
	var res R
	err := g.askServer(ctx, server, func(ctx context.Context, cl *upstream.Client) (err error) {
		res, _, err = ask(ctx, cl)
		return err
	})
	if err != nil {
		var none R
		return none, err
	}
	res.SetMeta(withoutServerInfo(res.GetMeta()))
	return res, nil
}

// featureClient is the connection to server for a request that is not a
// tool call, refused as a tool call would be when the policy in force no
// longer has the server.
func (g *Gateway) featureClient(ctx context.Context, server string) (*upstream.Client, error) {
	if g.policy().Servers[server] == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "This is not available at the moment."}
	}
	if slices.Contains(g.cfg.UserServers, server) {
		// A user server's resources, prompts and completions would be read with the gateway's
		// own (list-only) credential, not the user's: they are not served.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "This service acts with each user's own account, and this request is not available through the gateway."}
	}
	cl, err := g.catalog.Client(ctx, server)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The service could not be reached."}
	}
	return cl, nil
}

// upstreamError is what the host is answered for a failed request to
// server: the server's own JSON-RPC error as it sent it, or the gateway's
// saying what happened.
func (g *Gateway) upstreamError(ctx context.Context, server string, err error) error {
	if rpc, ok := errors.AsType[*jsonrpc.Error](err); ok {
		return rpc
	}
	if timedOut(ctx) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("The service did not answer within %v.", g.cfg.forwardTimeout(server))}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The service could not answer."}
}

// withoutServerInfo is a copy of a result's _meta without the upstream's
// serverInfo, nil when nothing else is left: the host talks to the
// gateway, which presents the server by its deployment id. The copy is the
// caller's to change.
func withoutServerInfo(m mcp.Meta) mcp.Meta {
	out := maps.Clone(m)
	delete(out, mcp.MetaKeyServerInfo)
	if len(out) == 0 {
		return nil
	}
	return out
}
