package mcpgate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verdictgate/verdict/internal/plainhttp"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/metricx"
	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/internal/tracing"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/waiting"
)

// Options are what the command line adds to the config.
type Options struct {
	// Observe is the --observe flag. Observe mode runs only when this and
	// the config's mode: observe agree; any disagreement stops New.
	Observe bool
	// Logger receives the gateway's log. Nil discards it.
	Logger *slog.Logger
	// HTTPClient calls verdictd and the executor. Nil uses a client with
	// http.DefaultTransport.
	HTTPClient *http.Client
	// Now is the clock of requestState expiry and, with an identity
	// section, of access tokens' times. Nil uses time.Now.
	Now func() time.Time
	// Getenv reads the OTEL_* variables that can turn tracing on; nil reads none.
	Getenv func(string) string
	// StdioServer is the --server flag: the id of the one server ServeStdio
	// offers, under the server's own tool names. "" offers every server's
	// tools under "<server>.<tool>".
	StdioServer string
}

// Gateway is the MCP gateway: it re-exposes the policy servers' tools and
// runs every irreversible call through verdictd and the executor.
type Gateway struct {
	cfg     Config
	opts    Options
	mode    string
	log     *slog.Logger
	now     func() time.Time
	catalog *upstream.Catalog
	tr      *tracing.Tracing
	// conns are the servers the gateway connected to at start and how it
	// reaches them. A reload does not change them: see reportServers.
	conns map[string]upstream.Config
	codec *StateCodec
	// store keeps the continuations of input_required results; limits bound it and
	// limiter rate-limits each principal's first-round gated calls.
	store   waiting.Store
	limits  waiting.Limits
	limiter waiting.Limiter
	held    *heldCalls // calls of older hosts held while their user answers
	subs    subscriptions
	// upstreams are the connections of host sessions (upstreams.go).
	upstreams sessionUpstreams
	// relays keeps the relayed questions of pass-through tools awaiting a 2026-07-28 host's
	// answer: a store of the state section's kind apart from store, under the same bounds.
	relays   waiting.Store
	verdictd *gateService
	executor *gateService
	// daemonConns keeps the gateway's connections to verdictd and the executor when no
	// Options.HTTPClient chose a transport; nil otherwise.
	daemonConns *plainhttp.Transport
	tokens      *httpx.Tokens
	rs          *resourceServer // with an identity section: how HTTP requests are authenticated
	metrics     *metrics
	stateTTL    time.Duration
	maxRound    int

	// surfaces are the endpoints the tools are offered at: the aggregated
	// one first, then each connected server's own, by id. Over HTTP the
	// principal comes from the bearer token, over stdio from the config.
	surfaces []*surface
	sessions *sessionLimit

	// snap is the policy in force; see policySnap.
	snap     atomic.Pointer[policySnap]
	reloadMu sync.Mutex // one reload at a time

	// resync asks Run's sync loop to bring the exposed listing in line
	// with the catalog. Its buffer of one folds a burst of requests into
	// one sync: a sync reads the catalog as it is when it runs.
	resync chan struct{}

	mu      sync.Mutex
	exposed map[string]exposedTool // by exposed name
	// deadPresets are the tools entries reported as applying to nothing; see reportPresets.
	deadPresets map[string]bool
}

// exposedTool is one upstream tool as the gateway offers it.
type exposedTool struct {
	Server, Tool string
	raw          json.RawMessage // the definition as last listed
	// headerFree is plainTool(raw), decided once when the tool is exposed.
	headerFree bool
}

