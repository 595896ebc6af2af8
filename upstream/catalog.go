package upstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// CatalogOptions tune a Catalog. The zero value is usable.
type CatalogOptions struct {
	// Client configures the connection to each server.
	Client Options
	// ListAll makes the catalog list, besides every server's tools, its
	// resources and resource templates when the server declares
	// "resources", and its prompts when it declares "prompts", for a user
	// that passes them on (the gateway). Without it only tools are listed,
	// and Resources, ResourceTemplates and Prompts serve nothing.
	ListAll bool
	// Interval between refreshes in Run. A server that announces
	// notifications/tools/list_changed (with ListAll, also
	// notifications/resources/list_changed or
	// notifications/prompts/list_changed), or reconnects, is listed again
	// at once; the interval is the fallback for servers that never
	// announce.
	// A cache time (ttlMs) the server sets on its listings neither delays
	// nor replaces a refresh. Zero means 30s.
	Interval time.Duration
	// Timeout bounds one server's refresh (dial and listing). Zero means
	// 10s.
	Timeout time.Duration
	// MaxAge is how long a server's last good listing keeps being served
	// while refreshes fail. Zero means three intervals; negative means
	// forever.
	MaxAge time.Duration
	// OnChange, if set, is called with a server's id after a refresh of
	// that server whose listing differs from the one the catalog served
	// until then: a tool added or removed, or a definition whose bytes
	// changed (and so every change of a digest); with ListAll, likewise a
	// resource, resource template or prompt; and a change of the
	// capabilities the server declared. The order of a listing is not
	// compared. A server's first listing, and one that replaces a listing
	// older than MaxAge, are changes too: what Tools serves went from
	// nothing to something. A refresh that fails (the catalog keeps
	// the last good listing) or that lists the same definitions again
	// does not call it.
	//
	// It runs on the goroutine that made the refresh (the caller of Run,
	// Refresh or RefreshServer, or the catalog's own after an
	// announcement), once the new listing is served and with no lock of
	// the catalog held, before RefreshServer returns. It may read the
	// catalog, but it holds up that caller and any refresh an
	// announcement queued meanwhile, so it must return quickly: signal
	// work to a goroutine of its own, e.g. by a non-blocking send on a
	// channel with a buffer of one, which also folds a burst of changes
	// into one. Calls for one server may overlap and carry no listing:
	// read the current one with Tools.
	OnChange func(server string)
	// ResourceUpdated, if set, is called with a server's id and a URI for
	// every notifications/resources/updated the server sends, as
	// Options.ResourceUpdated is (on a goroutine of the server's client,
	// never the one reading its connection); Options.ResourceUpdated, if
	// also set, is called after it. Subscribe through Client.
	ResourceUpdated func(server, uri string)
	// Now is the catalog's clock: when a listing was taken, how old it is
	// (MaxAge) and so what Readiness says. Nil means time.Now.
	Now func() time.Time
}

func (o CatalogOptions) interval() time.Duration {
	if o.Interval <= 0 {
		return 30 * time.Second
	}
	return o.Interval
}

func (o CatalogOptions) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 10 * time.Second
	}
	return o.Timeout
}

func (o CatalogOptions) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

func (o CatalogOptions) maxAge() time.Duration { return cmp.Or(o.MaxAge, 3*o.interval()) }

// Catalog holds the current listing of every configured server (its tools
// and, with CatalogOptions.ListAll, its resources, resource templates and
// prompts, with the capabilities it declared) and the clients that reach
// them. A listing replaces the previous one whole, so a tool that
// disappeared or changed shows when the server is next listed: at once
// when the server announces the change (or reconnects), at the next
// interval otherwise. A user that keeps its own copy (one that re-exposes
// the tools) learns of each change through CatalogOptions.OnChange rather
// than by polling. It is safe for concurrent use.
type Catalog struct {
	opts CatalogOptions

	// ctx ends at Close; refreshes after announcements run under it.
	ctx    context.Context
	cancel context.CancelFunc
	// changes counts the goroutines refreshing after announcements. Add
	// only under mu while !closed, so that Close can wait for them.
	changes sync.WaitGroup

	mu      sync.RWMutex
	servers map[string]*entry
	closed  bool
}

