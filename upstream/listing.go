package upstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Listings besides tools: a server's resources, resource templates and
// prompts, listed as tools are (every page, each page's result captured from
// the wire below the SDK; see capture.go), and the capabilities the server
// declared on the connection the listing was taken on. They are listed only
// when the server declares them: a server that declares no "resources" is
// never sent resources/list nor resources/templates/list, one that declares no
// "prompts" never prompts/list.

// MCP methods of the listings.
const (
	methodListResources         = "resources/list"
	methodListResourceTemplates = "resources/templates/list"
	methodListPrompts           = "prompts/list"
)

// maxPages bounds the pages of one listing, and maxItems the items it holds
// (tools, resources, resource templates or prompts, counted per method), so
// that a server that keeps handing out cursors or items cannot hold the
// client, or its memory, forever. A listing past either bound fails whole: a
// part of it is never served as if it were all.
const (
	maxPages = 1000
	maxItems = 10000
)

// Resource is one resource as the server listed it.
type Resource struct {
	Server string          // the deployment's server id
	URI    string          // decoded uri
	Name   string          // decoded name
	Raw    json.RawMessage // the whole item as listed
	// Err says why the item cannot be used (see parseItem); URI and Name
	// are then what could be read of them.
	Err error
}

// ResourceTemplate is one resource template as the server listed it.
type ResourceTemplate struct {
	Server      string          // the deployment's server id
	URITemplate string          // decoded uriTemplate
	Name        string          // decoded name
	Raw         json.RawMessage // the whole item as listed
	Err         error           // as Resource.Err
}

// Prompt is one prompt as the server listed it.
type Prompt struct {
	Server string          // the deployment's server id
	Name   string          // decoded name
	Raw    json.RawMessage // the whole item as listed
	Err    error           // as Resource.Err
}

// Capabilities are the capabilities a server declared (in its initialize or
// server/discover result) on one connection, as far as whoever passes its
// features on needs them: it should offer only what the server has.
type Capabilities struct {
	Tools                bool // "tools"
	ToolsListChanged     bool // "tools.listChanged"
	Resources            bool // "resources"
	ResourcesSubscribe   bool // "resources.subscribe"
	ResourcesListChanged bool // "resources.listChanged"
	Prompts              bool // "prompts"
	PromptsListChanged   bool // "prompts.listChanged"
	Completions          bool // "completions"
	Logging              bool // "logging"
	// ProtocolVersion is the revision negotiated on the connection. From
	// 2026-07-28 on there is no logging/setLevel (SetLoggingLevel refuses
	// it), and a subscription is a subscriptions/listen stream.
	ProtocolVersion string
}

func capabilitiesOf(sess *mcp.ClientSession) Capabilities {
	var caps Capabilities
	r := sess.InitializeResult()
	if r == nil {
		return caps
	}
	caps.ProtocolVersion = r.ProtocolVersion
	if r.Capabilities == nil {
		return caps
	}
	sc := r.Capabilities
	if sc.Tools != nil {
		caps.Tools, caps.ToolsListChanged = true, sc.Tools.ListChanged
	}
	if sc.Resources != nil {
		caps.Resources, caps.ResourcesSubscribe, caps.ResourcesListChanged = true, sc.Resources.Subscribe, sc.Resources.ListChanged
	}
	if sc.Prompts != nil {
		caps.Prompts, caps.PromptsListChanged = true, sc.Prompts.ListChanged
	}
	caps.Completions = sc.Completions != nil
	caps.Logging = sc.Logging != nil
	return caps
}

// Capabilities returns the capabilities the server declared on the current
// connection, and false while the client reconnects or once it is closed.
// A new connection may declare others: a [Catalog] keeps those of the
// connection its listing was taken on.
func (c *Client) Capabilities() (Capabilities, bool) {
	c.mu.Lock()
	cn, closed := c.cur, c.closed
	c.mu.Unlock()
	if cn == nil || closed {
		return Capabilities{}, false
	}
	return capabilitiesOf(cn.sess), true
}

// listing is everything the catalog keeps of one server, taken on one
// connection.
type listing struct {
	caps      Capabilities
	tools     []Tool
	resources []Resource
	templates []ResourceTemplate
	prompts   []Prompt
}

// list takes a server's listing on the current connection: its tools always
// and, when all is set, its resources, resource templates and prompts as far
// as the server declares them. A failure of any part fails the whole, so that
// what is served was listed together.
func (c *Client) list(ctx context.Context, all bool) (*listing, error) {
	l, err := c.listOn(ctx, all)
	if err != nil {
		return nil, withStderr(c.id, c.stderr.Load(), err)
	}
	return l, nil
}

