package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/verdictgate/verdict/internal/flows"
)

// handleLogin starts a sign-in: it remembers a fresh state, nonce and PKCE verifier, binds the
// state to this browser with a short-lived cookie, and sends the browser to the provider.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	oc, _, err := s.provider.Get(r.Context())
	if err != nil {
		s.log.Warn("sign-in", "error", err.Error())
		s.renderProblem(w, r, problem{Status: http.StatusServiceUnavailable, Code: codeSignInFailed,
			Words: "The sign-in provider cannot be reached. Try again in a moment."})
		return
	}
	l := flows.Flow[login]{
		State:   rand.Text() + rand.Text(),
		Started: s.now(),
		Client:  flows.ClientOf(r.RemoteAddr),
		Value: login{
			Nonce:    rand.Text() + rand.Text(),
			Verifier: oauth2.GenerateVerifier(),
			ReturnTo: safeReturn(r.URL.Query().Get("return")),
		},
	}
	// This browser's earlier sign-in, if any, makes room for this one: the cookie set below
	// replaces its state, so it could not be finished anyway.
	if err := s.logins.Add(l, s.cookieValue(r, s.loginCookie)); err != nil {
		code := codeSignInLimit
		if errors.Is(err, flows.ErrClientFull) {
			code = codeSignInClientLimit
		}
		s.metrics.signInStarts.WithLabelValues(code).Inc()
		s.renderProblem(w, r, problem{Status: http.StatusTooManyRequests, Code: code, Words: words(code, "")})
		return
	}
	if s.sessions.store.shared() {
		// The callback may reach another replica: it takes the sign-in from the shared store.
		if err := s.putLogin(r.Context(), l); err != nil {
			s.logins.Take(l.State)
			s.log.Warn("sign-in", "error", err.Error())
			s.metrics.signInStarts.WithLabelValues(codeSessionStoreUnavailable).Inc()
			s.storeUnavailable(w, r)
			return
		}
	}
	s.metrics.signInStarts.WithLabelValues("ok").Inc()
	opts := []oauth2.AuthCodeOption{oidc.Nonce(l.Value.Nonce), oauth2.S256ChallengeOption(l.Value.Verifier)}
	if s.cfg.OIDC.Resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", s.cfg.OIDC.Resource))
	}
	s.setCookie(w, s.loginCookie, l.State, loginTTL)
	http.Redirect(w, r, oc.AuthCodeURL(l.State, opts...), http.StatusSeeOther)
}

// idClaims are the ID token claims the console reads besides what go-oidc checks.
type idClaims struct {
	Name              string `json:"name"`
	PreferredUsername string `json:"preferred_username"`
	Email             string `json:"email"`
}

// handleCallback finishes a sign-in: the state must be the one this browser started with, the
// code is redeemed with the PKCE verifier, and the ID token must verify (issuer, audience,
// expiry, signature) and carry the nonce. Only then is a session created.
func (s *Server) handleCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	cookie := s.cookieValue(r, s.loginCookie)
	s.clearCookie(w, s.loginCookie)
	if state == "" || cookie == "" || subtle.ConstantTimeCompare([]byte(state), []byte(cookie)) != 1 {
		s.signInFailed(w, r, codeSignInExpired, "")
		return
	}
	f, ok := s.logins.Take(state)
	if s.sessions.store.shared() {
		// The shared store decides, whichever replica started the sign-in: of two callbacks
		// with one state, one takes it. This replica's table only bounded the starts.
		var err error
		if f, ok, err = s.takeLogin(r.Context(), state); err != nil {
			s.log.Warn("sign-in", "error", err.Error())
			s.metrics.signIns.WithLabelValues(codeSessionStoreUnavailable).Inc()
			s.storeUnavailable(w, r)
			return
		}
	}
	if !ok {
		s.signInFailed(w, r, codeSignInExpired, "")
		return
	}
	l := f.Value
	if e := q.Get("error"); e != "" {
		s.signInFailed(w, r, codeSignInFailed, "the provider answered "+e+": "+q.Get("error_description"))
		return
	}
	oc, verifier, err := s.provider.Get(r.Context())
	if err != nil {
		s.signInFailed(w, r, codeSignInFailed, "the provider cannot be reached")
		return
	}
	ctx := oidc.ClientContext(r.Context(), s.client)
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(l.Verifier)}
	if s.cfg.OIDC.Resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", s.cfg.OIDC.Resource))
	}
	tok, err := oc.Exchange(ctx, q.Get("code"), opts...)
	if err != nil {
		s.log.Warn("sign-in: code exchange", "error", err.Error())
		s.signInFailed(w, r, codeSignInFailed, "the provider did not redeem the code")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" || tok.AccessToken == "" {
		s.signInFailed(w, r, codeSignInFailed, "the provider returned no ID token or no access token")
		return
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		s.log.Warn("sign-in: id token", "error", err.Error())
		s.signInFailed(w, r, codeSignInFailed, "the ID token did not verify")
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(l.Nonce)) != 1 {
		s.signInFailed(w, r, codeSignInFailed, "the ID token does not carry this sign-in's nonce")
		return
	}
	var c idClaims
	var all map[string]any
	if err := idt.Claims(&c); err != nil || idt.Claims(&all) != nil {
		s.signInFailed(w, r, codeSignInFailed, "the ID token's claims do not read")
		return
	}
	groups, err := groupsOf(all[s.cfg.OIDC.groupsClaim()])
	if err != nil {
		s.signInFailed(w, r, codeSignInFailed, fmt.Sprintf("the ID token's %s claim: %v", s.cfg.OIDC.groupsClaim(), err))
		return
	}
	subject, err := principalOf(idt.Issuer, idt.Subject, all, s.cfg.OIDC.principalClaim())
	if err != nil {
		s.signInFailed(w, r, codeSignInFailed, err.Error())
		return
	}
	// A sign-in always makes a new session id; the browser's earlier session, if any, ends.
	err = s.sessions.end(r.Context(), s.cookieValue(r, s.sessionCookie))
	var id string
	if err == nil {
		id, _, err = s.sessions.create(r.Context(), session{
			Subject: subject, Name: firstOf(c.Name, c.PreferredUsername, c.Email, subject), Groups: groups,
			AccessToken: tok.AccessToken, TokenExpiry: tok.Expiry,
		})
	}
	if err != nil {
		s.log.Warn("sign-in: session store", "error", err.Error())
		s.metrics.signIns.WithLabelValues(codeSessionStoreUnavailable).Inc()
		s.storeUnavailable(w, r)
		return
	}
	s.metrics.signIns.WithLabelValues("ok").Inc()
	s.log.Info("signed in", "subject", subject)
	s.setCookie(w, s.sessionCookie, id, s.cfg.Session.ttl())
	http.Redirect(w, r, l.ReturnTo, http.StatusSeeOther)
}

