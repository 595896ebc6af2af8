package verdictd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/approvals"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/httpx"
)

// A Caller is a client of the API: a name (for the logs), the SHA-256 of its bearer token, and
// the principals it may name in a preflight.
type Caller struct {
	Name        string `json:"name"`
	TokenSHA256 string `json:"token_sha256"`
	// Principals are the principals the caller may act for: exact ids, or patterns ending in
	// "*" that match every id with the prefix before it ("*" alone: any principal). The key is
	// required, so that trusting a caller for every principal is written down; [] is a caller
	// that names none itself (one that only posts receipts, or forwards subject tokens).
	Principals []string `json:"principals"`
	// TrustTraceContext lets the caller's W3C trace context be the parent of its preflights,
	// so that their spans and records carry its trace id. Otherwise a preflight starts a trace
	// of its own and only links the caller's: a caller must not choose the trace id of a
	// record (another user's trace, say).
	TrustTraceContext bool `json:"trust_trace_context,omitempty"`
}

// checkCallers reports the problems of a callers list at their keys: none listed and token
// hashes (confx.Callers), names given twice (a name is how a request's caller is known), and principals.
func checkCallers(callers []Caller) []error {
	toks := make([]httpx.Token, len(callers))
	for i, c := range callers {
		toks[i] = httpx.Token{Name: c.Name, TokenSHA256: c.TokenSHA256}
	}
	errs := confx.Callers(toks)
	seen := map[string]int{}
	for i, c := range callers {
		path := confx.Index("callers", i)
		if j, dup := seen[c.Name]; dup {
			errs = append(errs, confx.Errorf(confx.Key(path, "name"), "%q is also the name of callers[%d]", c.Name, j))
		}
		seen[c.Name] = i
		if c.Principals == nil {
			errs = append(errs, confx.Place(path, fmt.Errorf(`callers[%d] (%s): principals is required: list the principals this caller may act for `+
				`(exact ids, or prefix* patterns); write principals: ["*"] to let it act for any principal, as before the key existed, `+
				`or principals: [] for a caller that names none (the executor, a gateway that forwards subject tokens)`, i, c.Name)))
		}
		for j, p := range c.Principals {
			if err := checkPattern(p); err != nil {
				errs = append(errs, confx.At(confx.Index(confx.Key(path, "principals"), j), err))
			}
		}
	}
	return errs
}

func checkPattern(p string) error {
	switch {
	case p == "" || strings.TrimSpace(p) != p:
		return fmt.Errorf("%q is not a principal id or pattern", p)
	case strings.Contains(strings.TrimSuffix(p, "*"), "*"):
		return fmt.Errorf("%q: a pattern has one \"*\", at its end", p)
	}
	return nil
}

// principalSet is what one caller may act for.
type principalSet struct {
	exact    map[string]bool
	prefixes []string // of the patterns; "" for "*"
}

func newPrincipalSet(patterns []string) principalSet {
	s := principalSet{exact: map[string]bool{}}
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			s.prefixes = append(s.prefixes, prefix)
		} else {
			s.exact[p] = true
		}
	}
	return s
}

func (s principalSet) allows(id string) bool {
	return s.exact[id] || slices.ContainsFunc(s.prefixes, func(p string) bool { return strings.HasPrefix(id, p) })
}

// An authority is who vouches for a preflight's principal: its caller's callers entry, or the
// subject token the caller forwarded.
type authority struct {
	caller  string
	allowed principalSet
	subject *identity.Principal // the verified subject token's principal, if one was sent
	any     bool                // the in-process API: its Go caller is its own authority
}

// record says how a established the principal, for the decision record; nil for the in-process
// API, whose Go caller is its own authority.
func (a *authority) record() *api.PrincipalAuth {
	switch {
	case a.any:
		return nil
	case a.subject != nil:
		return &api.PrincipalAuth{Method: string(a.subject.Method), Caller: a.caller,
			Issuer: a.subject.Issuer, TokenHash: a.subject.TokenHash}
	}
	return &api.PrincipalAuth{Method: api.PrincipalByCaller, Caller: a.caller}
}

// allows refuses principal unless a is its authority: with a subject token, it must be the
// token's principal (the caller's list does not widen what the token says); without one, the
// caller's entry must list it.
func (a *authority) allows(principal string) error {
	switch {
	case a.any:
		return nil
	case a.subject != nil:
		if principal == a.subject.ID {
			return nil
		}
		return httpx.Errorf(http.StatusForbidden, api.CodePrincipalNotAllowed, "the principal is not the one the subject token names")
	case a.allowed.allows(principal):
		return nil
	}
	return httpx.Errorf(http.StatusForbidden, api.CodePrincipalNotAllowed, "caller %s may not act for this principal", a.caller)
}