func (c *Client) listOn(ctx context.Context, all bool) (*listing, error) {
	c.listMu.Lock()
	defer c.listMu.Unlock()
	ctx, cn, done, kind, cause := c.open(ctx)
	if kind != nil {
		// The error acquire returned, or ErrClosed.
		return nil, fmt.Errorf("upstream %s: %s: %w", c.id, methodListTools, cmp.Or(cause, kind))
	}
	defer done()
	l := &listing{caps: capabilitiesOf(cn.sess)}
	raws, err := c.listAll(ctx, cn, methodListTools)
	if err != nil {
		return nil, err
	}
	for _, r := range raws {
		l.tools = append(l.tools, parseTool(c.id, r))
	}
	markDuplicates(l.tools)
	if !all {
		return l, nil
	}
	if l.caps.Resources {
		if raws, err = c.listAll(ctx, cn, methodListResources); err != nil {
			return nil, err
		}
		for _, r := range raws {
			f, err := parseItem(r, "uri", "name")
			l.resources = append(l.resources, Resource{Server: c.id, URI: f[0], Name: f[1], Raw: r, Err: err})
		}
		if raws, err = c.listAll(ctx, cn, methodListResourceTemplates); err != nil {
			return nil, err
		}
		for _, r := range raws {
			f, err := parseItem(r, "uriTemplate", "name")
			l.templates = append(l.templates, ResourceTemplate{Server: c.id, URITemplate: f[0], Name: f[1], Raw: r, Err: err})
		}
	}
	if l.caps.Prompts {
		if raws, err = c.listAll(ctx, cn, methodListPrompts); err != nil {
			return nil, err
		}
		for _, r := range raws {
			f, err := parseItem(r, "name")
			l.prompts = append(l.prompts, Prompt{Server: c.id, Name: f[0], Raw: r, Err: err})
		}
	}
	return l, nil
}

// listMember is the member of method's result that holds its items.
func listMember(method string) string {
	switch method {
	case methodListTools:
		return "tools"
	case methodListResources:
		return "resources"
	case methodListResourceTemplates:
		return "resourceTemplates"
	case methodListPrompts:
		return "prompts"
	}
	panic("upstream: no listing " + method)
}

// listAll lists every page of method on cn and returns its items as listed,
// in server order. Every page is a request the server answers on cn, whatever
// cache time (ttlMs) it set on earlier answers; a page answered any other way
// fails the listing, as do a repeated cursor and a listing past maxPages or
// maxItems. The caller holds listMu and a request on cn.
func (c *Client) listAll(ctx context.Context, cn *conn, method string) ([]json.RawMessage, error) {
	fail := func(err error) error { return fmt.Errorf("upstream %s: %s: %w", c.id, method, err) }
	member := listMember(method)
	var (
		items  []json.RawMessage
		cursor string
		seen   = map[string]bool{}
	)
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, fail(fmt.Errorf("more than %d pages", maxPages))
		}
		raw, err := c.listPage(ctx, cn, method, cursor)
		if err != nil {
			return nil, fail(closedInFlight(ctx, err))
		}
		var p map[string]json.RawMessage
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fail(fmt.Errorf("result: %w", err))
		}
		var got []json.RawMessage
		if v, ok := p[member]; ok && !isNull(v) {
			if err := json.Unmarshal(v, &got); err != nil {
				return nil, fail(fmt.Errorf("result: %s: %w", member, err))
			}
		}
		if len(items)+len(got) > maxItems {
			return nil, fail(fmt.Errorf("more than %d items", maxItems))
		}
		items = append(items, got...)
		var next string
		if v, ok := p["nextCursor"]; ok && !isNull(v) {
			if err := stringField(v, &next); err != nil {
				return nil, fail(errors.New("result: nextCursor is not a string"))
			}
		}
		if next == "" {
			return items, nil
		}
		if seen[next] {
			return nil, fail(fmt.Errorf("cursor %q repeated", next))
		}
		seen[next] = true
		cursor = next
	}
}

// listPage sends one page's request of method through the SDK and returns
// the result as the server sent it.
func (c *Client) listPage(ctx context.Context, cn *conn, method, cursor string) (json.RawMessage, error) {
	c.capture.reset()
	var err error
	switch method {
	case methodListTools:
		_, err = cn.sess.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
	case methodListResources:
		_, err = cn.sess.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
	case methodListResourceTemplates:
		_, err = cn.sess.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
	case methodListPrompts:
		_, err = cn.sess.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
	default:
		panic("upstream: no listing " + method)
	}
	if err != nil {
		if classify(ctx, err) != ErrRejected && ctx.Err() == nil {
			c.retire(cn, err)
		}
		return nil, err
	}
	return c.capture.take()
}

// parseItem reads the named members of one listed item, each a non-empty
// string. The item must be a JSON object with no name twice in any of its
// objects and in valid UTF-8, so that what is decoded is the only reading of
// the bytes passed on (encoding/json would take the last of two "uri"s and
// repair invalid UTF-8). Unlike a tool's, the item is not digested, so its
// numbers need not be exact. On failure, fields holds what could be read.
func parseItem(raw json.RawMessage, names ...string) (fields []string, err error) {
	fields = make([]string, len(names))
	var loose map[string]json.RawMessage
	if err := json.Unmarshal(raw, &loose); err != nil {
		return fields, fmt.Errorf("listed item: %w", err)
	}
	for i, n := range names {
		_ = stringField(loose[n], &fields[i]) // best effort, to report the item by name
	}
	var members map[string]jsontext.Value
	if err := jsonv2.Unmarshal(raw, &members); err != nil {
		return fields, fmt.Errorf("listed item: %w", err)
	}
	for i, n := range names {
		if stringField(json.RawMessage(members[n]), &fields[i]) != nil || fields[i] == "" {
			return fields, fmt.Errorf("listed item: %s must be a non-empty string", n)
		}
	}
	return fields, nil
}