// New loads the policy and the state key, connects to the policy servers
// and lists their tools. A server that does not answer yet is retried by
// Run; its tools appear when it does.
func New(ctx context.Context, cfg Config, opts Options) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mode, err := modeOf(cfg, opts)
	if err != nil {
		return nil, err
	}
	g := &Gateway{
		cfg: cfg, opts: opts, mode: mode,
		log:         cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
		now:         opts.Now,
		limits:      cfg.State.limits(),
		held:        newHeldCalls(),
		exposed:     map[string]exposedTool{},
		deadPresets: map[string]bool{},
		resync:      make(chan struct{}, 1),
		stateTTL:    cfg.StateTTL.Or(DefaultStateTTL),
		maxRound:    cmp.Or(cfg.MaxRounds, DefaultMaxRounds),
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.tr, err = tracing.Setup(ctx, cfg.Tracing, "mcpgate", opts.Getenv); err != nil {
		return nil, err
	}
	g.log.LogAttrs(ctx, slog.LevelInfo, "tracing", g.tr.Attrs()...)
	if err := g.connectDaemons(cmp.Or(opts.HTTPClient, &http.Client{})); err != nil {
		return nil, err
	}
	key, err := ReadStateKey(cfg.StateKeyFile)
	if err != nil {
		return nil, err
	}
	if g.codec, err = NewStateCodec(key); err != nil {
		return nil, err
	}
	if g.store, err = cfg.State.openStore(ctx, entriesCalls, g.stateTTL, g.now); err != nil {
		return nil, err
	}
	if g.relays, err = cfg.State.openStore(ctx, entriesRelays, g.stateTTL, g.now); err != nil {
		g.store.Close()
		return nil, err
	}
	g.limiter = cfg.State.limiter(g.store, g.now)
	perMinute, burst := cfg.State.callRate()
	g.log.Info("state store", "kind", cmp.Or(cfg.State.Kind, StateStoreMemory),
		"max_pending", g.limits.MaxPending, "max_bytes", g.limits.MaxBytes,
		"principal_pending", g.limits.PrincipalPending, "principal_bytes", g.limits.PrincipalBytes,
		"calls_per_minute", perMinute, "call_burst", burst)
	// A failure below must not leak the stores' connections.
	if err := g.start(ctx); err != nil {
		g.store.Close()
		g.relays.Close()
		return nil, err
	}
	return g, nil
}

// modeOf is the gateway's mode: observe needs both the config and the --observe flag, so
// that neither alone turns the gate off.
func modeOf(cfg Config, opts Options) (string, error) {
	mode := cmp.Or(cfg.Mode, ModeEnforce)
	switch {
	case mode == ModeObserve && !opts.Observe:
		return "", errors.New("config says mode: observe but the --observe flag is absent: observe mode needs both")
	case mode != ModeObserve && opts.Observe:
		return "", errors.New("--observe given but the config says mode: enforce: observe mode needs both")
	}
	return mode, nil
}

// connectDaemons makes the gateway's clients of verdictd and the executor, and with an
// identity section the resource server that authenticates its HTTP requests.
func (g *Gateway) connectDaemons(hc *http.Client) error {
	cfg := &g.cfg
	if hc.Transport == nil {
		// A gated call makes two requests of the daemons, each written and read on the
		// call's own goroutine where they are plain http (on loopback, typically): net/http's
		// Transport would hand each between three goroutines.
		t := plainhttp.NewTransport(http.DefaultTransport)
		c := *hc
		c.Transport, hc = t, &c
		g.daemonConns = t
	}
	vc, ec := hc, hc
	if cfg.Identity != nil {
		// verdictd decides who the principal is from the host's own token, which the
		// gateway forwards with each request it makes while serving a call; the executor
		// exchanges it for the user's own token at a server called with the user's authority.
		var err error
		if g.rs, err = newResourceServer(cfg.Identity, identity.WithClock(g.now)); err != nil {
			return err
		}
		if vc, err = forwardingClient(hc, "verdictd", cfg.Verdictd.URL); err != nil {
			return err
		}
		if ec, err = forwardingClient(hc, "executor", cfg.Executor.URL); err != nil {
			return err
		}
	}
	var err error
	if g.verdictd, err = newDaemon("verdictd", cfg.Verdictd.URL, cfg.Verdictd.Token, vc); err != nil {
		return err
	}
	g.executor, err = newDaemon("executor", cfg.Executor.URL, cfg.Executor.Token, ec)
	return err
}

