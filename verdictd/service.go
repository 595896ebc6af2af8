package verdictd

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/approvals"
	"github.com/verdictgate/verdict/convstate"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/gates/webhook"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/daemon"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/metricx"
	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/internal/tracing"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/ship"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdict"
)

// DBFile is the name of verdictd's bbolt file inside data_dir: decision records and the
// conversation state live together so that one commit covers a run.
const DBFile = "verdictd.db"

// Options are the parts of a Service that are not configuration.
type Options struct {
	Logger *slog.Logger
	Now    func() time.Time // nil means time.Now
	// HTTPClient performs HTTP measurements; nil means a client without redirects to other
	// schemes and with no overall timeout (each measurement has its own).
	HTTPClient *http.Client
	// Webhook decides C3 for tools whose policy names a webhook approver; nil means such tools
	// pass C3 only on a policy phrase.
	Webhook gates.Approver
	// Getenv reads the OTEL_* variables that can turn tracing on; nil reads none.
	Getenv func(string) string
	// PolicyTicks, if set, replaces the policy_poll ticker: Run's watcher polls the policy file
	// once for every value it takes (daemon.WatchFileTicks). Nil polls every policy_poll. Tests
	// send on it to know which polls have ended rather than sleep through some.
	PolicyTicks <-chan time.Time
	// webhookResult, when set (by tests), is told each approval webhook request's result once
	// it is counted.
	webhookResult func(approvalID, result string)
}

// Service is a running verdictd.
type Service struct {
	cfg       Config
	log       *slog.Logger
	now       func() time.Time
	db        *store.DB
	decisions *store.Decisions
	state     convstate.Store // in the bbolt file, or in etcd with state_store kind etcd
	locks     convLocks
	engine    *gates.Engine
	ring      *keys.Ring
	callers   *httpx.Tokens
	acts      map[string]principalSet // by caller name: the principals it may act for
	traced    map[string]bool         // by caller name: trusted for its trace context
	subjects  *identity.Verifier      // verifies forwarded subject tokens; nil without identity
	approvers *identity.Verifier      // verifies approver tokens; nil without an approvers section
	approvals *approvals.Service      // the console's and the webhooks' approvals, in the bbolt file
	admin     *httpx.Tokens
	issuers   []verdict.TrustedIssuer
	remotes   []*keys.Remote
	metrics   *metrics
	shipper   *ship.Shipper // nil without shipping
	tr        *tracing.Tracing

	snap     atomic.Pointer[snapshot]
	reloadMu sync.Mutex // one reload at a time
	// policyTicks drives the policy watcher instead of its ticker when set (Options.PolicyTicks).
	policyTicks <-chan time.Time

	runMu    sync.Mutex
	runCtx   context.Context // set while Run is running
	catalogs map[*upstream.Catalog]context.CancelFunc

	inflight daemon.Inflight
	// receiptSlots bounds the receipts decided at once, over every request (receiptWorkers).
	receiptSlots chan struct{}

	// lastRecordSize is the length of the last record encoded, to size the next one's buffer.
	lastRecordSize atomic.Int64
}