func (s *Server) signInFailed(w http.ResponseWriter, r *http.Request, code, details string) {
	s.metrics.signIns.WithLabelValues(code).Inc()
	s.renderProblem(w, r, problem{Status: http.StatusBadRequest, Code: code, Words: words(code, ""), Details: details})
}

// principalOf names the signed-in user as the daemons name a principal: the issuer and the
// value of its principal claim, a string that is not empty.
func principalOf(issuer, sub string, claims map[string]any, claim string) (string, error) {
	value := sub
	if claim != DefaultPrincipalClaim {
		value, _ = claims[claim].(string)
	}
	if value == "" {
		return "", fmt.Errorf("the ID token has no %s claim that is a string, which names the user (oidc.principal_claim)", claim)
	}
	return issuer + "#" + value, nil
}

// groupsOf reads a groups claim: a list of strings, or one string; absent is no group.
func groupsOf(v any) ([]string, error) {
	switch g := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{g}, nil
	case []any:
		out := make([]string, 0, len(g))
		for _, e := range g {
			s, ok := e.(string)
			if !ok {
				return nil, errors.New("want a list of strings")
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, errors.New("want a list of strings")
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// handleLogout ends the session (a POST with the form token, so that no other site can sign an
// approver out); with the form field everywhere, every session of the approver, on every
// replica sharing the store. The provider's own session is left alone: the console is one of
// its clients. A sign-out the store did not carry out is refused, and the cookie is kept, so
// that the approver does not believe a session ended that lives on.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request, sess session) {
	everywhere := r.PostForm.Get("everywhere") != ""
	var err error
	n := 1
	if everywhere {
		n, err = s.sessions.endAll(r.Context(), sess.Subject)
	} else {
		err = s.sessions.end(r.Context(), s.cookieValue(r, s.sessionCookie))
	}
	if err != nil {
		s.log.Warn("sign-out: session store", "subject", sess.Subject, "error", err.Error())
		s.storeUnavailable(w, r)
		return
	}
	s.clearCookie(w, s.sessionCookie)
	s.log.Info("signed out", "subject", sess.Subject, "everywhere", everywhere, "sessions", n)
	var body any
	if everywhere {
		body = true
	}
	s.render(w, r, http.StatusOK, "signedout", page{Title: "Signed out", Body: body})
}

// storedLogin is a sign-in in progress as the shared store keeps it, sealed under its state.
type storedLogin struct {
	login
	Started time.Time `json:"started"`
}

// putLogin keeps the sign-in l in the shared store, where any replica's callback takes it.
func (s *Server) putLogin(ctx context.Context, l flows.Flow[login]) error {
	key, sk := keysOf(l.State)
	sealed, err := sealJSON(sk, key, storedLogin{login: l.Value, Started: l.Started})
	if err != nil {
		return err
	}
	return s.sessions.store.putLogin(ctx, key, sealed)
}

// takeLogin takes the sign-in of state from the shared store: false when it is not there (used,
// or never started) or older than loginTTL.
func (s *Server) takeLogin(ctx context.Context, state string) (flows.Flow[login], bool, error) {
	key, sk := keysOf(state)
	sealed, err := s.sessions.store.takeLogin(ctx, key)
	if errors.Is(err, errNoSession) {
		return flows.Flow[login]{}, false, nil
	}
	if err != nil {
		return flows.Flow[login]{}, false, err
	}
	var sl storedLogin
	if openJSON(sk, key, sealed, &sl) != nil || !s.now().Before(sl.Started.Add(loginTTL)) {
		return flows.Flow[login]{}, false, nil
	}
	return flows.Flow[login]{State: state, Started: sl.Started, Value: sl.login}, true, nil
}