type entry struct {
	id  string
	cfg Config

	dialMu sync.Mutex    // one dial at a time
	turn   chan struct{} // one refresh at a time, see RefreshServer
	client *Client       // guarded by Catalog.mu; nil until dialed

	// guarded by Catalog.mu
	tools    map[string]Tool
	listed   listing   // the last successful listing
	listedAt time.Time // zero until the first successful listing
	lastErr  error
	tried    bool // a refresh has finished, listed or not
	changing bool // a refresh after an announcement is running
	changed  bool // and another announcement came meanwhile
}

// ServerStatus reports one server's state in the catalog.
type ServerStatus struct {
	ID       string
	Listed   bool      // answered tools/list at least once
	ListedAt time.Time // when the last successful listing began
	Tools    int       // tools in the last successful listing
	Err      error     // error of the last refresh, nil if it succeeded
	// Resources, ResourceTemplates and Prompts count them in the last
	// successful listing (with CatalogOptions.ListAll).
	Resources, ResourceTemplates, Prompts int
	// Tried: a refresh of the server has finished, whether it listed or
	// not. Until then the server is being listed for the first time.
	Tried bool
	// Served: the last listing is served (Lookup, Tools): it was taken
	// within MaxAge. A server that is not served cannot be called through
	// the catalog now.
	Served bool
}

// NewCatalog returns a catalog over servers (server id → how to reach
// it). It connects to nothing until Refresh or Run.
func NewCatalog(servers map[string]Config, opts CatalogOptions) (*Catalog, error) {
	m := make(map[string]*entry, len(servers))
	for id, cfg := range servers {
		if id == "" {
			return nil, errors.New("upstream catalog: empty server id")
		}
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("upstream catalog: server %s: %w", id, err)
		}
		m[id] = &entry{id: id, cfg: cfg, turn: make(chan struct{}, 1)}
	}
	c := &Catalog{opts: opts, servers: m}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Run refreshes every server now and then every interval until ctx ends.