type callerKey struct{}

// withCaller and callerOf carry the name of an authenticated caller from callerOnly to a handler.
func withCaller(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, callerKey{}, name)
}

func callerOf(ctx context.Context) string { s, _ := ctx.Value(callerKey{}).(string); return s }

// countRefusal counts a preflight refused for its principal: principal_not_allowed, or the
// reason of a subject token's refusal (the error code authority answered with).
func (s *Service) countRefusal(err error) {
	var he *httpx.Error
	if !errors.As(err, &he) {
		return
	}
	if he.Code == api.CodePrincipalNotAllowed || slices.Contains(identity.Reasons(), identity.Reason(he.Code)) {
		s.metrics.principals.WithLabelValues(he.Code).Inc()
	}
}

// authority returns who vouches for the principal of the preflight r carries: the subject token
// of its SubjectTokenHeader, verified against the identity section, or else its caller's entry.
// A subject token that does not verify is refused for its reason, and one sent to a verdictd
// without an identity section is refused rather than ignored: a credential is never dropped.
// The token is verified under ctx, the preflight's deadline: reaching the issuer counts toward it.
func (s *Service) authority(ctx context.Context, r *http.Request) (*authority, error) {
	name := callerOf(r.Context())
	a := &authority{caller: name, allowed: s.acts[name]}
	vals := r.Header.Values(identity.SubjectTokenHeader)
	switch {
	case len(vals) == 0:
		return a, nil
	case len(vals) > 1:
		return nil, httpx.Errorf(http.StatusUnauthorized, string(identity.TokenMalformed), "more than one %s header", identity.SubjectTokenHeader)
	case s.subjects == nil:
		return nil, httpx.Errorf(http.StatusForbidden, api.CodePrincipalNotAllowed,
			"a subject token was sent, but this verdictd verifies none (it has no identity section)")
	}
	tok := strings.TrimSpace(vals[0])
	if tok == "" {
		// An empty header is a token that says nothing, not an absent one.
		return nil, httpx.Errorf(http.StatusUnauthorized, string(identity.TokenMalformed), "the subject token is refused: %s", identity.TokenMalformed)
	}
	p, err := s.subjects.Verify(ctx, tok)
	if err != nil {
		reason := identity.ReasonOf(err)
		if reason == "" || reason == identity.TokenMissing {
			reason = identity.TokenMalformed
		}
		s.log.Warn("subject token refused", "caller", name, "reason", string(reason), "error", err.Error())
		if reason == identity.IdPUnavailable {
			return nil, httpx.Errorf(identity.HTTPStatus(err), string(reason), "the subject token's issuer cannot be reached; nothing was decided, try again")
		}
		return nil, httpx.Errorf(identity.HTTPStatus(err), string(reason), "the subject token is refused: %s", reason)
	}
	a.subject = p
	return a, nil
}

// viewer authenticates a request of the approvals API (approvals.Options.Authenticate): a
// caller token (read-only), else an approver token verified against the approvers section.
// Every refusal is 401 unauthorized, but for an issuer that cannot be reached (503
// idp_unavailable: nothing was decided).
func (s *Service) viewer(r *http.Request) (*approvals.Viewer, error) {
	if name, err := s.callers.Check(r); err == nil {
		act, err := s.authority(r.Context(), r.WithContext(withCaller(r.Context(), name)))
		if err != nil {
			return nil, err
		}
		return &approvals.Viewer{ActsFor: func(principal string) bool { return act.allows(principal) == nil }}, nil
	}
	h := r.Header.Get("Authorization")
	tok, ok := "", len(h) > len("Bearer ") && strings.EqualFold(h[:len("Bearer ")], "Bearer ")
	if ok {
		tok = strings.TrimSpace(h[len("Bearer "):])
	}
	switch {
	case !ok || tok == "":
		return nil, httpx.Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "an approver or caller token is required")
	case s.approvers == nil:
		return nil, httpx.Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "the token is not accepted (this verdictd has no approvers section)")
	}
	p, err := s.approvers.Verify(r.Context(), tok)
	if err != nil {
		reason := identity.ReasonOf(err)
		s.log.Warn("approver token refused", "reason", string(reason), "error", err.Error())
		if reason == identity.IdPUnavailable {
			return nil, httpx.Errorf(http.StatusServiceUnavailable, string(reason), "the approver token's issuer cannot be reached; nothing was decided, try again")
		}
		return nil, httpx.Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "the approver token is refused: %s", reason)
	}
	return &approvals.Viewer{Approver: p, Admin: s.cfg.Approvers.admin(p)}, nil
}
