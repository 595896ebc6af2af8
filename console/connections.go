package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/client"
)

// connectionRow is one account the user has connected: what the executor shows of the grant,
// never a token.
type connectionRow struct {
	Server, Issuer   string
	Created, Updated time.Time
	Expiry           time.Time // of the access token; zero when the server did not say
	Scopes           []string
	Refresh          bool
	// Revocable is false for a server id the console would not put in a path (the executor
	// should never list one): the row is shown without its form.
	Revocable bool
	// ConnectURL is where to connect the account again; empty without connect_url.
	ConnectURL string
}

// connectLink is a server the page offers to connect an account at.
type connectLink struct {
	Server, URL string
	Connected   bool
}

// connectionsView is what the connections page shows.
type connectionsView struct {
	// Principal is whose grants are listed: the signed-in user, as the executor names them.
	Principal string
	// Listed is false when the executor's list could not be read: the page shows the problem
	// and no table, never an empty list.
	Listed bool
	Rows   []connectionRow
	// Connect are the servers of connect_servers, each with its link; ConnectURL says whether
	// there is a connect page at all.
	Connect    []connectLink
	ConnectURL bool
	// Revoked, after a revocation, says what was done in words.
	Revoked *revokedNote
}

// revokedNote is what the page says after a revocation.
type revokedNote struct {
	Server, Upstream, Words string
}

// handleConnections lists the accounts the signed-in user has connected at the executor's
// user_grant servers: their own grants alone, the principal being the session's.
func (s *Server) handleConnections(w http.ResponseWriter, r *http.Request, sess session) {
	v, pr := s.connections(r.Context(), sess)
	status := http.StatusOK
	if pr != nil {
		status = pr.Status
	}
	s.render(w, r, status, "connections", signedInWith(sess, "Connected accounts", v, pr))
}

// connections reads the user's grants and builds the page; a problem of the executor comes
// back beside a view whose Listed is false.
func (s *Server) connections(ctx context.Context, sess session) (*connectionsView, *problem) {
	v := &connectionsView{Principal: sess.Subject, ConnectURL: s.cfg.ConnectURL != ""}
	gs, err := s.execs.Grants(ctx, sess.Subject)
	if err != nil {
		pr := executorProblem(ctx, err, false)
		s.log.Warn("list grants", "subject", sess.Subject, "code", pr.Code, "error", err.Error())
		s.metrics.connections.WithLabelValues(pr.Code).Inc()
		v.Connect = s.connectLinks(nil)
		return v, &pr
	}
	v.Listed = true
	connected := map[string]bool{}
	for _, g := range gs {
		if g.Principal != sess.Subject {
			// The executor lists the principal asked for; anything else is not shown.
			s.log.Error("the executor listed another principal's grant", "subject", sess.Subject, "server", g.Server)
			continue
		}
		row := connectionRow{Server: g.Server, Issuer: g.Issuer, Created: g.Created, Updated: g.Updated,
			Expiry: g.Expiry, Scopes: g.Scopes, Refresh: g.HasRefreshToken, Revocable: serverIDPattern.MatchString(g.Server)}
		if row.Revocable {
			row.ConnectURL = s.connectURL(g.Server)
			connected[g.Server] = true
		}
		v.Rows = append(v.Rows, row)
	}
	slices.SortFunc(v.Rows, func(a, b connectionRow) int { return strings.Compare(a.Server, b.Server) })
	v.Connect = s.connectLinks(connected)
	s.metrics.connections.WithLabelValues("ok").Inc()
	return v, nil
}

