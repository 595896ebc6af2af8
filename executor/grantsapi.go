package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/vault"
)

// handleListGrants answers GET /v1/grants?principal=P: what may be shown of the principal's
// grants, no token. A stored grant that does not open fails the list, naming its server, so
// that it is seen and revoked.
func (s *Service) handleListGrants(w http.ResponseWriter, r *http.Request) {
	principal, ok := s.grantsRequest(w, r)
	if !ok {
		return
	}
	gs, err := s.vault.List(r.Context(), principal)
	if err != nil {
		s.log.Error("list grants", "principal", principal, "error", err.Error())
		if errors.Is(err, vault.ErrTampered) || errors.Is(err, vault.ErrForeign) {
			err = s.unreadableGrants(r.Context(), principal)
		}
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, api.Grants{Grants: gs})
}

// unreadableGrants is the refusal of a list that met a stored grant that does not open. The
// vault's error is not sent: a record moved within the file names the principal it was
// issued to, another than the one asking. The servers are found by reading the principal's
// grant at each user_grant server; one at a server no longer configured is named in the log
// alone.
func (s *Service) unreadableGrants(ctx context.Context, principal string) error {
	var servers []string
	for server, x := range s.users {
		if x.cfg.Mode != api.CredentialUserGrant {
			continue
		}
		if _, err := s.vault.Get(ctx, principal, server); errors.Is(err, vault.ErrTampered) || errors.Is(err, vault.ErrForeign) {
			servers = append(servers, fmt.Sprintf("%q", server))
		}
	}
	if len(servers) == 0 {
		return httpx.Errorf(http.StatusInternalServerError, api.CodeGrantUnreadable,
			"a stored grant of the principal does not open, at a server this executor no longer calls with user_grant (its log names it): nothing is listed; revoke it")
	}
	slices.Sort(servers)
	return httpx.Errorf(http.StatusInternalServerError, api.CodeGrantUnreadable,
		"the stored grant of the principal at %s does not open (changed, or moved within the executor's file) and is never used: nothing is listed; revoke it, or connect the account again, which replaces it",
		strings.Join(servers, ", "))
}

// handleRevokeGrant answers DELETE /v1/grants/{server}?principal=P: the grant is revoked at its
// authorization server when that offers revocation (RFC 7009), and removed here whatever that
// answers; the tokens kept in memory for it go too. A stored grant that does not open is removed.
func (s *Service) handleRevokeGrant(w http.ResponseWriter, r *http.Request) {
	principal, ok := s.grantsRequest(w, r)
	if !ok {
		return
	}
	server := r.PathValue("server")
	ctx := r.Context()
	gr, err := s.vault.Get(ctx, principal, server)
	switch {
	case errors.Is(err, vault.ErrNoGrant):
		httpx.WriteError(w, httpx.Errorf(http.StatusNotFound, api.CodeNotFound, "no grant of %q at %q", principal, server))
		return
	case errors.Is(err, vault.ErrTampered), errors.Is(err, vault.ErrForeign):
		gr = vault.Grant{Principal: principal, Server: server}
	case err != nil:
		httpx.WriteError(w, err)
		return
	}
	upstream := api.GrantUpstreamFailed
	if x := s.users[server]; x != nil && gr.AccessToken != "" {
		if g, ok := x.source.(*granter); ok {
			upstream = g.revokeUpstream(ctx, gr, s)
		}
	}
	if err := s.vault.Revoke(ctx, principal, server); err != nil && !errors.Is(err, vault.ErrNoGrant) {
		s.log.Error("revoke grant", "principal", principal, "server", server, "error", err.Error())
		httpx.WriteError(w, err)
		return
	}
	s.tokens.drop(principal, server)
	s.log.Info("grant revoked", "principal", principal, "server", server, "grant_id", gr.ID, "upstream", upstream)
	httpx.WriteJSON(w, http.StatusOK, api.GrantRevoked{Grant: gr.Info(), Upstream: upstream})
}

// grantsRequest reads the principal of a grants API request, answering itself when there is
// none or the executor keeps no grants.
func (s *Service) grantsRequest(w http.ResponseWriter, r *http.Request) (string, bool) {
	if s.vault == nil {
		httpx.WriteError(w, httpx.Errorf(http.StatusNotFound, api.CodeNotFound, "this executor keeps no grants: no server is called with mode user_grant"))
		return "", false
	}
	principal := r.URL.Query().Get("principal")
	if principal == "" {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "the principal query parameter is required"))
		return "", false
	}
	return principal, true
}

// revokeUpstream asks the authorization server that issued gr to revoke it: its refresh
// token, which ends the grant, or its access token when it has none.
func (g *granter) revokeUpstream(ctx context.Context, gr vault.Grant, s *Service) string {
	flow, err := g.flowOf(ctx, gr)
	if err == nil {
		if flow.Server.RevocationEndpoint == "" {
			return api.GrantUpstreamUnsupported
		}
		if err = flow.Revoke(ctx, g.client, cmp.Or(gr.RefreshToken, gr.AccessToken)); err == nil {
			return api.GrantUpstreamRevoked
		}
	}
	s.log.Warn("revoke grant upstream", "principal", gr.Principal, "server", gr.Server, "error", err.Error())
	return api.GrantUpstreamFailed
}

// maxConnectionWait bounds how long GET /v1/connections/{server} waits for an account.
const maxConnectionWait = 2 * time.Minute

// connectionPoll is how often a wait reads the vault again besides this executor's own news:
// another replica may store the grant.
const connectionPoll = time.Second

// handleConnection answers GET /v1/connections/{server}?wait=D (caller token, and the user's
// token in Verdict-Subject-Token): whether the user has a usable grant at the server, waiting up
// to D (at most two minutes) for one to be connected. The gateway asks it after the user
// accepted to open the connect page, so that it presents the verdict again once the account is
// there rather than at once.
func (s *Service) handleConnection(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.callers.RequireCaller(w, r, "executor", "a caller token is required", "the caller token is not accepted"); !ok {
		return
	}
	x := s.users[r.PathValue("server")]
	if x == nil || x.cfg.Mode != api.CredentialUserGrant {
		httpx.WriteError(w, httpx.Errorf(http.StatusNotFound, api.CodeNotFound, "no user_grant server %q", r.PathValue("server")))
		return
	}
	wait := time.Duration(0)
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "wait %q is not a duration", v))
			return
		}
		wait = min(d, maxConnectionWait)
	}
	subjects := r.Header.Values(identity.SubjectTokenHeader)
	if len(subjects) != 1 {
		httpx.WriteError(w, httpx.Errorf(http.StatusForbidden, api.ExecutionReasonCredentialRequired, "exactly one user's access token is required"))
		return
	}
	p, err := s.subjects.Verify(r.Context(), strings.TrimSpace(subjects[0]))
	if err != nil {
		httpx.WriteError(w, httpx.Errorf(http.StatusForbidden, api.ExecutionReasonCredentialInvalid, "the user's access token is refused (%s)", identity.ReasonOf(err)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	t := time.NewTicker(connectionPoll)
	defer t.Stop()
	for {
		news := s.grantNews.wait()
		if _, err := s.vault.Get(ctx, p.ID, x.id); err == nil {
			httpx.WriteJSON(w, http.StatusOK, api.Connection{Server: x.id, Connected: true})
			return
		}
		select {
		case <-ctx.Done():
			httpx.WriteJSON(w, http.StatusOK, api.Connection{Server: x.id, Connected: false})
			return
		case <-news:
		case <-t.C:
		}
	}
}

// broadcast wakes every waiter at once: wait returns a channel closed at the next notify.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}
