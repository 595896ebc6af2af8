package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/upstreamauth"
	"github.com/verdictgate/verdict/vault"
)

// unknownExpiry is how long a grant's access token whose expiry its authorization server did
// not say is taken to serve past the call's margin before the vault is read again: a token
// that no longer serves is the server's to refuse (the call fails, and the user connects
// again).
const unknownExpiry = time.Minute

// granter gives the accounts of one user_grant server their own grant's access token, from the
// vault, refreshed at the server's authorization server when it would expire during the call.
// A principal without a grant, or whose grant cannot be used or was revoked, is refused with
// the way to connect one; nothing else stands in for it.
type granter struct {
	id       string
	cfg      Credential
	resource string // the resource the grants are for: the entry's, or the server's url
	vault    *vault.Vault
	connect  string       // the page where a user connects an account at the server
	callback string       // the connect pages' redirect URI at the authorization server
	clientID string       // the URL of the client ID metadata document (metadata_document)
	client   *http.Client // to the authorization server: no redirects, bounded
	secret   string       // a configured confidential client's
	now      func() time.Time

	mu   sync.Mutex
	as   *upstreamauth.Server // discovered, kept until discoveryTTL has passed
	asAt time.Time
	// refreshing serialises the refreshes of one principal's grant: a rotated refresh token
	// used twice reads as stolen to many authorization servers, which then revoke the grant.
	refreshing [64]sync.Mutex
}

// discoveryTTL is how long a discovered authorization server is used before it is asked again.
const discoveryTTL = time.Hour