// start reads the principals' tokens and the policy, connects to the policy servers, lists
// their tools and makes the endpoints and metrics that offer them.
func (g *Gateway) start(ctx context.Context) error {
	cfg := &g.cfg
	var toks []httpx.Token
	for _, name := range slices.Sorted(maps.Keys(cfg.Principals)) {
		if h := cfg.Principals[name].TokenSHA256; h != "" {
			toks = append(toks, httpx.Token{Name: name, TokenSHA256: h})
		}
	}
	var err error
	if g.tokens, err = httpx.NewTokens(toks); err != nil {
		return err
	}
	data, err := opfile.ReadFile(cfg.Policy)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	first, err := parsePolicy(cfg.Policy, data)
	if err != nil {
		return err
	}
	g.snap.Store(first)
	if err := checkPolicyServers(cfg, first.pol); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if g.conns, err = connections(first.pol, cfg.Servers); err != nil {
		return err
	}
	g.catalog, err = upstream.NewCatalog(g.conns, upstream.CatalogOptions{
		// The gateway's own connections relay a pass-through tool's
		// questions and sampling requests to the host (see relay); gated
		// calls go through the executor, whose connections relay nothing.
		Client:   g.clientOptions(),
		Interval: cfg.RefreshInterval.Or(DefaultRefresh),
		// Resources, templates and prompts pass through too (features.go).
		ListAll:         true,
		ResourceUpdated: func(server, uri string) { g.resourceUpdated(server, uri) },
		// A server's new listing reaches the hosts at once, not at the
		// next refresh_interval: until then they would see, and call
		// with, the definition the server has replaced.
		OnChange: func(string) { g.requestSync() },
	})
	if err != nil {
		return err
	}
	g.surfaces = []*surface{g.newSurface("")}
	for _, id := range slices.Sorted(maps.Keys(g.conns)) {
		g.surfaces = append(g.surfaces, g.newSurface(id))
	}
	if _, err := g.surfaceFor(g.opts.StdioServer); err != nil {
		return fmt.Errorf("--server: %w", err)
	}
	g.sessions = &sessionLimit{surfaces: g.surfaces, max: cmp.Or(cfg.MaxSessions, DefaultMaxSessions)}
	g.registerMetrics(first.pol.Version)
	// A server that fails is logged by the catalog, at error level with
	// the end of its stderr; the gateway starts with the others.
	_ = g.catalog.Refresh(ctx)
	g.syncTools()
	return nil
}

// registerMetrics makes the gateway's metrics, those it reads when scraped included.
func (g *Gateway) registerMetrics(policyVersion string) {
	// Relayed questions are input_required results the host has yet to answer too.
	g.metrics = newMetrics(func() float64 { return float64(g.store.Total().Count + g.relays.Total().Count) },
		func() float64 { return float64(g.store.Total().Bytes + g.relays.Total().Bytes) },
		func() float64 { return float64(g.sessions.open()) })
	g.sessions.refused = g.metrics.sessionsRefused.WithLabelValues(api.ReasonSessionLimit).Inc
	g.metrics.reg.MustRegister(metricx.GaugeFunc("mcpgate_upstream_sessions",
		"Connections of host sessions to servers, open or being made (bounded by max_upstream_sessions, and per principal by max_upstream_sessions_per_principal).",
		g.openUpstreams))
	g.metrics.reg.MustRegister(metricx.Readiness("mcpgate",
		"1 while the gateway's catalog lets it take calls: a first listing of every policy server tried, one at least listed now (its /readyz also asks verdictd, the executor and the state store), 0 while not.",
		g.readinessState))
	metricx.SetInfo(g.metrics.policyInfo, policyVersion)
	if g.mode == ModeObserve {
		g.metrics.observeMode.Set(1)
		g.log.Warn("OBSERVE MODE: irreversible calls are forwarded to their servers WITHOUT a verdict; the gate only records what it would have decided")
	}
}

