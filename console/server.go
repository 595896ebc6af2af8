package console

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/internal/flows"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Options are what a Server takes besides its config.
type Options struct {
	Logger *slog.Logger
	// Now is the clock of sessions and sign-ins; nil means time.Now.
	Now func() time.Time
	// Client is the HTTP client for verdictd, the executor and the provider; nil means one
	// that follows no redirect (a redirect would carry a token elsewhere).
	Client *http.Client
}

// Server is the review console.
type Server struct {
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	client   *http.Client
	public   *url.URL
	provider *flows.Provider
	sessions *sessions
	logins   *flows.Table[login]
	api      *approvalsAPI
	// records reads verdictd's records and execs the executor's, with the read tokens.
	records, execs *client.Client
	// auditSources are the audit's sources, with the same tokens.
	verdictdSource, executorSource audit.Source
	// replaySource reads verdictd's records unmasked, for the replay page alone: a replay
	// decides from the captures, which a masked export hides.
	replaySource audit.Source
	pages        map[string]*pageTemplate
	static       fs.FS

	sessionCookie, loginCookie cookieSpec
	metrics                    *metrics
}

// New returns a console for cfg, which must have passed Validate. It reads the secret and token
// files now: a file that cannot be read stops the console from starting. With the etcd session
// store it connects to etcd without waiting for it to answer (but for an auth token): until it
// does, pages are refused session_store_unavailable and /readyz says so.
func New(ctx context.Context, cfg Config, opts Options) (*Server, error) {
	s := &Server{cfg: cfg, log: cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)), now: opts.Now, client: opts.Client}
	if s.now == nil {
		s.now = time.Now
	}
	if s.client == nil {
		s.client = &http.Client{
			Timeout: 70 * time.Second, // verdictd's longest answer is a 60s long poll
			CheckRedirect: func(req *http.Request, _ []*http.Request) error {
				return fmt.Errorf("refusing to follow a redirect to %s", req.URL.Redacted())
			},
		}
	}
	var err error
	if s.public, err = url.Parse(cfg.PublicURL); err != nil {
		return nil, fmt.Errorf("public_url: %w", err)
	}
	s.public.Path = ""
	var secret string
	if cfg.OIDC.ClientSecretFile != "" {
		if secret, err = readSecret(cfg.OIDC.ClientSecretFile); err != nil {
			return nil, fmt.Errorf("oidc.client_secret_file: %w", err)
		}
	}
	verdictdToken, err := readSecret(cfg.Verdictd.ReadTokenFile)
	if err != nil {
		return nil, fmt.Errorf("verdictd.read_token_file: %w", err)
	}
	executorToken, err := readSecret(cfg.Executor.ReadTokenFile)
	if err != nil {
		return nil, fmt.Errorf("executor.read_token_file: %w", err)
	}
	s.provider = &flows.Provider{Issuer: cfg.OIDC.Issuer, ClientID: cfg.OIDC.ClientID, Secret: secret, Scopes: cfg.OIDC.Scopes,
		RedirectURL: s.public.String() + "/callback", Client: s.client}
	store, err := openSessionStore(ctx, &cfg.Session, s.now)
	if err != nil {
		return nil, err
	}
	s.sessions = newSessions(store, s.now, cfg.Session.ttl(), cfg.Session.idle(), cfg.Session.max())
	ok := false
	defer func() {
		if !ok {
			store.close()
		}
	}()
	s.logins = flows.New[login](s.now, loginTTL, cfg.SignIn.max(), cfg.SignIn.maxPerClient())
	if s.api, err = newApprovalsAPI(cfg.Verdictd.URL, s.client); err != nil {
		return nil, err
	}
	if s.records, err = client.New(cfg.Verdictd.URL, client.WithHTTPClient(s.client), client.WithAdminToken(verdictdToken)); err != nil {
		return nil, fmt.Errorf("verdictd.url: %w", err)
	}
	if s.execs, err = client.New(cfg.Executor.URL, client.WithHTTPClient(s.client), client.WithAdminToken(executorToken)); err != nil {
		return nil, fmt.Errorf("executor.url: %w", err)
	}
	if s.verdictdSource, err = audit.ParseSource(cfg.Verdictd.URL, audit.SourceOptions{Token: verdictdToken, Client: s.client}); err != nil {
		return nil, err
	}
	if s.replaySource, err = audit.ParseSource(cfg.Verdictd.URL, audit.SourceOptions{Token: verdictdToken, Client: s.client, Unmasked: true}); err != nil {
		return nil, err
	}
	if s.executorSource, err = audit.ParseSource(cfg.Executor.URL, audit.SourceOptions{Token: executorToken, Client: s.client}); err != nil {
		return nil, err
	}
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	if s.static, err = fs.Sub(assets, "static"); err != nil {
		return nil, err
	}
	s.sessionCookie, s.loginCookie = cookieNames(s.public)
	s.metrics = newMetrics(store.len, s.logins.Len)
	ok = true
	return s, nil
}

// openSessionStore opens the store of the session section: the process's for kind memory, the
// etcd cluster's for kind etcd.
func openSessionStore(ctx context.Context, c *Session, now func() time.Time) (sessionStore, error) {
	if c.Store.Kind != SessionStoreEtcd {
		return newMemoryStore(now, c.ttl(), c.idle()), nil
	}
	pw, err := c.Store.ReadPassword("session.store")
	if err != nil {
		return nil, err
	}
	st, err := newEtcdStore(ctx, etcdStoreOptions{
		Conn: etcdx.Conn{Endpoints: c.Store.Endpoints, TLS: c.Store.TLS, Username: c.Store.Username, Password: pw,
			DialTimeout: c.Store.DialTimeout.D()},
		Prefix: c.Store.Prefix, RequestTimeout: c.Store.RequestTimeout.D(), TTL: c.ttl(), Now: now,
	})
	if err != nil {
		return nil, fmt.Errorf("session.store: %w", err)
	}
	return st, nil
}

// Handler returns the console's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page(s.handlePending))
	mux.HandleFunc("GET /approvals/{id}", s.page(s.handleApproval))
	mux.HandleFunc("POST /approvals/{id}", s.form(s.handleDecide))
	mux.HandleFunc("GET /audit", s.page(s.handleAudit))
	mux.HandleFunc("GET /audit/records/{id}", s.page(s.handleRecord))
	mux.HandleFunc("GET /replay", s.page(s.handleReplayForm))
	mux.HandleFunc("POST /replay", s.formOf(maxPolicyUpload, s.handleReplay))
	mux.HandleFunc("GET /connections", s.page(s.handleConnections))
	mux.HandleFunc("POST /connections/{server}/revoke", s.form(s.handleRevoke))
	mux.HandleFunc("GET /login", s.handleLogin)
	mux.HandleFunc("GET /callback", s.handleCallback)
	mux.HandleFunc("POST /logout", s.form(s.handleLogout))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"status":"ok"}`)
	})
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(s.static)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.renderProblem(w, r, problem{Status: http.StatusNotFound, Code: api.CodeNotFound, Words: "There is no page at this address."})
	})
	return securityHeaders(mux)
}

// Run waits for ctx to end: sessions expire as they are read (and, in etcd, with their lease),
// so nothing runs in the background.
func (s *Server) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Close closes the session store. Sessions in memory go with the process; those in etcd stay,
// for the other replicas and the next start.
func (s *Server) Close(context.Context) error { return s.sessions.store.close() }
