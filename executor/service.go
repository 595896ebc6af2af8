// Package executor owns the execution side of the trust boundary: it verifies a verdict against
// the call it is asked to make, consumes the verdict's nonce, records the execution durably
// before and after calling the MCP tool, and signs a receipt. It holds only public verdict keys,
// so nothing that reaches it can authorize a call on its own.
package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verdictgate/verdict/internal/plainhttp"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/daemon"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/metricx"
	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/internal/tracing"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/nonce"
	"github.com/verdictgate/verdict/ship"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/vault"
	"github.com/verdictgate/verdict/verdict"
)

// DBFile is the name of the executor's bbolt file inside data_dir: execution records and the
// consumed nonces live together so that one commit covers both.
const DBFile = "executor.db"

// Options are the parts of a Service that are not configuration.
type Options struct {
	Logger *slog.Logger
	Now    func() time.Time // nil means time.Now
	// HTTPClient posts receipts to verdictd; nil means a client with a 10s timeout.
	HTTPClient *http.Client
	// Getenv reads the OTEL_* variables that can turn tracing on; nil reads none.
	Getenv func(string) string
}

// Service is a running executor.
type Service struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	db     *store.DB
	execs  *store.Executions
	nonces nonce.Store
	bolt   *nonce.Bolt // the nonce store when it lives in db, so consume and start share a commit
	// recon is the nonce store when it is shared (etcd): consume and start are two writes, and
	// the verdicts consumed without a start are found and recorded (reconcile.go).
	recon      nonce.Reconciler
	unsettled  chan struct{} // a consume was given up on: wakes the reconciler
	reconciled atomic.Bool   // the consumes of earlier runs are all accounted for
	catalog    *upstream.Catalog
	remotes    []*keys.Remote
	issuers    []verdict.TrustedIssuer
	algs       []jose.SignatureAlgorithm // cfg's algorithms, resolved once
	receipt    *keys.Signer
	callers    *httpx.Tokens
	traced     map[string]bool // by caller name: trusted for its trace context
	admin      *httpx.Tokens
	metrics    *metrics
	shipper    *ship.Shipper // nil without shipping
	tr         *tracing.Tracing
	// pins is the policy whose pins hold tools back (config policy) and its file's hash; nil
	// without one (see pinned).
	pins     atomic.Pointer[pinnedPolicy]
	sink     *receiptSink
	inflight daemon.Inflight
	// subjects verifies the users' access tokens for the token_exchange servers, whose
	// users are the servers called with each user's own authority, by server id; nil and
	// empty without any (credentials.go, exchange.go, grants.go).
	subjects *identity.Verifier
	users    map[string]*userServer
	vault    *vault.Vault // the users' grants of the user_grant servers; nil without any
	connect  *connector   // the connect pages; nil without a connect section
	// grantNews is told of each grant stored at the connect pages, for the waits of
	// GET /v1/connections.
	grantNews broadcast
	// tokens are the principals' exchanged tokens, userConns their own connections to the
	// token_exchange servers, whose requests all go out through userTransport.
	tokens        *tokenCache
	userConns     *userConns
	userTransport *http.Transport
	// upstreamConns carries the catalog's requests to the servers (not the token_exchange
	// servers' own, which go through userTransport).
	upstreamConns *plainhttp.Transport
}

// New opens the executor's store, recovers executions a crash left in flight, loads the keys
// and connects the upstream catalog. It does not listen; see Handler and Run.
func New(ctx context.Context, cfg Config, opts Options) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)), now: opts.Now, algs: confx.SignatureAlgorithms(cfg.Algorithms)}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.loadKeys(); err != nil {
		return nil, err
	}
	// The secrets and the vault's keys are read before anything is opened: a missing one
	// stops the start at its key.
	vaultKeys, err := loadVaultKeys(cfg.Vault)
	if err != nil {
		return nil, err
	}
	secrets, err := readSecrets(&cfg)
	if err != nil {
		return nil, err
	}
	s.tokens = newTokenCache(MaxUserTokens)
	s.userConns = newUserConns(MaxUserConnections, UserConnectionIdle)
	s.userTransport = http.DefaultTransport.(*http.Transport).Clone()
	if err := s.trustIssuers(ctx); err != nil {
		return nil, err
	}
	if err := s.openStores(ctx, vaultKeys, secrets); err != nil {
		s.closeStores(ctx)
		return nil, err
	}
	if err := s.start(ctx, opts); err != nil {
		s.closeStores(ctx)
		return nil, err
	}
	return s, nil
}