// clientOptions are the options of the gateway's own upstream connections:
// they relay a pass-through tool's questions to the host (see relay);
// gated calls go through the executor, whose connections relay nothing.
func (g *Gateway) clientOptions() upstream.Options {
	return upstream.Options{Logger: g.log, Implementation: gatewayImplementation(),
		RelayQuestions: true, RelaySampling: true}
}

// Mode returns enforce or observe.
func (g *Gateway) Mode() string { return g.mode }

// statelessLog is the MCP library's logger for stateless HTTP requests: warnings and errors
// only (see atLeast).
func (g *Gateway) statelessLog() *slog.Logger {
	return slog.New(atLeast{slog.LevelWarn, g.log.Handler()})
}

// newSurface returns the endpoint of server ("" for the aggregated one).
// Its library servers declare resources (with subscriptions), prompts and
// completion whatever the servers behind have, since a server may list
// them only later: a host finds empty lists, and a request the server
// cannot take is answered with the server's own error.
func (g *Gateway) newSurface(server string) *surface {
	sf := &surface{server: server}
	newServer := func(log *slog.Logger) *mcp.Server {
		return mcp.NewServer(gatewayImplementation(), &mcp.ServerOptions{Logger: log,
			HasTools: true, HasResources: true, HasPrompts: true,
			CompletionHandler: g.complete(sf), SubscribeHandler: g.subscribe(sf), UnsubscribeHandler: g.unsubscribe(sf),
			RootsListChangedHandler: g.rootsChanged})
	}
	sf.stateless, sf.sessions, sf.stdio = newServer(g.statelessLog()), newServer(g.log), newServer(g.log)
	// A 2026-07-28 host sets no session level: it names one in each request.
	sf.sessions.AddReceivingMiddleware(g.passLevel)
	sf.stdio.AddReceivingMiddleware(g.passLevel)
	return sf
}

// gatewayImplementation is how the gateway names itself to hosts (serverInfo).
func gatewayImplementation() *mcp.Implementation {
	return &mcp.Implementation{Name: "mcpgate", Version: "1"}
}

// httpPrincipal is the principal the bearer token named.
func httpPrincipal(req *mcp.CallToolRequest) string {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		return req.Extra.TokenInfo.UserID
	}
	return ""
}

func (g *Gateway) stdioPrincipal(*mcp.CallToolRequest) string { return g.cfg.StdioPrincipal }

// Run keeps the exposed tools in line with the servers until ctx ends,
// adding, replacing and removing them as the servers change, and reloads
// the policy file when its content changes (every policy_poll). The
// exposed listing follows a server's new listing as soon as the catalog
// has it (an announcement or a reconnect makes the catalog list the
// server at once), and every refresh_interval all servers are listed
// again in any case.
func (g *Gateway) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { g.watchPolicy(ctx) })
	wg.Go(func() { g.refreshTools(ctx) })
	// Syncs run here, one at a time, apart from the refreshes: a server
	// slow to answer its periodic listing does not hold up another
	// server's change.
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-g.resync:
		}
		g.syncTools()
	}
}

// refreshTools lists every server again every refresh_interval until ctx
// ends, for servers that change without announcing it. It asks for a
// sync after every round, changed or not: a listing that has expired
// (its server failing for longer than the catalog's MaxAge) is withdrawn
// that way, since an expiry is no refresh and is never reported.
func (g *Gateway) refreshTools(ctx context.Context) {
	t := time.NewTicker(g.cfg.RefreshInterval.Or(DefaultRefresh))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = g.catalog.Refresh(ctx) // failures are logged by the catalog, per server
		g.requestSync()
	}
}

// requestSync asks Run to sync the exposed tools. It never blocks: a
// request already pending covers this one too.
func (g *Gateway) requestSync() {
	select {
	case g.resync <- struct{}{}:
	default:
	}
}

// CloseSessions ends the HTTP sessions of older clients. An HTTP server
// shutting down calls it: a session's event stream (its GET) stays open
// as long as the session does, and would hold up the shutdown until its
// wait ran out.
func (g *Gateway) CloseSessions() {
	for _, s := range g.surfaces {
		for ss := range s.sessions.Sessions() {
			ss.Close()
		}
	}
}