// loadVaultKeys loads the vault section's keys, none without one. A key file missing,
// unreadable, readable by others or malformed stops the executor.
func loadVaultKeys(v *VaultConfig) ([]*vault.Key, error) {
	if v == nil {
		return nil, nil
	}
	var ks []*vault.Key
	for i, f := range v.KeyFiles {
		k, err := vault.LoadKey(f)
		if err != nil {
			return nil, fmt.Errorf("vault.key_files[%d]: %w (%s)", i, err, vault.KeyHint(f))
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// openEtcdVault opens the grants kept in the nonce store's etcd, through its connection keys and
// under its prefix.
func openEtcdVault(ctx context.Context, cfg *Config, keys []*vault.Key, opts vault.Options) (*vault.Vault, error) {
	ns := cfg.NonceStore
	eo := vault.EtcdOptions{Endpoints: ns.Endpoints, Prefix: ns.Prefix, TLS: ns.TLS, Username: ns.Username,
		DialTimeout: ns.DialTimeout.D(), RequestTimeout: ns.RequestTimeout.D()}
	var err error
	if eo.Password, err = ns.ReadPassword("nonce_store"); err != nil {
		return nil, err
	}
	return vault.NewEtcd(ctx, eo, keys, opts)
}

// OpenVault opens the grants cfg's vault section names, for a command run beside the
// executor (executor vault rekey): the etcd vault as the executors share it, or the bbolt vault
// in data_dir's file, which the executor must not hold open meanwhile.
func OpenVault(ctx context.Context, cfg *Config) (*vault.Vault, error) {
	if cfg.Vault == nil {
		return nil, errors.New("the config has no vault section")
	}
	keys, err := loadVaultKeys(cfg.Vault)
	if err != nil {
		return nil, err
	}
	opts := vault.Options{MaxPerPrincipal: cfg.Vault.MaxGrantsPerPrincipal}
	if cfg.vaultStore() == NonceStoreEtcd {
		return openEtcdVault(ctx, cfg, keys, opts)
	}
	return vault.Open(filepath.Join(cfg.DataDir, DBFile), keys, opts)
}

// openVault opens the grants with keys where the config keeps them (Config.vaultStore): in
// the executor's file, or in the nonce store's etcd, through its connection keys and under its
// prefix; nothing without keys.
func (s *Service) openVault(ctx context.Context, keys []*vault.Key) error {
	if len(keys) == 0 {
		return nil
	}
	opts := vault.Options{MaxPerPrincipal: s.cfg.Vault.MaxGrantsPerPrincipal, Now: s.now}
	var err error
	if s.cfg.vaultStore() == NonceStoreEtcd {
		s.vault, err = openEtcdVault(ctx, &s.cfg, keys, opts)
	} else {
		s.vault, err = vault.New(s.db, keys, opts)
	}
	return err
}

// newGranter makes the granter of the user_grant entry cr of server id, whose configured
// client's secret (if any) is secret, over the open vault.
func (s *Service) newGranter(id string, cr Credential, secret string) tokenSource {
	base := s.cfg.Connect.PublicURL
	return &granter{id: id, cfg: cr, resource: cmp.Or(cr.Resource, s.cfg.Servers[id].URL), connect: connectURL(base, id),
		callback: connectURL(base, "callback"), clientID: connectURL(base, "clients", id),
		vault: s.vault, secret: secret, client: &http.Client{Timeout: connectTimeout, CheckRedirect: noRedirects}, now: s.now}
}

// connectURL is the connect page under base named by elems, each one path segment: the page
// where a user connects an account at a server (connectURL(base, server)), the callbacks, a
// client's metadata document. The connect pages' routes (connector.routes) are these paths.
func connectURL(base string, elems ...string) string {
	u := strings.TrimSuffix(base, "/") + "/connect"
	for _, e := range elems {
		u += "/" + url.PathEscape(e)
	}
	return u
}

// fetch returns the access token of key's principal's grant for the server.
func (g *granter) fetch(ctx context.Context, key credKey, _ string, now time.Time, margin time.Duration) (heldToken, error) {
	gr, err := g.vault.Get(ctx, key.principal, g.id)
	if err != nil {
		return heldToken{}, g.unread(err)
	}
	switch {
	case gr.Expiry.IsZero():
		return heldToken{token: gr.AccessToken, exp: now.Add(margin + unknownExpiry), grant: gr.ID}, nil
	case now.Add(margin).Before(gr.Expiry):
		return heldToken{token: gr.AccessToken, exp: gr.Expiry, grant: gr.ID}, nil
	case gr.RefreshToken == "":
		return heldToken{}, g.connectAgain("the grant's access token expires before the call could end, and there is no refresh token",
			"the user's grant for the tool's server has expired; connect the account again at "+g.connect+"; nothing was spent")
	}
	gr, err = g.refresh(ctx, gr, margin)
	if err != nil {
		return heldToken{}, err
	}
	return heldToken{token: gr.AccessToken, exp: cmp.Or(gr.Expiry, now.Add(margin+unknownExpiry)), grant: gr.ID}, nil
}

// unread is the refusal of a call whose grant Get did not return: connect one when there is
// none or it cannot be used, send again later when the vault could not be read (its etcd
// down, vault.ErrUnavailable).
func (g *granter) unread(err error) *credError {
	switch {
	case errors.Is(err, vault.ErrNoGrant):
		return g.connectAgain("no grant of the principal for the server",
			"the user has not connected an account at the tool's server; connect one at "+g.connect+" and send the verdict again; nothing was spent")
	case errors.Is(err, vault.ErrTampered), errors.Is(err, vault.ErrForeign):
		ce := g.connectAgain("the stored grant cannot be used: "+err.Error(),
			"the user's stored grant for the tool's server cannot be used; connect the account again at "+g.connect+"; nothing was spent")
		ce.tampered = true
		return ce
	}
	return &credError{status: http.StatusServiceUnavailable, reason: api.ExecutionReasonCredentialUnavailable,
		msg: "the vault could not be read: " + err.Error(), user: "the user's grant for the tool's server could not be read now; nothing was spent, send it again"}
}

// refresh refreshes gr at the authorization server that issued it and stores what comes back.
// One refresh of a principal's grant runs at a time in this executor, and one that finds the
// grant refreshed by another while it waited takes that one. Executors sharing the vault
// (etcd) can still refresh one grant at once: what comes back is stored only over the grant
// that was refreshed (PutIfUnchanged), and removed only if that grant is still the one stored
// (RevokeIfUnchanged), so the one that comes second takes what the first stored.
func (g *granter) refresh(ctx context.Context, gr vault.Grant, margin time.Duration) (vault.Grant, error) {
	h := fnv.New32a()
	h.Write([]byte(gr.Principal))
	lock := &g.refreshing[h.Sum32()%uint32(len(g.refreshing))]
	lock.Lock()
	defer lock.Unlock()
	cur, err := g.vault.Get(ctx, gr.Principal, g.id)
	if err != nil {
		// Revoked while this refresh waited, or no longer readable: as a first read is.
		return vault.Grant{}, g.unread(err)
	}
	if cur.ID != gr.ID || cur.RefreshToken != gr.RefreshToken {
		if g.serves(cur, margin) {
			return cur, nil
		}
		gr = cur
	}
	flow, err := g.flowOf(ctx, gr)
	if err != nil {
		return vault.Grant{}, g.unreachable("no flow to refresh the grant with: " + err.Error())
	}
	tok, err := flow.Refresh(ctx, g.client, gr.RefreshToken)
	switch {
	case errors.Is(err, upstreamauth.ErrRevoked):
		// The grant is gone at the authorization server: it is gone here too, and the user
		// connects again; unless another executor refreshed it first, with the refresh token
		// this one was refused.
		switch rerr := g.vault.RevokeIfUnchanged(ctx, gr); {
		case errors.Is(rerr, vault.ErrChanged):
			return g.stored(ctx, gr, margin)
		case rerr != nil && !errors.Is(rerr, vault.ErrNoGrant):
			return vault.Grant{}, g.unreachable("the revoked grant could not be removed: " + rerr.Error())
		}
		return vault.Grant{}, g.connectAgain("the authorization server refused the grant's refresh token: "+err.Error(),
			"the user's grant for the tool's server was revoked or has expired at its authorization server; connect the account again at "+g.connect+"; nothing was spent")
	case err != nil:
		return vault.Grant{}, g.unreachable("refresh: " + err.Error())
	}
	next := withToken(gr, tok)
	switch err := g.vault.PutIfUnchanged(ctx, gr, next); {
	case errors.Is(err, vault.ErrChanged):
		return g.stored(ctx, gr, margin)
	case errors.Is(err, vault.ErrNoGrant):
		// Revoked while it was refreshed: it stays revoked.
		return vault.Grant{}, g.connectAgain("the grant was revoked while it was refreshed",
			"the user's grant for the tool's server was revoked; connect the account again at "+g.connect+"; nothing was spent")
	case err != nil:
		return vault.Grant{}, g.unreachable("the refreshed grant could not be stored: " + err.Error())
	}
	return next, nil
}

// serves reports whether gr's access token has more than margin left (or an expiry not said).
func (g *granter) serves(gr vault.Grant, margin time.Duration) bool {
	return gr.Expiry.IsZero() || g.now().Add(margin).Before(gr.Expiry)
}

// stored is the grant another executor stored over gr while this one refreshed it: the call
// takes it if it serves.
func (g *granter) stored(ctx context.Context, gr vault.Grant, margin time.Duration) (vault.Grant, error) {
	cur, err := g.vault.Get(ctx, gr.Principal, g.id)
	switch {
	case err != nil:
		return vault.Grant{}, g.unread(err)
	case !g.serves(cur, margin):
		return vault.Grant{}, g.unreachable("the grant stored by another refresh expires before the call could end")
	}
	return cur, nil
}

// unreachable is the refusal of a call whose grant could not be refreshed or read now.
func (g *granter) unreachable(why string) *credError {
	return &credError{status: http.StatusServiceUnavailable, reason: api.ExecutionReasonCredentialUnavailable, msg: why,
		user: "the user's grant for the tool's server could not be refreshed now; nothing was spent, send it again"}
}

// withToken is gr with the tokens of tok: a refresh token that was not rotated stays.
func withToken(gr vault.Grant, tok *oauth2.Token) vault.Grant {
	gr.AccessToken, gr.TokenType, gr.Expiry = tok.AccessToken, cmp.Or(tok.TokenType, "Bearer"), tok.Expiry
	if tok.RefreshToken != "" {
		gr.RefreshToken = tok.RefreshToken
	}
	if sc, ok := tok.Extra("scope").(string); ok && sc != "" {
		gr.Scopes = strings.Fields(sc)
	}
	return gr
}

// server returns the server's authorization server: the one the entry pins, or the first its
// protected resource metadata names, discovered at most once per discoveryTTL.
func (g *granter) server(ctx context.Context) (*upstreamauth.Server, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.as != nil && g.now().Sub(g.asAt) < discoveryTTL {
		return g.as, nil
	}
	res, err := upstreamauth.DiscoverResource(ctx, g.client, g.resource)
	if err != nil {
		return nil, err
	}
	issuer := g.cfg.AuthorizationServer
	switch {
	case issuer != "" && !slices.Contains(res.AuthorizationServers, issuer):
		return nil, fmt.Errorf("the server's metadata does not name the authorization server %s that the config pins", issuer)
	case issuer == "" && len(res.AuthorizationServers) == 0:
		return nil, errors.New("the server's metadata names no authorization server")
	case issuer == "":
		issuer = res.AuthorizationServers[0]
	}
	as, err := upstreamauth.DiscoverServer(ctx, g.client, issuer)
	if err != nil {
		return nil, err
	}
	g.as, g.asAt = as, g.now()
	return as, nil
}

// serverOf returns the authorization server that issued gr: the discovered one when it is,
// else that issuer's metadata (the server may have moved on; its grants stay where they were
// issued).
func (g *granter) serverOf(ctx context.Context, gr vault.Grant) (*upstreamauth.Server, error) {
	as, err := g.server(ctx)
	if err == nil && (gr.Issuer == "" || as.Issuer == gr.Issuer) {
		return as, nil
	}
	if gr.Issuer == "" {
		return nil, err
	}
	return upstreamauth.DiscoverServer(ctx, g.client, gr.Issuer)
}

// flowOf is the flow gr refreshes with: its own client, or the configured one.
func (g *granter) flowOf(ctx context.Context, gr vault.Grant) (*upstreamauth.Flow, error) {
	as, err := g.serverOf(ctx, gr)
	if err != nil {
		return nil, err
	}
	client := upstreamauth.Client{ID: gr.ClientID, Secret: gr.ClientSecret}
	if g.cfg.registration() == RegistrationConfigured || client.ID == "" {
		client = upstreamauth.Client{ID: g.cfg.ClientID, Secret: g.secret}
	}
	return &upstreamauth.Flow{Server: as, Client: client, Resource: g.resource, RedirectURL: g.callback, Scopes: g.cfg.Scopes}, nil
}

// grantFlow is a grant asked of the authorization server, waiting for its callback.
type grantFlow struct {
	flow    *upstreamauth.Flow
	pending upstreamauth.Pending
}

func (f grantFlow) state() string { return f.pending.State }

// begin starts a grant at the server's authorization server, whose answer comes back to the
// connect pages' callback: it returns where to send the browser. A client is registered for
// the grant when the entry says dynamic; with metadata_document the client id is the URL of
// the document the connect pages serve.
func (g *granter) begin(ctx context.Context) (string, grantFlow, error) {
	as, err := g.server(ctx)
	if err != nil {
		return "", grantFlow{}, err
	}
	var client upstreamauth.Client
	switch g.cfg.registration() {
	case RegistrationConfigured:
		client = upstreamauth.Client{ID: g.cfg.ClientID, Secret: g.secret}
	case RegistrationMetadataDocument:
		if client, err = upstreamauth.MetadataClient(as, g.clientID); err != nil {
			return "", grantFlow{}, err
		}
	case RegistrationDynamic:
		if client, err = upstreamauth.Register(ctx, g.client, as, g.registration()); err != nil {
			return "", grantFlow{}, err
		}
	}
	flow := &upstreamauth.Flow{Server: as, Client: client, Resource: g.resource, RedirectURL: g.callback, Scopes: g.cfg.Scopes}
	if err := flow.Check(); err != nil {
		return "", grantFlow{}, err
	}
	authURL, pending := flow.Start()
	return authURL, grantFlow{flow: flow, pending: pending}, nil
}

// clientName is the name the executor's clients are registered with: what the authorization
// server shows the user who consents.
const clientName = "verdict executor"

// finish redeems the callback's code and returns the grant of principal it gives.
func (g *granter) finish(ctx context.Context, f grantFlow, principal string, callback url.Values) (vault.Grant, error) {
	tok, err := f.flow.Exchange(ctx, g.client, f.pending, callback)
	if err != nil {
		return vault.Grant{}, err
	}
	gr := withToken(vault.Grant{Principal: principal, Server: g.id, Kind: vault.KindUserGrant, Issuer: f.flow.Server.Issuer,
		Scopes: f.flow.GrantedScopes(tok)}, tok)
	if g.cfg.registration() == RegistrationDynamic {
		gr.ClientID, gr.ClientSecret = f.flow.Client.ID, f.flow.Client.Secret
	}
	return gr, nil
}

// registration is the client the executor registers, or describes in its metadata document.
func (g *granter) registration() upstreamauth.RegistrationRequest {
	return upstreamauth.RegistrationRequest{ClientName: clientName, RedirectURIs: []string{g.callback}}
}

// metadataDocument is the client ID metadata document of the executor's client (g.clientID).
func (g *granter) metadataDocument() ([]byte, error) {
	return upstreamauth.MetadataDocument(g.clientID, g.registration())
}

// connectAgain is the refusal of a principal who must connect an account at the server first.
func (g *granter) connectAgain(why, words string) *credError {
	return &credError{status: http.StatusForbidden, reason: api.ExecutionReasonCredentialRequired, msg: why, user: words, connect: g.connect}
}