// loadKeys reads what the executor authenticates with: its callers' and admin's token hashes,
// its receipt key and the verifier of the users' access tokens.
func (s *Service) loadKeys() error {
	cfg := &s.cfg
	var err error
	if s.callers, err = httpx.NewTokens(CallerTokens(cfg.Callers)); err != nil {
		return err
	}
	s.traced = make(map[string]bool, len(cfg.Callers))
	for _, c := range cfg.Callers {
		s.traced[c.Name] = c.TrustTraceContext
	}
	if cfg.AdminTokenSHA256 != "" {
		if s.admin, err = httpx.NewTokens([]httpx.Token{{Name: "admin", TokenSHA256: cfg.AdminTokenSHA256}}); err != nil {
			return err
		}
	}
	if s.receipt, err = keys.LoadSigner(cfg.ReceiptKey); err != nil {
		return fmt.Errorf("receipt_key: %w", opfile.IfMissing(err, keys.KeygenHint("executor", cfg.ReceiptKey)))
	}
	if cfg.Identity != nil {
		if s.subjects, err = identity.NewVerifier(*cfg.Identity, identity.WithClock(s.now)); err != nil {
			return err
		}
	}
	return nil
}

// trustIssuers fetches the key sets of the verdicts' trusted issuers.
func (s *Service) trustIssuers(ctx context.Context) error {
	cfg := &s.cfg
	for i, ti := range cfg.TrustedIssuers {
		r, err := keys.NewRemote(ctx, ti.JWKS, keys.RemoteOptions{RefreshInterval: cfg.JWKSRefresh.Or(DefaultJWKSRefresh)})
		if err != nil {
			return fmt.Errorf("trusted_issuers[%d] (%s): %w", i, ti.Issuer, opfile.IfMissing(err, keys.JWKSHint("verdictd")))
		}
		s.remotes = append(s.remotes, r)
		s.issuers = append(s.issuers, verdict.TrustedIssuer{ID: ti.Issuer, Keys: r})
	}
	return nil
}

// openStores opens the records file, the vault, the users' servers (once the vault is open: a
// granter holds it from the start) and the nonce store. On error, what it opened is left for
// closeStores.
func (s *Service) openStores(ctx context.Context, vaultKeys []*vault.Key, secrets map[string]string) error {
	if err := os.MkdirAll(s.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data_dir: %w", opfile.Explain(err))
	}
	var err error
	if s.db, err = store.Open(filepath.Join(s.cfg.DataDir, DBFile), store.Options{Outbox: s.cfg.Shipping != nil}); err != nil {
		return err
	}
	s.execs = s.db.Executions()
	if err := s.openVault(ctx, vaultKeys); err != nil {
		return err
	}
	if s.users, err = newUserServers(ctx, &s.cfg, secrets, s.newGranter); err != nil {
		return err
	}
	if s.nonces, s.bolt, err = openNonceStore(ctx, s.cfg, s.db, s.now); err != nil {
		return err
	}
	if s.bolt == nil {
		s.recon, _ = s.nonces.(nonce.Reconciler)
	}
	s.unsettled = make(chan struct{}, 1)
	return nil
}

// closeStores closes what New opened before it failed, in Close's order; an etcd nonce store
// or vault holds a connection of its own.
func (s *Service) closeStores(ctx context.Context) {
	if s.catalog != nil {
		s.catalog.Close()
	}
	if s.nonces != nil {
		s.nonces.Close()
	}
	if s.vault != nil {
		s.vault.Close()
	}
	if s.db != nil {
		s.db.Close(ctx)
	}
}