// Failures are kept per server (see Status); Run itself only returns
// ctx's error.
func (c *Catalog) Run(ctx context.Context) error {
	t := time.NewTicker(c.opts.interval())
	defer t.Stop()
	for {
		c.Refresh(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Refresh lists every server concurrently and returns the joined errors.
func (c *Catalog) Refresh(ctx context.Context) error {
	ids := c.ids()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { errs[i] = c.RefreshServer(ctx, id) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// RefreshServer lists one server now, dialing it first if needed: its
// tools and, with ListAll, what else it declares, all on one connection;
// a failure of any part fails the refresh. On failure the previous
// listing stays (within MaxAge) and the error is recorded. Refreshes of
// one server run one at a time, whatever started them (Run, Refresh, an
// announcement), so that a listing taken earlier never replaces one taken
// later; a refresh waits its turn until ctx ends. A listing that changed
// what the catalog serves is reported to CatalogOptions.OnChange before
// RefreshServer returns.
func (c *Catalog) RefreshServer(ctx context.Context, id string) error {
	changed, err := c.refresh(ctx, id)
	// Outside the server's turn and the catalog's lock: a slow OnChange
	// holds up only this caller, and it may read the catalog.
	if changed && c.opts.OnChange != nil {
		c.opts.OnChange(id)
	}
	return err
}

// refresh is RefreshServer without the report: it lists server id and
// says whether the listing changed what the catalog serves.
func (c *Catalog) refresh(ctx context.Context, id string) (changed bool, err error) {
	e, err := c.entry(id)
	if err != nil {
		return false, err
	}
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return false, fmt.Errorf("upstream catalog: server %s: %w", id, ctx.Err())
	}
	defer func() { <-e.turn }()
	lctx, cancel := context.WithTimeout(ctx, c.opts.timeout())
	defer cancel()
	// The listing shows the server as it was at some moment after this
	// one: stamping it with this moment never makes it look fresher than
	// it is.
	started := c.opts.now()
	l, err := c.list(lctx, e)
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
		// Every failed refresh, not only the first: a server that stays
		// down stays visible in the log, with what it last said.
		logFailure(c.opts.Client.logger(), "upstream listing failed", err, "server", id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e.lastErr = err
	if ctx.Err() == nil {
		// A refresh cut short by its caller says nothing of the server.
		e.tried = true
	}
	if err != nil {
		return false, err
	}
	// Compared with what was served, not merely with what was last
	// listed: a listing past MaxAge serves nothing, so its return is a
	// change to whoever re-exposes the tools.
	changed = !c.fresh(e) || !sameListing(&e.listed, l)
	e.listed = *l
	e.tools = make(map[string]Tool, len(l.tools))
	for _, t := range l.tools {
		if t.Name != "" {
			e.tools[t.Name] = t
		}
	}
	e.listedAt = started
	return changed, nil
}

// sameListing reports whether two listings hold the same items of every
// kind and the same capabilities.
func sameListing(a, b *listing) bool {
	return a.caps == b.caps &&
		sameItems(a.tools, b.tools, func(t Tool) json.RawMessage { return t.Raw }) &&
		sameItems(a.resources, b.resources, func(r Resource) json.RawMessage { return r.Raw }) &&
		sameItems(a.templates, b.templates, func(r ResourceTemplate) json.RawMessage { return r.Raw }) &&
		sameItems(a.prompts, b.prompts, func(p Prompt) json.RawMessage { return p.Raw })
}

// sameItems reports whether two lists hold the same items byte for byte,
// in whatever order. raw is the whole item as listed, so for a tool this
// covers names, digests, annotations, output schemas and the duplicates
// that make a definition unusable.
func sameItems[T any](a, b []T, raw func(T) json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	count := make(map[string]int, len(a))
	for _, t := range a {
		count[string(raw(t))]++
	}
	for _, t := range b {
		n := count[string(raw(t))]
		if n == 0 {
			return false
		}
		count[string(raw(t))] = n - 1
	}
	return true
}

// listChanged is the clients' ToolListChanged (and, with ListAll,
// ResourceListChanged and PromptListChanged): the server announced a
// change, or reconnected. It starts a refresh of e in the catalog's own
// goroutine, or, if one is running, asks it to run once more; so a storm
// of announcements costs at most one listing in flight and one queued.
// It never waits for I/O: it runs on the client's reading goroutine.
func (c *Catalog) listChanged(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if e.changing {
		e.changed = true
		return
	}
	e.changing = true
	c.changes.Add(1)
	go c.refreshChanged(e)
}

// refreshChanged refreshes e until no announcement came during the last
// listing. A failure is recorded like any refresh's; the next
// announcement, or Run's interval, tries again.
func (c *Catalog) refreshChanged(e *entry) {
	defer c.changes.Done()
	for {
		c.RefreshServer(c.ctx, e.id)
		c.mu.Lock()
		again := e.changed && !c.closed
		e.changed, e.changing = false, again
		c.mu.Unlock()
		if !again {
			return
		}
	}
}

func (c *Catalog) list(ctx context.Context, e *entry) (*listing, error) {
	cl, err := c.client(ctx, e)
	if err != nil {
		return nil, err
	}
	return cl.list(ctx, c.opts.ListAll)
}

// Client returns the connection to server id, dialing it if needed.
func (c *Catalog) Client(ctx context.Context, id string) (*Client, error) {
	e, err := c.entry(id)
	if err != nil {
		return nil, err
	}
	return c.client(ctx, e)
}

func (c *Catalog) client(ctx context.Context, e *entry) (*Client, error) {
	e.dialMu.Lock()
	defer e.dialMu.Unlock()
	c.mu.RLock()
	cl, closed := e.client, c.closed
	c.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if cl != nil {
		return cl, nil
	}
	opts := c.opts.Client
	relist := func(theirs func()) func() {
		return func() {
			c.listChanged(e)
			if theirs != nil {
				theirs()
			}
		}
	}
	opts.ToolListChanged = relist(opts.ToolListChanged)
	if c.opts.ListAll {
		opts.ResourceListChanged = relist(opts.ResourceListChanged)
		opts.PromptListChanged = relist(opts.PromptListChanged)
	}
	if ours, theirs := c.opts.ResourceUpdated, opts.ResourceUpdated; ours != nil {
		opts.ResourceUpdated = func(uri string) {
			ours(e.id, uri)
			if theirs != nil {
				theirs(uri)
			}
		}
	}
	cl, err := Dial(ctx, e.id, e.cfg, opts)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cl.Close()
		return nil, ErrClosed
	}
	e.client = cl
	c.mu.Unlock()
	return cl, nil
}

func (c *Catalog) entry(id string) (*entry, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.servers[id]
	if !ok {
		return nil, fmt.Errorf("upstream catalog: unknown server %q", id)
	}
	return e, nil
}

func (c *Catalog) ids() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Sorted(maps.Keys(c.servers))
}

// fresh reports whether e's listing may be served. Caller holds c.mu.
func (c *Catalog) fresh(e *entry) bool {
	if e.listedAt.IsZero() {
		return false
	}
	age := c.opts.maxAge()
	return age < 0 || c.opts.now().Sub(e.listedAt) <= age
}

// Lookup returns the tool named tool on server as last listed. It reports
// false for an unknown server or tool, and for a server whose listing is
// missing or older than MaxAge. A returned tool may carry Err: check it.
func (c *Catalog) Lookup(server, tool string) (Tool, bool) {
	return served(c, server, func(e *entry) (Tool, bool) {
		t, ok := e.tools[tool]
		return t, ok
	})
}

// Tools returns server's last listing in server order, and false when it
// has none that may be served.
func (c *Catalog) Tools(server string) ([]Tool, bool) {
	return served(c, server, func(e *entry) ([]Tool, bool) { return slices.Clone(e.listed.tools), true })
}

// Resources returns the resources of server's last listing in server
// order, and false when it has none that may be served (as Tools). A
// server that does not declare "resources" has none: it is not asked.
// Without CatalogOptions.ListAll the list is always empty.
func (c *Catalog) Resources(server string) ([]Resource, bool) {
	return served(c, server, func(e *entry) ([]Resource, bool) { return slices.Clone(e.listed.resources), true })
}

// ResourceTemplates returns the resource templates of server's last
// listing, as Resources.
func (c *Catalog) ResourceTemplates(server string) ([]ResourceTemplate, bool) {
	return served(c, server, func(e *entry) ([]ResourceTemplate, bool) { return slices.Clone(e.listed.templates), true })
}

// Prompts returns the prompts of server's last listing, as Resources; a
// server that does not declare "prompts" has none.
func (c *Catalog) Prompts(server string) ([]Prompt, bool) {
	return served(c, server, func(e *entry) ([]Prompt, bool) { return slices.Clone(e.listed.prompts), true })
}

// served returns what pick takes from server's entry, under c.mu, and
// false when the server is unknown or its last listing may not be served.
func served[T any](c *Catalog, server string, pick func(*entry) (T, bool)) (T, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.servers[server]
	if !ok || !c.fresh(e) {
		var zero T
		return zero, false
	}
	return pick(e)
}

// Listed says, by server id, whether the catalog serves a listing of the server now, over the
// servers include accepts (nil: every server): what a daemon's <daemon>_upstream_listed shows.
func (c *Catalog) Listed(include func(id string) bool) map[string]bool {
	out := map[string]bool{}
	for _, st := range c.Status() {
		if include == nil || include(st.ID) {
			out[st.ID] = st.Served
		}
	}
	return out
}

// Readiness is the catalog's part in the readiness of the daemon that
// holds it (its /readyz).
type Readiness struct {
	// Ready: the first refresh of every server has finished, and the
	// catalog serves a listing of at least one of them.
	Ready bool
	// Starting: a server is still being listed for the first time.
	Starting bool
	// Problems say why the catalog is not ready, one line per server that
	// holds it back. They name servers and durations only: a listing error
	// quotes the server's URL, which can carry a credential, and a
	// readiness probe answers anyone.
	Problems []string
	// Unlisted are the servers whose listing is not served now (never
	// listed, or not for longer than MaxAge), ready or not, sorted.
	Unlisted []string
}

// Readiness says whether the daemon holding the catalog should take
// requests, over the servers include accepts (nil: every server).
//
// A server that cannot be listed now, past the grace a failing server's
// last listing is served for (MaxAge: three refresh intervals by
// default), cannot be called through the catalog. That holds readiness
// back only when it is true of every server. Replicas of a daemon share
// their servers: one server down fails its calls on every replica alike,
// so taking each replica out of its load balancer for it would gain
// nothing, and would end the calls to every other server too. A replica
// that can list none of its servers is of no use, and routing away from it
// helps when other replicas can (a network fault of its own); when none
// can, routing away loses nothing. A server whose first refresh has not
// finished holds readiness back too, so that a replica just started is
// not sent calls an older one can serve; a server that is down at start
// does not hold it back past that first attempt.
func (c *Catalog) Readiness(include func(id string) bool) Readiness {
	now := c.opts.now()
	age := c.opts.maxAge()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var r Readiness
	var starting, unlisted []string
	served := 0
	considered := 0
	for _, id := range slices.Sorted(maps.Keys(c.servers)) {
		if include != nil && !include(id) {
			continue
		}
		considered++
		e := c.servers[id]
		switch {
		case !e.tried && e.listedAt.IsZero():
			r.Starting = true
			starting = append(starting, "server "+id+" has not been listed yet")
			r.Unlisted = append(r.Unlisted, id)
		case c.fresh(e):
			served++
		case e.listedAt.IsZero():
			r.Unlisted = append(r.Unlisted, id)
			unlisted = append(unlisted, "server "+id+" has never answered tools/list")
		default:
			r.Unlisted = append(r.Unlisted, id)
			unlisted = append(unlisted, fmt.Sprintf("server %s has not answered tools/list for %s (a listing is served for %s after it was taken)",
				id, now.Sub(e.listedAt).Round(time.Second), age))
		}
	}
	switch {
	case r.Starting:
		r.Problems = starting
	case served == 0 && considered > 0:
		r.Problems = unlisted
	default:
		r.Ready = true
	}
	return r
}

// Status reports every server, sorted by id.
func (c *Catalog) Status() []ServerStatus {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]ServerStatus, 0, len(c.servers))
	for _, id := range slices.Sorted(maps.Keys(c.servers)) {
		e := c.servers[id]
		l := &e.listed
		out = append(out, ServerStatus{ID: id, Listed: !e.listedAt.IsZero(), ListedAt: e.listedAt,
			Tools: len(l.tools), Resources: len(l.resources), ResourceTemplates: len(l.templates), Prompts: len(l.prompts),
			Err: e.lastErr, Tried: e.tried, Served: c.fresh(e)})
	}
	return out
}

// Close closes every client and ends the refreshes in flight. The catalog
// cannot be refreshed afterwards, and once Close returns no refresh
// started by an announcement runs.
func (c *Catalog) Close() error {
	c.mu.Lock()
	c.closed = true
	var clients []*Client
	for _, e := range c.servers {
		if e.client != nil {
			clients = append(clients, e.client)
			e.client = nil
		}
	}
	c.mu.Unlock()
	c.cancel()
	// Concurrently: a stdio child may take a while to exit.
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() { errs[i] = cl.Close() })
	}
	wg.Wait()
	c.changes.Wait()
	return errors.Join(errs...)
}
