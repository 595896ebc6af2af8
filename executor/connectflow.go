package executor

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/flows"
)

// Bounds of the connect pages' flows in progress (a sign-in, then a grant): each may take
// connectTTL at the providers, and at most maxConnectFlows are held, maxConnectPerClient from
// one client address (flows.ClientOf).
const (
	connectTTL          = 10 * time.Minute
	maxConnectFlows     = 1024
	maxConnectPerClient = 16
	// connectTimeout bounds each request the connect pages make of a provider.
	connectTimeout = 15 * time.Second
)

// The connect pages' problem codes: what a page that ends a flow without a grant says.
const (
	connectNoSuchServer = "no_such_server" // the server is no user_grant server of this executor
	connectBusy         = "too_many_flows" // the flows table, or the client's share of it, is full
	connectExpired      = "flow_expired"   // no flow of this browser is waiting for this answer
	connectSignInFailed = "sign_in_failed" // the identity provider's sign-in did not complete
	connectGrantFailed  = "grant_failed"   // the server's authorization server gave no grant
	connectUnavailable  = "provider_unavailable"
	connectStoreFailed  = "grant_not_stored" // the vault refused the grant (too many, closed)
)

// A connectFlow is what a redirect back to the connect pages needs: after the sign-in (leg
// signIn) the principal is known, and the grant is asked for them alone (leg grant).
type connectFlow struct {
	server string
	leg    int
	// The sign-in at the identity provider.
	nonce, verifier string
	// The grant at the server's authorization server, once signed in.
	principal string
	grant     grantFlow
}

const (
	legSignIn = iota + 1
	legGrant
)

// connector serves the connect pages: a user signs in at the organisation's identity provider
// (so that the grant is stored for the one who gives it, and never for whoever sent them the
// link), then consents at the server's authorization server; the grant is kept in the vault
// for that principal.
type connector struct {
	s      *Service
	base   string // connect.public_url
	prefix string // the path the pages are under: base's, and /connect
	secure bool   // the cookie is sent over https alone
	client *http.Client
	flows  *flows.Table[connectFlow]
	claim  string // the sign-in issuer's principal claim, as verdictd names principals
	pages  *template.Template
	signIn SignIn
	// provider is the sign-in's client at the identity provider, discovered on first use:
	// an identity provider down at start delays connections, not the executor.
	provider *flows.Provider
}

// connectCookie names the cookie that binds a flow to the browser that started it.
const connectCookie = "verdict_connect"

// newConnector makes the connect pages of cfg's connect section; nil without one.
func (s *Service) newConnector() (*connector, error) {
	cn := s.cfg.Connect
	if cn == nil {
		return nil, nil
	}
	base, err := url.Parse(cn.PublicURL)
	if err != nil {
		return nil, fmt.Errorf("connect.public_url: %w", err)
	}
	c := &connector{
		s: s, base: cn.PublicURL, prefix: strings.TrimSuffix(base.Path, "/") + "/connect", secure: base.Scheme == "https",
		client: &http.Client{Timeout: connectTimeout, CheckRedirect: noRedirects},
		flows:  flows.New[connectFlow](s.now, connectTTL, maxConnectFlows, maxConnectPerClient),
		claim:  identity.DefaultPrincipalClaim, pages: connectPages, signIn: cn.SignIn,
	}
	for _, is := range s.cfg.Identity.Issuers {
		if is.Issuer == cn.SignIn.Issuer && is.PrincipalClaim != "" {
			c.claim = is.PrincipalClaim
		}
	}
	var secret string
	if cn.SignIn.ClientSecretFile != "" {
		if secret, err = readSecretAt("connect.sign_in.client_secret_file", cn.SignIn.ClientSecretFile); err != nil {
			return nil, err
		}
	}
	c.provider = &flows.Provider{Issuer: cn.SignIn.Issuer, ClientID: cn.SignIn.ClientID, Secret: secret,
		RedirectURL: connectURL(c.base, "signed-in"), Client: c.client}
	return c, nil
}

// routes adds the connect pages to mux.
func (c *connector) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+c.prefix+"/signed-in", c.handleSignedIn)
	mux.HandleFunc("GET "+c.prefix+"/callback", c.handleCallback)
	mux.HandleFunc("GET "+c.prefix+"/clients/{server}", c.handleClientMetadata)
	mux.HandleFunc("GET "+c.prefix+"/{server}", c.handleStart)
}