// Close ends the upstream connections and the state stores', and flushes the spans.
func (g *Gateway) Close(ctx context.Context) error {
	g.closeUpstreams()
	if g.daemonConns != nil {
		g.daemonConns.CloseIdleConnections()
	}
	err := errors.Join(g.catalog.Close(), closeStore(g.store), closeStore(g.relays))
	if terr := g.tr.Shutdown(ctx); terr != nil {
		g.log.Warn("tracing: spans not exported at shutdown", "error", terr.Error())
	}
	return err
}

// ServeStdio serves MCP on t (normally &mcp.StdioTransport{}) for the
// configured stdio_principal until the client disconnects or ctx ends: the
// tools of Options.StdioServer under its own names, or, without one,
// every server's under "<server>.<tool>".
func (g *Gateway) ServeStdio(ctx context.Context, t mcp.Transport) error {
	if g.cfg.StdioPrincipal == "" {
		return errors.New("stdio needs stdio_principal in the config")
	}
	// Not Server.Run: it logs the end of ctx, the normal way a gateway
	// stops, at error level.
	// Every message is screened on the bytes the host sent (see screenParams).
	sf, err := g.surfaceFor(g.opts.StdioServer)
	if err != nil {
		return err
	}
	ss, err := sf.stdio.Connect(ctx, screenedTransport{t}, nil)
	if err != nil {
		return fmt.Errorf("stdio: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { ss.Close() })
	defer stop()
	err = ss.Wait()
	return cmp.Or(ctx.Err(), err)
}

// Handler serves streamable HTTP MCP on /mcp (bearer token required; the
// token names the principal), and /metrics, /healthz and /readyz.
// 2026-07-28 clients are served statelessly and asked through
// input_required results; older clients get a session, bounded by
// max_sessions and session_idle_timeout, and are asked with
// elicitation/create on the call's stream (see httpMCP).
func (g *Gateway) Handler() http.Handler { return g.handler(true) }

// handler is Handler; plain false leaves every MCP request to the library's
// handlers (see servePlain).
func (g *Gateway) handler(plain bool) http.Handler {
	mux := httpx.NewServeMux() // any other path or method: 404 not_found
	verify, check := staticTokenInfo, g.requireToken
	if g.rs != nil {
		var paths []string
		for _, sf := range g.surfaces {
			paths = append(paths, sf.path())
		}
		g.rs.register(mux, paths)
		verify, check = tokenInfo, g.authenticate
	}
	guard := func(h http.Handler) http.Handler {
		return check(auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h))
	}
	for _, sf := range g.surfaces {
		// Every body is screened on the bytes the host sent (see screenBody)
		// before either handler, or the session router, reads it.
		var h http.Handler = &httpMCP{
			stateless: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sf.stateless },
				// A stateless call's answer is one message (questions come back as
				// input_required results), so it goes as application/json rather than an event
				// stream of one event: less to frame and parse on both ends, and the host has
				// read the whole response when it has the answer, so its connection is free for
				// its next request.
				&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: g.statelessLog()}),
			stateful: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sf.sessions },
				&mcp.StreamableHTTPOptions{Logger: g.log, SessionTimeout: g.cfg.SessionIdleTimeout.Or(DefaultSessionIdle)}),
			sessions: g.sessions,
		}
		// A pass-through tools/call the gateway can answer without the library is
		// answered by servePlain; everything else goes on to the library's handlers.
		var first func(http.ResponseWriter, *http.Request, []byte) bool
		if plain {
			first = func(w http.ResponseWriter, r *http.Request, body []byte) bool { return g.servePlain(sf, w, r, body) }
		}
		mux.Handle(sf.path(), guard(screenHTTP(h, first)))
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "mode": g.mode})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		problems, unlisted := g.notReady(r.Context())
		httpx.WriteReadiness(w, len(problems) == 0, problems, unlisted, map[string]any{"mode": g.mode})
	})
	return mux
}