// New loads the signing key, the executors' receipt keys and the policy, opens the bbolt file
// and prepares the tool catalog. It does not listen and lists no tools yet; see Handler and
// Run. A policy that does not load stops New: a daemon never starts without one.
func New(ctx context.Context, cfg Config, opts Options) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)), now: opts.Now, policyTicks: opts.PolicyTicks, receiptSlots: make(chan struct{}, receiptWorkers),
		catalogs: map[*upstream.Catalog]context.CancelFunc{}}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.loadTokens(); err != nil {
		return nil, err
	}
	if err := s.loadKeys(ctx); err != nil {
		return nil, err
	}
	s.metrics = newMetrics()
	s.metrics.reg.MustRegister(metricx.Readiness("verdictd",
		"1 while verdictd decides preflights (as /readyz answers), 0 while not.", s.readinessState))
	var err error
	if s.tr, err = tracing.Setup(ctx, cfg.Tracing, "verdictd", opts.Getenv); err != nil {
		return nil, err
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "tracing", s.tr.Attrs()...)
	first, err := s.loadPolicy()
	if err != nil {
		return nil, err
	}
	if err := s.newEngine(opts); err != nil {
		return nil, err
	}
	if err := s.checkFields(first, nil); err != nil {
		return nil, err
	}
	if err := s.openStores(ctx, first); err != nil {
		return nil, err
	}
	s.log.Info("policy loaded", "version", first.policy.Version, "servers", len(first.policy.Servers),
		"tools", len(first.policy.Tools), "issues", len(first.policy.Issues))
	// Last: nothing after it can fail, so the webhook workers never outlive a New that did.
	// The approvals are where the state is: a replica's file, or the cluster every replica
	// shares, where a record's commit changes them with the state.
	var keeper approvals.Keeper = s.db.Approvals()
	if e, ok := s.state.(*convstate.Etcd); ok {
		keeper = e.Approvals()
	}
	s.approvals = approvals.New(approvals.Options{Keeper: keeper, InForce: s.inForce, Authenticate: s.viewer,
		Now: s.now, Logger: s.log, Metrics: s.metrics.reg, HTTPClient: opts.HTTPClient,
		WebhookInFlight: cfg.ApprovalWebhooks.InFlight, WebhookQueue: cfg.ApprovalWebhooks.Queue, WebhookResult: opts.webhookResult})
	return s, nil
}

// loadTokens makes the verifiers of who calls: the callers' and admin's token hashes, and the
// issuers of the subject tokens and of the approvers' tokens.
func (s *Service) loadTokens() error {
	cfg := &s.cfg
	toks := make([]httpx.Token, len(cfg.Callers))
	s.acts = make(map[string]principalSet, len(cfg.Callers))
	s.traced = make(map[string]bool, len(cfg.Callers))
	for i, c := range cfg.Callers {
		toks[i] = httpx.Token{Name: c.Name, TokenSHA256: c.TokenSHA256}
		s.acts[c.Name] = newPrincipalSet(c.Principals)
		s.traced[c.Name] = c.TrustTraceContext
	}
	var err error
	if s.callers, err = httpx.NewTokens(toks); err != nil {
		return err
	}
	// A token whose aud names both a subject token's resource and the approvals API serves as
	// neither: each section excludes the other's audiences, so that a token the gateway
	// forwards (or a host holds) never decides an approval, nor an approver's token a preflight.
	if cfg.Identity != nil {
		subjects := *cfg.Identity
		if cfg.Approvers != nil {
			subjects = subjects.Excluding(cfg.Approvers.identity().Audiences()...)
		}
		// No I/O here: the issuers are reached at the first subject token, so that verdictd
		// starts while they are down and refuses subject tokens (503) until they are back.
		if s.subjects, err = identity.NewVerifier(subjects, identity.WithClock(s.now)); err != nil {
			return err
		}
	}
	if cfg.Approvers != nil {
		approvers := cfg.Approvers.identity()
		if cfg.Identity != nil {
			approvers = approvers.Excluding(cfg.Identity.Audiences()...)
		}
		if s.approvers, err = identity.NewVerifier(approvers, identity.WithClock(s.now),
			identity.WithGroupsClaim(cfg.Approvers.groupsClaim())); err != nil {
			return fmt.Errorf("approvers: %w", err)
		}
	}
	if cfg.AdminTokenSHA256 != "" {
		if s.admin, err = httpx.NewTokens([]httpx.Token{{Name: "admin", TokenSHA256: cfg.AdminTokenSHA256}}); err != nil {
			return err
		}
	}
	return nil
}