// connectURL is the executor's connect page of server, or "" without connect_url. The path is
// connect.public_url's, then /connect/<server>, as the executor serves it.
func (s *Server) connectURL(server string) string {
	if s.cfg.ConnectURL == "" {
		return ""
	}
	u, err := url.Parse(s.cfg.ConnectURL)
	if err != nil {
		return "" // Validate refused it already
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/connect/" + server
	u.RawPath = ""
	return u.String()
}

// connectLinks are connect_servers' links, each marked when the user has an account connected
// there.
func (s *Server) connectLinks(connected map[string]bool) []connectLink {
	out := make([]connectLink, 0, len(s.cfg.ConnectServers))
	for _, srv := range s.cfg.ConnectServers {
		out = append(out, connectLink{Server: srv, URL: s.connectURL(srv), Connected: connected[srv]})
	}
	return out
}

// handleRevoke revokes the signed-in user's grant at the server of the path. The principal is
// the session's: nothing of the form but its token is read, so no edit of it reaches another
// user's grant.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request, sess session) {
	server := r.PathValue("server")
	if !serverIDPattern.MatchString(server) {
		s.metrics.forms.WithLabelValues(codeBadForm).Inc()
		s.renderProblemAs(w, r, sess, problem{Status: http.StatusBadRequest, Code: codeBadForm, Words: words(codeBadForm, "")})
		return
	}
	out, err := s.execs.RevokeGrant(r.Context(), sess.Subject, server)
	if err != nil {
		pr := executorProblem(r.Context(), err, true)
		s.log.Info("revocation refused", "subject", sess.Subject, "server", server, "code", pr.Code, "error", err.Error())
		s.metrics.revoked(pr.Code)
		v, listed := s.connections(r.Context(), sess)
		if listed != nil && pr.Code == codeConnectionNotFound {
			pr = *listed // the list's own problem says more than a missing grant
		}
		s.render(w, r, pr.Status, "connections", signedInWith(sess, "Connected accounts", v, &pr))
		return
	}
	note := &revokedNote{Server: server, Upstream: out.Upstream, Words: upstreamWords(out.Upstream)}
	switch result := out.Upstream; result {
	case api.GrantUpstreamRevoked, api.GrantUpstreamUnsupported, api.GrantUpstreamFailed:
		s.metrics.revoked(result)
	default:
		s.metrics.revoked("other")
	}
	s.log.Info("grant revoked", "subject", sess.Subject, "server", server, "grant_id", out.Grant.ID, "upstream", out.Upstream)
	// The revocation is done whatever the list says next: the page answers 200, and shows a
	// problem of the list beside the note.
	v, pr := s.connections(r.Context(), sess)
	v.Revoked = note
	s.render(w, r, http.StatusOK, "connections", signedInWith(sess, "Connected accounts", v, pr))
}

// upstreamWords says what the authorization server did with a revoked grant.
func upstreamWords(upstream string) string {
	switch upstream {
	case api.GrantUpstreamRevoked:
		return "The account's authorization server revoked the grant, and the executor removed it: nothing can be called with it any more."
	case api.GrantUpstreamUnsupported:
		return "The executor removed the grant, so no call uses it any more. The account's authorization server offers no revocation: the tokens it issued stay valid there until they expire. To end them sooner, remove the access in your account's settings at the server."
	case api.GrantUpstreamFailed:
		return "The executor removed the grant, so no call uses it any more, but the account's authorization server could not be told (the executor's log says why): the tokens it issued stay valid there until they expire. To end them sooner, remove the access in your account's settings at the server."
	}
	return "The executor removed the grant, so no call uses it any more. It did not say whether the account's authorization server revoked it: to be sure, remove the access in your account's settings at the server."
}

// executorProblem turns an error of the executor's grants API into the problem a page shows.
// A refusal is the executor's, never the user's: the console asks with its own token.
func executorProblem(ctx context.Context, err error, revoke bool) problem {
	var ce *client.Error
	switch {
	case errors.As(err, &ce) && ce.Code == api.CodeGrantUnreadable:
		return problem{Status: http.StatusBadGateway, Code: api.CodeGrantUnreadable, Words: words(api.CodeGrantUnreadable, ""), Details: ce.Message}
	case errors.As(err, &ce) && revoke && ce.Status == http.StatusNotFound && ce.Code == api.CodeNotFound:
		return problem{Status: http.StatusNotFound, Code: codeConnectionNotFound, Words: words(codeConnectionNotFound, "")}
	case errors.As(err, &ce):
		return problem{Status: http.StatusBadGateway, Code: codeExecutorRefused, Words: words(codeExecutorRefused, ""), Details: ce.Error()}
	case ctx.Err() != nil:
		return problem{Status: http.StatusServiceUnavailable, Code: codeExecutorUnavailable, Words: words(codeExecutorUnavailable, "")}
	}
	return problem{Status: http.StatusBadGateway, Code: codeExecutorUnavailable, Words: words(codeExecutorUnavailable, "")}
}