// start recovers the executions a crash left in flight, and makes the metrics, the connect
// pages, tracing, the pins, shipping, the catalog and the receipts' sink.
func (s *Service) start(ctx context.Context, opts Options) error {
	cfg := &s.cfg
	// An execution in flight when the process died may or may not have reached the tool: it
	// becomes outcome_unknown before anything else can run, and it is never re-run.
	recovered, err := s.execs.RecoverStarted(ctx, s.now())
	if err != nil {
		return fmt.Errorf("recover in-flight executions: %w", err)
	}
	for _, x := range recovered {
		s.log.Warn("execution left in flight by a crash is outcome_unknown", "record_id", x.RecordID, "verdict_id", x.VerdictID, "server", x.Server, "tool", x.Tool)
	}
	s.newMetrics()
	if s.connect, err = s.newConnector(); err != nil {
		return err
	}
	if s.tr, err = tracing.Setup(ctx, cfg.Tracing, "executor", opts.Getenv); err != nil {
		return err
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "tracing", s.tr.Attrs()...)
	if cfg.Policy != "" {
		if err := s.loadPinsFile(cfg.Policy); err != nil {
			return err
		}
	}
	if s.shipper, err = ship.ForDaemon(ctx, cfg.Shipping, s.db, "executor", s.metrics.reg, s.log); err != nil {
		return err
	}
	for range recovered {
		s.metrics.execution(string(api.ExecutionOutcomeUnknown))
	}
	copts := upstream.CatalogOptions{Interval: cfg.RefreshInterval.Or(DefaultRefreshInterval)}
	// The stdio servers' stderr lines are logged through it too, each with its server.
	copts.Client.Logger = s.log
	// A server's redirect is its answer, never followed with the call and the configured
	// headers (noRedirects). The executor's calls go through this client whatever it is (only
	// the gateway's pass-through calls go around it), so setting it costs nothing. Its
	// requests to a plain http server are written and read on the caller's goroutine, sent
	// once as net/http's Transport sends them and traced to their connection as it traces
	// them (package plainhttp): a call is told from one that never left all the same.
	s.upstreamConns = plainhttp.NewTransport(http.DefaultTransport)
	copts.Client.HTTPClient = &http.Client{CheckRedirect: noRedirects, Transport: s.upstreamConns}
	if s.catalog, err = upstream.NewCatalog(cfg.Servers, copts); err != nil {
		return err
	}
	s.metrics.reg.MustRegister(metricx.Readiness("executor",
		"1 while the executor takes verdicts (as /readyz answers), 0 while not.", s.readinessState))
	if cfg.Verdictd != nil {
		if s.sink, err = newReceiptSink(*cfg.Verdictd, opts.HTTPClient, s.log); err != nil {
			return err
		}
	}
	return nil
}

// newMetrics makes the executor's metrics over its stores.
func (s *Service) newMetrics() {
	// The bbolt store's count is a field of its bucket, read live; a shared store's is a range
	// read in etcd, which scrapes must not be able to repeat at will.
	nonceLen := s.nonces.Len
	if s.bolt == nil {
		nonceLen = (&cachedCount{count: s.nonces.Len, now: s.now, interval: nonceCountInterval}).Len
	}
	pending := func() int { return 0 }
	if s.recon != nil {
		pending = s.recon.Pending
	}
	s.metrics = newMetrics(nonceLen, pending)
	if len(s.users) > 0 {
		s.metrics.userGauges(s.userConns.open, s.tokens.len)
	}
}

// openNonceStore opens the configured nonce store. The bbolt store lives in db and is returned
// twice: as the Store, and as the *nonce.Bolt that lets a consume and the started record share
// one commit.
func openNonceStore(ctx context.Context, cfg Config, db *store.DB, now func() time.Time) (nonce.Store, *nonce.Bolt, error) {
	skew := cfg.ClockSkew.Or(DefaultClockSkew)
	if cfg.NonceStore.Kind != NonceStoreEtcd {
		b, err := nonce.NewBolt(db, nonce.BoltOptions{Skew: skew, Now: now})
		if err != nil {
			return nil, nil, err
		}
		return b, b, nil
	}
	opts := cfg.NonceStore.etcdOptions()
	opts.Skew, opts.Owner, opts.Now = skew, cfg.ExecutorID, now
	var err error
	// Replicas share the executor id; the records file is this process's own.
	if opts.Instance, err = db.FileID(ctx); err != nil {
		return nil, nil, err
	}
	if opts.Password, err = cfg.NonceStore.ReadPassword("nonce_store"); err != nil {
		return nil, nil, err
	}
	e, err := nonce.NewEtcd(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("nonce_store: %w", err)
	}
	return e, nil, nil
}