// loadKeys loads the signing key with the previous keys whose verdicts still verify, and the
// key sets of the executors whose receipts verdictd accepts.
func (s *Service) loadKeys(ctx context.Context) error {
	cfg := &s.cfg
	signer, err := keys.LoadSigner(cfg.SigningKey)
	if err != nil {
		return fmt.Errorf("signing_key: %w", opfile.IfMissing(err, keys.KeygenHint("verdictd", cfg.SigningKey)))
	}
	var previous []keys.PublicKey
	for i, p := range cfg.PreviousKeys {
		set, err := keys.LoadJWKS(ctx, p, keys.FetchOptions{})
		if err != nil {
			return fmt.Errorf("previous_keys[%d]: %w", i, opfile.IfMissing(err, keys.JWKSHint("verdictd")))
		}
		for _, k := range set.Keys() {
			if k.KeyID() != signer.KeyID() {
				previous = append(previous, k)
			}
		}
	}
	if s.ring, err = keys.NewRing(signer, previous...); err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	for i, e := range cfg.Executors {
		r, err := keys.NewRemote(ctx, e.JWKS, keys.RemoteOptions{RefreshInterval: cfg.JWKSRefresh.Or(DefaultJWKSRefresh)})
		if err != nil {
			return fmt.Errorf("executors[%d] (%s): %w", i, e.Issuer, opfile.IfMissing(err, keys.JWKSHint("executor")))
		}
		s.remotes = append(s.remotes, r)
		s.issuers = append(s.issuers, verdict.TrustedIssuer{ID: e.Issuer, Keys: r})
	}
	return nil
}

// newEngine makes the preflight engine with its approver, measurer and evaluator.
func (s *Service) newEngine(opts Options) error {
	eval, err := gates.NewCELEvaluator()
	if err != nil {
		return err
	}
	client := cmp.Or(opts.HTTPClient, &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }})
	webhookApprover := cmp.Or(opts.Webhook, gates.Approver(webhook.New(webhook.Options{Client: client})))
	s.engine, err = gates.New(gates.Config{
		Clock:     s.now,
		IDs:       &recordIDs{now: s.now},
		Webhook:   webhookApprover,
		Measurer:  s.newMeasurer(client),
		Evaluator: eval,

		EvaluationBudget: s.cfg.evaluationBudget(),
	})
	return err
}

// openStores opens the bbolt file, shipping and the state store, and installs the first
// policy. On error it closes what it opened.
func (s *Service) openStores(ctx context.Context, first *snapshot) error {
	cfg := &s.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data_dir: %w", opfile.Explain(err))
	}
	var err error
	if s.db, err = store.Open(filepath.Join(cfg.DataDir, DBFile), store.Options{Outbox: cfg.Shipping != nil}); err != nil {
		return err
	}
	s.decisions = s.db.Decisions()
	if s.shipper, err = ship.ForDaemon(ctx, cfg.Shipping, s.db, "verdictd", s.metrics.reg, s.log); err != nil {
		s.db.Close(ctx)
		return err
	}
	if s.state, err = openState(ctx, cfg, s.db, s.now); err != nil {
		s.db.Close(ctx)
		return err
	}
	if err := s.install(first); err != nil {
		s.state.Close()
		s.db.Close(ctx)
		return err
	}
	return nil
}

// recordIDs makes record ids that strictly increase in the order this replica decides them
// (store.RecordIDs): receipts are ordered by their verdict's record id. Question ids are
// opaque and random.
type recordIDs struct {
	now func() time.Time
	seq store.RecordIDs
}

func (r *recordIDs) NewID(prefix string) (string, error) {
	if prefix == "rec" {
		return r.seq.Next("rec_", r.now()), nil
	}
	return gates.RandomIDs{}.NewID(prefix)
}