// handleStart begins connecting an account at the server: the browser signs in at the
// identity provider first.
func (c *connector) handleStart(w http.ResponseWriter, r *http.Request) {
	server := r.PathValue("server")
	x := c.s.users[server]
	if x == nil || x.cfg.Mode != api.CredentialUserGrant {
		c.problem(w, http.StatusNotFound, connectNoSuchServer, "")
		return
	}
	oc, _, err := c.provider.Get(r.Context())
	if err != nil {
		c.s.log.Warn("connect: sign-in provider", "error", err.Error())
		c.problem(w, http.StatusServiceUnavailable, connectUnavailable, "")
		return
	}
	state := rand.Text() + rand.Text()
	fl := connectFlow{server: server, leg: legSignIn, nonce: rand.Text() + rand.Text(), verifier: oauth2.GenerateVerifier()}
	c.hold(w, r, state, fl, oc.AuthCodeURL(state, oidc.Nonce(fl.nonce), oauth2.S256ChallengeOption(fl.verifier)))
}

// hold keeps the flow v under state, in place of the flow this browser's cookie named, sets
// the cookie to state and sends the browser to next; when the table is full it answers so.
func (c *connector) hold(w http.ResponseWriter, r *http.Request, state string, v connectFlow, next string) {
	f := flows.Flow[connectFlow]{State: state, Started: c.s.now(), Client: flows.ClientOf(r.RemoteAddr), Value: v}
	if err := c.flows.Add(f, c.cookie(r)); err != nil {
		c.problem(w, http.StatusTooManyRequests, connectBusy, "")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: connectCookie, Value: f.State, Path: c.prefix + "/", MaxAge: int(connectTTL / time.Second),
		Secure: c.secure, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// cookie is the state of the flow this browser started, "" without one.
func (c *connector) cookie(r *http.Request) string {
	k, err := r.Cookie(connectCookie)
	if err != nil {
		return ""
	}
	return k.Value
}

// take returns the flow of leg the redirect r answers: its state must be the one this browser's
// cookie holds (a flow started in another browser, a link someone sent, does not finish here),
// and the flow young enough. The cookie is spent either way.
func (c *connector) take(w http.ResponseWriter, r *http.Request, leg int) (connectFlow, bool) {
	state := r.URL.Query().Get("state")
	cookie := c.cookie(r)
	http.SetCookie(w, &http.Cookie{Name: connectCookie, Value: "", Path: c.prefix + "/", MaxAge: -1, Secure: c.secure, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	if state == "" || cookie == "" || subtle.ConstantTimeCompare([]byte(state), []byte(cookie)) != 1 {
		c.problem(w, http.StatusBadRequest, connectExpired, "")
		return connectFlow{}, false
	}
	f, ok := c.flows.Take(state)
	if !ok || f.Value.leg != leg {
		c.problem(w, http.StatusBadRequest, connectExpired, "")
		return connectFlow{}, false
	}
	return f.Value, true
}

// handleSignedIn finishes the sign-in: the code is redeemed with the PKCE verifier, the ID
// token must verify and carry the flow's nonce, and its principal claim names the principal the
// grant will be stored for. The browser goes on to the server's authorization server.
func (c *connector) handleSignedIn(w http.ResponseWriter, r *http.Request) {
	fl, ok := c.take(w, r, legSignIn)
	if !ok {
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		c.problem(w, http.StatusBadRequest, connectSignInFailed, fmt.Sprintf("the identity provider answered %.40q", e))
		return
	}
	principal, err := c.signedIn(r.Context(), q.Get("code"), fl)
	if err != nil {
		c.s.log.Warn("connect: sign-in", "server", fl.server, "error", err.Error())
		c.problem(w, http.StatusBadRequest, connectSignInFailed, "")
		return
	}
	x := c.s.users[fl.server]
	g, _ := x.source.(*granter)
	if g == nil {
		c.problem(w, http.StatusNotFound, connectNoSuchServer, "")
		return
	}
	authURL, gf, err := g.begin(r.Context())
	if err != nil {
		c.s.log.Warn("connect: authorization server", "server", fl.server, "principal", principal, "error", err.Error())
		c.problem(w, http.StatusServiceUnavailable, connectUnavailable, "")
		return
	}
	c.hold(w, r, gf.state(), connectFlow{server: fl.server, leg: legGrant, principal: principal, grant: gf}, authURL)
}

// signedIn redeems the sign-in's code and returns the principal its ID token names.
func (c *connector) signedIn(ctx context.Context, code string, fl connectFlow) (string, error) {
	oc, verifier, err := c.provider.Get(ctx)
	if err != nil {
		return "", err
	}
	ctx = oidc.ClientContext(ctx, c.client)
	tok, err := oc.Exchange(ctx, code, oauth2.VerifierOption(fl.verifier))
	if err != nil {
		return "", fmt.Errorf("code exchange: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", errors.New("no ID token")
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		return "", fmt.Errorf("ID token: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(fl.nonce)) != 1 {
		return "", errors.New("the ID token does not carry this sign-in's nonce")
	}
	subject := idt.Subject
	if c.claim != identity.DefaultPrincipalClaim {
		var all map[string]any
		if err := idt.Claims(&all); err != nil {
			return "", fmt.Errorf("ID token claims: %w", err)
		}
		subject, _ = all[c.claim].(string)
	}
	if subject == "" {
		return "", fmt.Errorf("the ID token has no string %s claim", c.claim)
	}
	return identity.PrincipalID(c.signIn.Issuer, subject), nil
}

// handleCallback finishes the grant: the code is redeemed at the server's authorization server
// and the grant stored in the vault for the principal who signed in.
func (c *connector) handleCallback(w http.ResponseWriter, r *http.Request) {
	fl, ok := c.take(w, r, legGrant)
	if !ok {
		return
	}
	x := c.s.users[fl.server]
	g, _ := x.source.(*granter)
	gr, err := g.finish(r.Context(), fl.grant, fl.principal, r.URL.Query())
	if err != nil {
		c.s.log.Warn("connect: grant", "server", fl.server, "principal", fl.principal, "error", err.Error())
		c.problem(w, http.StatusBadRequest, connectGrantFailed, "")
		return
	}
	if err := c.s.vault.Put(r.Context(), gr); err != nil {
		c.s.log.Error("connect: store grant", "server", fl.server, "principal", fl.principal, "error", err.Error())
		c.problem(w, http.StatusServiceUnavailable, connectStoreFailed, "")
		return
	}
	// The next call takes the new grant: the token kept from the one before is dropped.
	c.s.tokens.drop(fl.principal, fl.server)
	c.s.grantNews.notify()
	c.s.metrics.grantsConnected.WithLabelValues(fl.server).Inc()
	// The vault gives the grant its id (or keeps the one the pair had): read back, so the log
	// line names the grant the records will name in credential_grant.
	if stored, err := c.s.vault.Get(r.Context(), fl.principal, fl.server); err == nil {
		gr.ID = stored.ID
	}
	c.s.log.Info("account connected", "server", fl.server, "principal", fl.principal, "grant_id", gr.ID)
	c.page(w, http.StatusOK, "connected", map[string]string{"Server": fl.server})
}

// handleClientMetadata serves the client ID metadata document of a server whose registration
// is metadata_document: the client id is this page's URL.
func (c *connector) handleClientMetadata(w http.ResponseWriter, r *http.Request) {
	server := r.PathValue("server")
	x := c.s.users[server]
	if x == nil || x.cfg.Mode != api.CredentialUserGrant || x.cfg.registration() != RegistrationMetadataDocument {
		http.NotFound(w, r)
		return
	}
	g := x.source.(*granter)
	b, err := g.metadataDocument()
	if err != nil {
		http.Error(w, "metadata", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
}

// connectWords are what each problem page says to the person at the browser.
var connectWords = map[string]string{
	connectNoSuchServer: "There is no such server to connect an account at.",
	connectBusy:         "Too many connections are being made right now. Try again in a few minutes.",
	connectExpired:      "This connection was not started in this browser, or took too long. Start again from the link you were given.",
	connectSignInFailed: "The sign-in did not complete. Start again from the link you were given.",
	connectGrantFailed:  "The server's authorization did not complete, so no account was connected. Start again from the link you were given.",
	connectUnavailable:  "A provider needed to connect the account cannot be reached. Try again in a few minutes.",
	connectStoreFailed:  "The account could not be connected here. Ask the operator: the executor's log says why.",
}

// problem answers with the page of code; details, when set, is shown below the words.
func (c *connector) problem(w http.ResponseWriter, status int, code, details string) {
	c.s.metrics.connectProblems.WithLabelValues(code).Inc()
	c.page(w, status, "problem", map[string]string{"Code": code, "Words": connectWords[code], "Details": details})
}

func (c *connector) page(w http.ResponseWriter, status int, name string, data map[string]string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	if err := c.pages.ExecuteTemplate(w, name, data); err != nil {
		c.s.log.LogAttrs(context.Background(), slog.LevelWarn, "connect: page", slog.String("error", err.Error()))
	}
}

// connectPages are the connect pages' HTML: a page that says the account is connected, and
// one that says why not. Neither holds a script, a form or a link elsewhere.
var connectPages = template.Must(template.New("").Parse(`
{{define "head"}}<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.}}</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em}code{font-size:90%}</style></head><body>{{end}}
{{define "connected"}}{{template "head" "Account connected"}}
<h1>Account connected</h1>
<p>Your account at <strong>{{.Server}}</strong> is connected. Calls you approve at that server now run with your own authority.</p>
<p>You can close this page and go back to your assistant.</p></body></html>{{end}}
{{define "problem"}}{{template "head" "Account not connected"}}
<h1>Account not connected</h1>
<p>{{.Words}}</p>{{if .Details}}<p><code>{{.Details}}</code></p>{{end}}
<p><small>Code: <code>{{.Code}}</code></small></p></body></html>{{end}}
`))