// requireToken lets through a request that carries a principal's static token, with the
// principal in its context for staticTokenInfo. Any other is answered 401 in the error
// envelope with a Bearer challenge for realm "mcpgate" (RFC 6750 §3; error="invalid_token"
// when a token was sent): the library's own refusal is plain text and, without a metadata URL,
// has no challenge at all.
func (g *Gateway) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := g.tokens.RequireCaller(w, r, "mcpgate", "a principal's token is required", "the token is not accepted")
		if !ok {
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), staticPrincipal{}, name)))
	})
}

// staticPrincipal is the context key of the principal requireToken found.
type staticPrincipal struct{}

// staticTokenInfo hands the principal requireToken found to the MCP SDK, which passes it to the
// tool handlers as req.Extra.TokenInfo.
func staticTokenInfo(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
	name, ok := ctx.Value(staticPrincipal{}).(string)
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: name}, nil
}

// readyWait bounds each service's answer to a readiness check: a load
// balancer's probe must get an answer, not hang with a service that
// accepts connections and says nothing.
const readyWait = 5 * time.Second

// inPolicy reports whether the policy in force now has the server id: the catalog's readiness
// is over the servers of the policy in force it is connected to (one the policy dropped is
// not waited for; one it added has no connection to wait for): see
// upstream.Catalog.Readiness. One server that cannot be listed leaves the gateway ready, its
// tools withdrawn; none listed does not.
func (g *Gateway) inPolicy() func(id string) bool {
	pol := g.policy()
	return func(id string) bool {
		_, ok := pol.Servers[id]
		return ok
	}
}