// loadPolicy reads and parses the policy file into a snapshot without a catalog.
func (s *Service) loadPolicy() (*snapshot, error) {
	data, err := opfile.ReadFile(s.cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return s.parsePolicy(data)
}

// checkFields refuses a policy whose field rules name arguments the tools do not declare, as
// far as the definitions in hand show: inline ones always, listed ones when cur (nil at start)
// serves the same servers. The error is a *policy.Error naming each tool.
func (s *Service) checkFields(next, cur *snapshot) error {
	var cat *upstream.Catalog
	if cur != nil && cur.catalog != nil && sameServers(cur.remote, next.remote) {
		cat = cur.catalog
	}
	problems, err := next.mismatches(s.engine, cat)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if len(problems) > 0 {
		return &policy.Error{File: s.cfg.Policy, Problems: problems}
	}
	return nil
}

// parsePolicy makes a snapshot of the policy file content data.
func (s *Service) parsePolicy(data []byte) (*snapshot, error) {
	p, err := policy.Parse(data)
	if err != nil {
		if pe, ok := errors.AsType[*policy.Error](err); ok {
			pe.File = s.cfg.Policy
		}
		return nil, err
	}
	return &snapshot{policy: p, hash: sha256.Sum256(data), remote: remoteServers(p), inline: inlineTools(p)}, nil
}

// install makes next the snapshot in force. The catalog of the previous snapshot is kept when
// the servers did not change, so a reload does not reconnect every tool server.
func (s *Service) install(next *snapshot) error {
	prev := s.snap.Load()
	var old *upstream.Catalog
	if prev != nil {
		old = prev.catalog
	}
	switch {
	case len(next.remote) == 0:
	case old != nil && sameServers(prev.remote, next.remote):
		next.catalog = old
	default:
		copts := upstream.CatalogOptions{Interval: s.cfg.CatalogRefresh.Or(DefaultRefreshInterval)}
		// The stdio servers' stderr lines are logged through it too, each with its server.
		copts.Client.Logger = s.log
		c, err := upstream.NewCatalog(next.remote, copts)
		if err != nil {
			return fmt.Errorf("policy servers: %w", err)
		}
		next.catalog = c
	}
	s.startCatalog(next.catalog)
	s.snap.Store(next)
	metricx.SetInfo(s.metrics.policyInfo, next.policy.Version)
	if old != nil && old != next.catalog {
		if err := s.stopCatalog(old); err != nil {
			s.log.Warn("close previous tool catalog", "error", err)
		}
	}
	return nil
}

func (s *Service) startCatalog(c *upstream.Catalog) {
	if c == nil {
		return
	}
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if _, running := s.catalogs[c]; running || s.runCtx == nil {
		return
	}
	ctx, cancel := context.WithCancel(s.runCtx)
	s.catalogs[c] = cancel
	go func() { _ = c.Run(ctx) }()
}

// stopCatalog stops running c, if Run runs it, and closes it.
func (s *Service) stopCatalog(c *upstream.Catalog) error {
	s.runMu.Lock()
	if cancel, ok := s.catalogs[c]; ok {
		cancel()
		delete(s.catalogs, c)
	}
	s.runMu.Unlock()
	return c.Close()
}

func (s *Service) currentCatalog() *upstream.Catalog {
	if sn := s.snap.Load(); sn != nil {
		return sn.catalog
	}
	return nil
}

// PolicyVersion returns the version of the policy in force.
func (s *Service) PolicyVersion() string { return s.snap.Load().policy.Version }

// JWKS returns the public verdict keys: the current one and the still-listed previous ones.
func (s *Service) JWKS() *keys.Set { return s.ring.Set() }

// Reload reads the policy file and, if it changed, puts it in force atomically. A file that
// does not load leaves the policy in force untouched and is counted as a failed reload.
func (s *Service) Reload(ctx context.Context) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	next, err := s.loadPolicy()
	return s.reload(next, err, true)
}

// reload puts next, the snapshot of the policy file or the error that made it, in force; explicit
// says whether an unchanged file still counts as a reload (SIGHUP) or is silently skipped (the
// file watcher). The caller holds reloadMu.
func (s *Service) reload(next *snapshot, err error, explicit bool) error {
	cur := s.snap.Load()
	fail := func(msg string, err error) error {
		s.metrics.reloads.WithLabelValues("error").Inc()
		s.log.Error(msg, "version", cur.policy.Version, "error", err.Error())
		return err
	}
	if err != nil {
		return fail("policy reload failed; keeping the policy in force", err)
	}
	if next.hash == cur.hash {
		if explicit {
			s.metrics.reloads.WithLabelValues("ok").Inc()
			s.log.Info("policy unchanged", "version", cur.policy.Version)
		}
		return nil
	}
	if err := s.checkFields(next, cur); err != nil {
		return fail("policy reload refused; keeping the policy in force", err)
	}
	if next.policy.Version == cur.policy.Version {
		// Records name the policy by version: two different files under one version make an
		// audit unable to tell which rules decided a record.
		s.log.Warn("policy file changed but policy_version did not; records cannot tell the two apart",
			"version", next.policy.Version)
	}
	if err := s.install(next); err != nil {
		return fail("policy reload failed; keeping the policy in force", err)
	}
	s.metrics.reloads.WithLabelValues("ok").Inc()
	s.log.Info("policy reloaded", "from", cur.policy.Version, "to", next.policy.Version, "issues", len(next.policy.Issues))
	return nil
}