// consumeAndStart consumes the verdict's nonce and records rec as started; on error neither
// the call nor its outcome may happen.
//
// With the bbolt store both go into one commit: a verdict is either unused and unrecorded, or
// consumed with its execution on record. A shared store cannot join the record file's commit,
// so with etcd the nonce is consumed first and the started record written after. If that
// write fails, the verdict stays consumed and is refused (as nonce_store_unavailable, like a
// failed bbolt commit): it is never run without a record, and never run twice; the store is
// told the consume was abandoned, and the reconciler records it as consumed_without_start. A
// consume whose answer was lost is kept by the store for the reconciler likewise. A verdict
// consumed in etcd is recorded even if its caller has hung up meanwhile.
func (s *Service) consumeAndStart(ctx context.Context, jti string, expires time.Time, rec *api.ExecutionRecord) error {
	if s.bolt != nil {
		return s.db.Update(ctx, func(tx *bolt.Tx) error {
			if err := s.bolt.ConsumeTx(tx, jti, expires); err != nil {
				return err
			}
			return s.execs.StartTx(tx, rec)
		})
	}
	if err := s.nonces.Consume(ctx, jti, expires); err != nil {
		return err
	}
	// A crash here leaves the verdict consumed with no record: the next start finds it.
	s.faultAfterConsume(ctx, jti)
	if err := s.execs.Start(context.WithoutCancel(ctx), rec); err != nil {
		if s.recon != nil {
			s.recon.Abandon(jti, expires)
		}
		return fmt.Errorf("record the start of an execution whose verdict is consumed: %w", err)
	}
	return nil
}

// wakeReconciler asks the reconciler to settle the consumes given up on, without waiting.
func (s *Service) wakeReconciler() {
	select {
	case s.unsettled <- struct{}{}:
	default:
	}
}

// Run keeps the upstream catalog, the issuers' key sets and the nonce store fresh until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.catalog.Run(ctx) })
	if s.bolt != nil {
		// Collect expired nonces; etcd deletes its own when their leases run out.
		wg.Go(func() { _ = s.bolt.Run(ctx) })
	}
	for _, r := range s.remotes {
		wg.Go(func() {
			r.Run(ctx, func(err error) {
				s.log.Warn("jwks refresh failed; keeping the last good set", "jwks", r.Location(), "error", err)
			})
		})
	}
	if s.sink != nil {
		wg.Go(func() { s.sink.run(ctx) })
	}
	if len(s.users) > 0 {
		wg.Go(func() { s.runUserConns(ctx) })
	}
	if s.recon != nil {
		wg.Go(func() { s.reconcile(ctx, s.recon) })
	}
	if s.shipper != nil {
		wg.Go(func() { s.shipper.Run(ctx) })
	}
	if s.cfg.Policy != "" {
		wg.Go(func() {
			daemon.WatchFile(ctx, s.cfg.Policy, s.cfg.PolicyPoll.Or(DefaultPolicyPoll), s.pinsHash, s.loadPins)
		})
	}
	wg.Wait()
	return ctx.Err()
}

// Refresh lists every upstream's tools now.
func (s *Service) Refresh(ctx context.Context) error { return s.catalog.Refresh(ctx) }

// Handler returns the executor's HTTP API (docs/api.md).
func (s *Service) Handler() http.Handler {
	mux := httpx.NewServeMux() // any other path or method: 404 not_found
	mux.HandleFunc("POST /v1/execute", s.handleExecute)
	mux.HandleFunc("POST /v1/read", s.handleRead)
	mux.HandleFunc("GET /v1/executions/{id}", s.adminOnly(s.handleGetExecution))
	mux.HandleFunc("GET /v1/executions", s.adminOnly(s.handleListExecutions))
	mux.HandleFunc("GET /v1/catalog", s.adminOnly(s.handleCatalog))
	mux.HandleFunc("GET /v1/grants", s.adminOnly(s.handleListGrants))
	mux.HandleFunc("DELETE /v1/grants/{server}", s.adminOnly(s.handleRevokeGrant))
	mux.HandleFunc("GET /v1/connections/{server}", s.handleConnection)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.handleReady)
	if s.connect != nil {
		s.connect.routes(mux)
	}
	return mux
}

// Close waits for in-flight executions to finish and be recorded (or for ctx to end), then
// closes the upstream connections and the store.
func (s *Service) Close(ctx context.Context) error {
	if !s.inflight.Drain(ctx) {
		s.log.Error("shutdown deadline passed with executions in flight; they stay started and become outcome_unknown at restart")
	}
	if s.sink != nil {
		s.sink.close()
	}
	cerr := errors.Join(s.catalog.Close(), s.userConns.close())
	s.userTransport.CloseIdleConnections()
	if s.upstreamConns != nil {
		s.upstreamConns.CloseIdleConnections()
	}
	nerr := s.nonces.Close()
	var verr error
	if s.vault != nil {
		verr = s.vault.Close()
	}
	derr := s.db.Close(ctx)
	st := s.db.Stats()
	s.log.Info("store closed", "commits", st.Commits, "updates", st.Updates)
	if err := s.tr.Shutdown(ctx); err != nil {
		s.log.Warn("tracing: spans not exported at shutdown", "error", err.Error())
	}
	return errors.Join(cerr, nerr, verr, derr)
}

