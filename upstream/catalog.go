package upstream

import (
	"context"
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
	// Interval between refreshes in Run. Zero means 30s.
	Interval time.Duration
	// Timeout bounds one server's refresh (dial and listing). Zero means
	// 10s.
	Timeout time.Duration
	// MaxAge is how long a server's last good listing keeps being served
	// while refreshes fail. Zero means three intervals; negative means
	// forever.
	MaxAge time.Duration
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

func (o CatalogOptions) maxAge() time.Duration {
	if o.MaxAge == 0 {
		return 3 * o.interval()
	}
	return o.MaxAge
}

// Catalog holds the current tool listing of every configured server and
// the clients that reach them. A listing replaces the previous one whole,
// so a tool that disappeared or changed shows at the next refresh. It is
// safe for concurrent use.
type Catalog struct {
	opts CatalogOptions

	mu      sync.RWMutex
	servers map[string]*entry
	closed  bool
}

type entry struct {
	id  string
	cfg Config

	dialMu sync.Mutex // one dial at a time
	client *Client    // guarded by Catalog.mu; nil until dialed

	// guarded by Catalog.mu
	tools    map[string]Tool
	order    []Tool
	listedAt time.Time // zero until the first successful listing
	lastErr  error
}

// ServerStatus reports one server's state in the catalog.
type ServerStatus struct {
	ID       string
	Listed   bool      // answered tools/list at least once
	ListedAt time.Time // time of the last successful listing
	Tools    int       // tools in the last successful listing
	Err      error     // error of the last refresh, nil if it succeeded
}

// NewCatalog returns a catalog over servers (server id → how to reach
// it). It connects to nothing until Refresh or Run.
func NewCatalog(servers map[string]Config, opts CatalogOptions) (*Catalog, error) {
	c := &Catalog{opts: opts, servers: make(map[string]*entry, len(servers))}
	for id, cfg := range servers {
		if id == "" {
			return nil, errors.New("upstream catalog: empty server id")
		}
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("upstream catalog: server %s: %w", id, err)
		}
		c.servers[id] = &entry{id: id, cfg: cfg}
	}
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

// RefreshServer lists one server now, dialing it first if needed. On
// failure the previous listing stays (within MaxAge) and the error is
// recorded.
func (c *Catalog) RefreshServer(ctx context.Context, id string) error {
	e, err := c.entry(id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.timeout())
	defer cancel()
	tools, err := c.list(ctx, e)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e.lastErr = err
	if err != nil {
		return err
	}
	e.order = tools
	e.tools = make(map[string]Tool, len(tools))
	for _, t := range tools {
		if t.Name != "" {
			e.tools[t.Name] = t
		}
	}
	e.listedAt = now
	return nil
}

func (c *Catalog) list(ctx context.Context, e *entry) ([]Tool, error) {
	cl, err := c.client(ctx, e)
	if err != nil {
		return nil, err
	}
	return cl.Tools(ctx)
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
	cl, err := Dial(ctx, e.id, e.cfg, c.opts.Client)
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
	return age < 0 || time.Since(e.listedAt) <= age
}

// Lookup returns the tool named tool on server as last listed. It reports
// false for an unknown server or tool, and for a server whose listing is
// missing or older than MaxAge. A returned tool may carry Err: check it.
func (c *Catalog) Lookup(server, tool string) (Tool, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.servers[server]
	if !ok || !c.fresh(e) {
		return Tool{}, false
	}
	t, ok := e.tools[tool]
	return t, ok
}

// Tools returns server's last listing in server order, and false when it
// has none that may be served.
func (c *Catalog) Tools(server string) ([]Tool, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.servers[server]
	if !ok || !c.fresh(e) {
		return nil, false
	}
	return slices.Clone(e.order), true
}

// Ready reports whether every server has answered tools/list at least
// once.
func (c *Catalog) Ready() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, e := range c.servers {
		if e.listedAt.IsZero() {
			return false
		}
	}
	return true
}

// Status reports every server, sorted by id.
func (c *Catalog) Status() []ServerStatus {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]ServerStatus, 0, len(c.servers))
	for _, id := range slices.Sorted(maps.Keys(c.servers)) {
		e := c.servers[id]
		out = append(out, ServerStatus{ID: id, Listed: !e.listedAt.IsZero(), ListedAt: e.listedAt,
			Tools: len(e.order), Err: e.lastErr})
	}
	return out
}

// Close closes every client. The catalog cannot be refreshed afterwards.
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
	var errs []error
	for _, cl := range clients {
		errs = append(errs, cl.Close())
	}
	return errors.Join(errs...)
}