// watchPolicy reloads the policy whenever the file's content changes (daemon.WatchFile: a
// broken content is one failed reload, not one per poll).
func (s *Service) watchPolicy(ctx context.Context) {
	inForce := func() [sha256.Size]byte { return s.snap.Load().hash }
	load := func(data []byte) error {
		s.reloadMu.Lock()
		defer s.reloadMu.Unlock()
		next, err := s.parsePolicy(data)
		return s.reload(next, err, false)
	}
	if s.policyTicks != nil {
		daemon.WatchFileTicks(ctx, s.cfg.Policy, s.policyTicks, inForce, load)
		return
	}
	daemon.WatchFile(ctx, s.cfg.Policy, s.cfg.PolicyPoll.Or(DefaultPolicyPoll), inForce, load)
}

// Refresh lists every policy server's tools now.
func (s *Service) Refresh(ctx context.Context) error {
	if c := s.currentCatalog(); c != nil {
		return c.Refresh(ctx)
	}
	return nil
}

// Run keeps the tool catalog, the policy and the executors' key sets fresh until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	s.runMu.Lock()
	s.runCtx = ctx
	s.runMu.Unlock()
	s.startCatalog(s.currentCatalog())
	var wg sync.WaitGroup
	wg.Go(func() { s.watchPolicy(ctx) })
	if s.shipper != nil {
		wg.Go(func() { s.shipper.Run(ctx) })
	}
	wg.Go(func() { s.approvals.Run(ctx) })
	if b, ok := s.state.(*convstate.Bolt); ok {
		// Idle conversations are forgotten on the etcd store by their leases, here by
		// collection; a failed collection is retried at the next round.
		wg.Go(func() { s.collectConversations(ctx, b) })
	}
	for _, r := range s.remotes {
		wg.Go(func() {
			r.Run(ctx, func(err error) {
				s.log.Warn("executor jwks refresh failed; keeping the last good set", "jwks", r.Location(), "error", err)
			})
		})
	}
	<-ctx.Done()
	wg.Wait()
	s.runMu.Lock()
	for c, cancel := range s.catalogs {
		cancel()
		delete(s.catalogs, c)
	}
	s.runCtx = nil
	s.runMu.Unlock()
	return ctx.Err()
}

// Ready reports whether the service can decide preflights, and if not why: a policy is loaded,
// the first listing of every policy server has been tried, and at least one server is listed
// now (a server whose listing failed for longer than three catalog_refresh intervals is not).
// The reasons name servers only, never their addresses or errors (see check-policy).
func (s *Service) Ready() (bool, []string) {
	r := s.readiness()
	return r.Ready, r.Problems
}

func (s *Service) readiness() upstream.Readiness {
	sn := s.snap.Load()
	if sn == nil {
		return upstream.Readiness{Problems: []string{"no policy loaded"}}
	}
	return sn.readiness()
}

// readinessState is what verdictd_ready and verdictd_upstream_listed show.
func (s *Service) readinessState() metricx.ReadinessState {
	st := metricx.ReadinessState{Ready: s.readiness().Ready}
	if c := s.currentCatalog(); c != nil {
		st.Listed = c.Listed(nil)
	}
	return st
}