// readiness says whether the executor takes verdicts, and if not why: its catalog's readiness
// (upstream.Catalog.Readiness: the first listing of every server has been tried, and at least
// one server is listed now) and, with a shared nonce store, the consumes of earlier runs
// reconciled. It also names the servers whose tools are not listed now: their verdicts are
// answered catalog_unavailable.
func (s *Service) readiness() (ready bool, problems, unlisted []string) {
	r := s.catalog.Readiness(nil)
	problems = r.Problems
	// Until then, a verdict an earlier run consumed and never started answers replayed.
	if s.recon != nil && !s.reconciled.Load() {
		problems = append(problems, "the nonce store's consumes by earlier runs are not yet reconciled")
	}
	return r.Ready && len(problems) == 0, problems, r.Unlisted
}

// readinessState is what executor_ready and executor_upstream_listed show.
func (s *Service) readinessState() metricx.ReadinessState {
	ready, _, _ := s.readiness()
	return metricx.ReadinessState{Ready: ready, Listed: s.catalog.Listed(nil)}
}

func (s *Service) handleReady(w http.ResponseWriter, r *http.Request) {
	// Anyone may ask, so the answer names servers only: a listing error quotes the server's
	// URL, which can carry a credential. The errors are on /v1/catalog, for the admin.
	ready, problems, unlisted := s.readiness()
	if !ready && len(problems) == 0 {
		problems = []string{"catalog not ready"}
	}
	httpx.WriteReadiness(w, ready, problems, unlisted, nil)
}

func (s *Service) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.admin.Require(w, r, "executor-admin", "the admin token is required", "the admin token is not accepted") {
			h(w, r)
		}
	}
}

func (s *Service) handleGetExecution(w http.ResponseWriter, r *http.Request) {
	x, err := s.execs.Get(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		httpx.WriteError(w, httpx.Errorf(http.StatusNotFound, api.CodeNotFound, "no execution record %q", r.PathValue("id")))
		return
	}
	if err != nil {
		s.log.Error("read execution record", "error", err)
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, x)
}

// handleListExecutions streams records as JSONL: ?since=RFC3339 (default: all), ?mask=1 masks
// the verdict token, ?verdict_id=J selects one verdict's records. A complete export ends with
// the api.ExportCompleteTrailer and api.ExportRecordsTrailer trailers; one that fails after
// its first bytes is aborted, so that no client takes it for a whole, shorter export.
func (s *Service) handleListExecutions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, err := store.QuerySince(q)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	mask := store.QueryMask(q)
	export := func(out io.Writer) (int, error) {
		return s.execs.ExportJSONLCount(r.Context(), out, since, mask)
	}
	if jti := q.Get("verdict_id"); jti != "" {
		export = func(out io.Writer) (int, error) {
			xs, err := s.execs.ByVerdict(r.Context(), jti)
			if err != nil {
				return 0, err
			}
			for i, x := range xs {
				if err := writeLine(out, x, mask); err != nil {
					return i, err
				}
			}
			return len(xs), nil
		}
	}
	store.ServeJSONL(w, s.log, "execution export ended early", export)
}

func (s *Service) handleCatalog(w http.ResponseWriter, r *http.Request) {
	type tool struct {
		Server string `json:"server"`
		Name   string `json:"name"`
		Digest string `json:"tsd,omitempty"`
		Error  string `json:"error,omitempty"`
	}
	type server struct {
		ID       string    `json:"id"`
		Listed   bool      `json:"listed"`
		ListedAt time.Time `json:"listed_at,omitzero"`
		Error    string    `json:"error,omitempty"`
		// Credential is whose authority a call of the server carries: shared,
		// token_exchange or user_grant (docs/credentials.md).
		Credential string `json:"credential"`
		Tools      []tool `json:"tools"`
	}
	var out []server
	for _, st := range s.catalog.Status() {
		sv := server{ID: st.ID, Listed: st.Listed, ListedAt: st.ListedAt, Credential: s.cfg.mode(st.ID)}
		if st.Err != nil {
			sv.Error = st.Err.Error()
		}
		tools, _ := s.catalog.Tools(st.ID)
		for _, t := range tools {
			tt := tool{Server: t.Server, Name: t.Name, Digest: t.Digest}
			if t.Err != nil {
				tt.Error = t.Err.Error()
			}
			sv.Tools = append(sv.Tools, tt)
		}
		out = append(out, sv)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"servers": out})
}