// notReady says what keeps the gateway from completing calls, and which
// servers' tools are withdrawn now: its catalog not ready, and verdictd or
// the executor not ready or the state store not answering, without which
// no irreversible call can complete.
func (g *Gateway) notReady(ctx context.Context) (problems, unlisted []string) {
	cr := g.catalog.Readiness(g.inPolicy())
	problems, unlisted = cr.Problems, cr.Unlisted
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	// Without its store no gated call can be asked or answered, nor a relayed question of a
	// pass-through tool (its own connection, on the same cluster).
	checks := []func() error{
		func() error { return g.verdictd.ready(ctx) },
		func() error { return g.executor.ready(ctx) },
		storeReady(ctx, g.store, "the state store"),
		storeReady(ctx, g.relays, "the state store of relayed questions"),
	}
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, check := range checks {
		wg.Go(func() { errs[i] = check() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems, unlisted
}

// storeReady is the readiness check of st, which what names.
func storeReady(ctx context.Context, st waiting.Store, what string) func() error {
	return func() error {
		if err := st.Ready(ctx); err != nil {
			return fmt.Errorf("%s is not available: %w", what, err)
		}
		return nil
	}
}

// readinessState is what mcpgate_ready and mcpgate_upstream_listed show:
// the gateway's own catalog. What /readyz asks of verdictd, the executor
// and the state store over the network is not asked at a scrape; their
// own series say it.
func (g *Gateway) readinessState() metricx.ReadinessState {
	return metricx.ReadinessState{Ready: g.catalog.Readiness(g.inPolicy()).Ready, Listed: g.catalog.Listed(g.inPolicy())}
}

// syncTools makes the exposed tools match the catalog and the policy in
// force: the tools of each policy server the gateway is connected to,
// under "<server>.<tool>", definitions as listed. Tools of a server the
// policy no longer has are removed.
func (g *Gateway) syncTools() {
	g.mu.Lock()
	defer g.mu.Unlock()
	// Read under mu: a sync that read an older policy cannot run after one
	// that read the newer.
	pol := g.policy()
	want := map[string]bool{}
	var listed []string // the policy servers with a listing now
	g.metrics.withheld.Reset()
	for _, id := range slices.Sorted(maps.Keys(pol.Servers)) {
		tools, ok := g.catalog.Tools(id)
		if !ok {
			continue
		}
		listed = append(listed, id) // its resources and prompts follow its tools
		held := 0
		for _, t := range tools {
			name := id + nameSeparator + t.Name
			if t.Name == "" {
				continue
			}
			if err := pol.CheckPin(id, t.Name, t.Digest); err != nil {
				// Withheld, not exposed with a warning: the host's model would read the changed
				// description, which may be the attack.
				held++
				if _, was := g.exposed[name]; was {
					g.log.Warn("tool withheld by its pin", "tool", name, "error", err.Error())
				}
				continue
			}
			want[name] = true
			old, replaced := g.exposed[name]
			if replaced && string(old.raw) == string(t.Raw) {
				continue
			}
			if err := g.offer(id, name, t); err != nil {
				g.log.Warn("tool not exposed", "server", id, "tool", t.Name, "error", err.Error())
				delete(want, name)
				continue
			}
			g.exposed[name] = exposedTool{Server: id, Tool: t.Name, raw: t.Raw, headerFree: plainTool(t.Raw)}
			if replaced {
				g.log.Info("tool definition changed upstream; exposing the new one", "tool", name)
			}
		}
		if pol.Pins[id] != nil {
			g.metrics.withheld.WithLabelValues(id).Set(float64(held))
		}
	}
	var gone []string
	for name := range g.exposed {
		if !want[name] {
			gone = append(gone, name)
			delete(g.exposed, name)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		g.log.Info("tools withdrawn", "tools", gone)
		for _, sf := range g.surfaces {
			var names []string
			for _, name := range gone {
				if sf.offers(serverOf(name)) {
					names = append(names, sf.exposedName(name))
				}
			}
			for _, srv := range sf.servers() {
				srv.RemoveTools(names...)
			}
		}
	}
	g.syncFeatures(pol, listed)
	g.reportPresets(pol)
}

// offer adds t, the tool of server id the gate knows as name, to every
// surface that offers the server's tools, or replaces it there. The
// handlers know the call by name whichever surface it came in at.
func (g *Gateway) offer(id, name string, t upstream.Tool) error {
	for _, sf := range g.surfaces {
		if !sf.offers(id) {
			continue
		}
		mt, err := exposeTool(sf.exposedName(name), t)
		if err != nil {
			return err
		}
		forSess, forStdio := *mt, *mt
		httpHandler := g.screened(name, g.httpTool(id+"/"+t.Name, g.toolHandler(name, httpPrincipal)))
		sf.stateless.AddTool(mt, httpHandler)
		sf.sessions.AddTool(&forSess, g.keptAlive(httpHandler))
		sf.stdio.AddTool(&forStdio, g.screened(name, g.toolHandler(name, g.stdioPrincipal)))
	}
	return nil
}

// serverOf is the server id of a gate name: what comes before its first
// separator (a server id holds none).
func serverOf(name string) string {
	id, _, _ := strings.Cut(name, nameSeparator)
	return id
}

func (g *Gateway) lookup(name string) (exposedTool, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	x, ok := g.exposed[name]
	return x, ok
}

// exposeTool builds the definition offered for t: the listed definition
// with only the name changed; description and inputSchema are the exact
// bytes the server sent.
func exposeTool(name string, t upstream.Tool) (*mcp.Tool, error) {
	if len(t.InputSchema) == 0 {
		return nil, errors.New("no inputSchema")
	}
	var shape struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(t.InputSchema, &shape); err != nil || shape.Type != "object" {
		return nil, errors.New(`inputSchema is not of type "object"`)
	}
	var mt mcp.Tool
	if err := json.Unmarshal(t.Raw, &mt); err != nil {
		return nil, fmt.Errorf("definition: %w", err)
	}
	var rawOut struct {
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	_ = json.Unmarshal(t.Raw, &rawOut)
	mt.Name = name
	mt.InputSchema = t.InputSchema
	mt.OutputSchema = nil
	if len(rawOut.OutputSchema) > 0 && string(rawOut.OutputSchema) != "null" {
		mt.OutputSchema = rawOut.OutputSchema
	}
	return &mt, nil
}
