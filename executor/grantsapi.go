package executor

import (
	"context"
	"errors"
	"net/http"

	"github.com/verdictgate/verdict/api"
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
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, api.Grants{Grants: gs})
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
		httpx.WriteError(w, httpx.Errorf(http.StatusNotFound, httpx.CodeNotFound, "no grant of %q at %q", principal, server))
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
		httpx.WriteError(w, httpx.Errorf(http.StatusNotFound, httpx.CodeNotFound, "this executor keeps no grants: no server is called with mode user_grant"))
		return "", false
	}
	principal := r.URL.Query().Get("principal")
	if principal == "" {
		httpx.WriteError(w, httpx.Errorf(http.StatusBadRequest, httpx.CodeInvalidRequest, "the principal query parameter is required"))
		return "", false
	}
	return principal, true
}

// revokeUpstream asks the authorization server that issued gr to revoke it: its refresh
// token, which ends the grant, or its access token when it has none.
func (g *granter) revokeUpstream(ctx context.Context, gr vault.Grant, s *Service) string {
	flow, err := g.flowOf(ctx, gr)
	if err != nil {
		s.log.Warn("revoke grant upstream", "principal", gr.Principal, "server", gr.Server, "error", err.Error())
		return api.GrantUpstreamFailed
	}
	if flow.Server.RevocationEndpoint == "" {
		return api.GrantUpstreamUnsupported
	}
	tok := gr.RefreshToken
	if tok == "" {
		tok = gr.AccessToken
	}
	if err := flow.Revoke(ctx, g.client, tok); err != nil {
		s.log.Warn("revoke grant upstream", "principal", gr.Principal, "server", gr.Server, "error", err.Error())
		return api.GrantUpstreamFailed
	}
	return api.GrantUpstreamRevoked
}