// Handler returns verdictd's HTTP API (docs/api.md).
func (s *Service) Handler() http.Handler {
	mux := httpx.NewServeMux() // any other path or method: 404 not_found
	mux.HandleFunc("POST /v1/preflight", s.callerOnly(s.handlePreflight))
	mux.HandleFunc("POST /v1/receipts", s.callerOnly(s.handleReceipt))
	mux.HandleFunc("POST /v1/receipts/batch", s.callerOnly(s.handleReceiptBatch))
	mux.HandleFunc("GET /v1/approvals", s.tracked(s.approvals.HandleList))
	mux.HandleFunc("GET /v1/approvals/{id}", s.tracked(s.approvals.HandleGet))
	mux.HandleFunc("POST /v1/approvals/{id}", s.tracked(s.approvals.HandleDecide))
	mux.HandleFunc("GET /v1/records/{id}", s.adminOnly(s.handleGetRecord))
	mux.HandleFunc("GET /v1/records", s.adminOnly(s.handleListRecords))
	mux.HandleFunc("GET /.well-known/jwks.json", s.handleJWKS)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.handleReady)
	return mux
}

// EndWaits answers every long poll of the approvals API now, with the approval as it stands:
// a shutdown waits for requests in flight, and a long poll would hold it for up to a minute.
func (s *Service) EndWaits() { s.approvals.EndWaits() }

// Close waits for in-flight requests to be recorded (or for ctx to end), then closes the tool
// connections and the bbolt file.
func (s *Service) Close(ctx context.Context) error {
	s.EndWaits()
	if !s.inflight.Drain(ctx) {
		s.log.Error("shutdown deadline passed with preflights in flight")
	}
	var cerr error
	if c := s.currentCatalog(); c != nil {
		cerr = s.stopCatalog(c)
	}
	s.approvals.Close()
	serr, derr := s.state.Close(), s.db.Close(ctx)
	st := s.db.Stats()
	s.log.Info("store closed", "commits", st.Commits, "updates", st.Updates)
	if err := s.tr.Shutdown(ctx); err != nil {
		s.log.Warn("tracing: spans not exported at shutdown", "error", err.Error())
	}
	return errors.Join(cerr, serr, derr)
}

func (s *Service) callerOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, err := s.callers.Check(r)
		if err != nil {
			// Require answers the refusal, telling a missing token from a wrong one.
			s.callers.Require(w, r, "verdictd", "a caller token is required", "the caller token is not accepted")
			return
		}
		s.serveTracked(w, r.WithContext(withCaller(r.Context(), name)), h)
	}
}

// tracked counts a request among those shutdown waits for; the handler authenticates it.
func (s *Service) tracked(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serveTracked(w, r, h) }
}

// serveTracked serves r with h as a request shutdown waits for, or refuses it once shutdown
// has begun.
func (s *Service) serveTracked(w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	if !s.inflight.Begin() {
		httpx.WriteError(w, httpx.Errorf(http.StatusServiceUnavailable, api.CodeShuttingDown, "verdictd is shutting down"))
		return
	}
	defer s.inflight.Done()
	h(w, r)
}

func (s *Service) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		missing, rejected := "the admin token is required", "the admin token is not accepted"
		if s.admin == nil {
			missing = "records are disabled: no admin token is configured"
			rejected = missing
		}
		if s.admin.Require(w, r, "verdictd-admin", missing, rejected) {
			s.serveTracked(w, r, h)
		}
	}
}

// handleReady answers /readyz: 200 while verdictd decides preflights, 503 with the problems
// otherwise; either names the policy servers whose tools are not listed now (their preflights
// end in definition_repair).
func (s *Service) handleReady(w http.ResponseWriter, r *http.Request) {
	rd := s.readiness()
	problems, extra := rd.Problems, map[string]any{"policy_version": s.PolicyVersion()}
	if !rd.Ready {
		extra = nil
		if len(problems) == 0 {
			problems = []string{"catalog not ready"}
		}
	}
	httpx.WriteReadiness(w, rd.Ready, problems, rd.Unlisted, extra)
}

func (s *Service) handleJWKS(w http.ResponseWriter, r *http.Request) {
	b, err := s.ring.Set().MarshalJSON()
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "max-age=60")
	w.Write(bytes.TrimSpace(b))
}
