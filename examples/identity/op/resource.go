package main

import (
	"context"
	"net/http"
	"slices"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// The example provider's endpoints whose requests name a resource: its authorization endpoint
// is /auth (exampleop's own choice), its token endpoint the op package's default. The tests of
// -require-resource fail if either moves.
const (
	authorizePath = "/auth"
	tokenPath     = "/oauth/token"
)

type resourceKey struct{}

// resourceFromContext returns the resource parameters of the authorization request that
// resourceCheck put in ctx.
func resourceFromContext(ctx context.Context) []string {
	r, _ := ctx.Value(resourceKey{}).([]string)
	return r
}

// checkResource admits a request that names the provider's resource, and it alone (RFC 8707
// §2: several may be named; here there is one to name).
func (s *store) checkResource(named []string) *oidc.Error {
	if len(named) == 0 {
		return oidc.ErrInvalidTarget().WithDescription("a resource parameter is required: the resource the tokens are for")
	}
	if slices.ContainsFunc(named, func(r string) bool { return r != s.resource }) {
		return oidc.ErrInvalidTarget().WithDescription("tokens are issued for %s alone", s.resource)
	}
	return nil
}

// resourceCheck holds the requests of -require-resource to RFC 8707: an authorization
// request's resource parameters go on in its context to CreateAuthRequest, whose refusal the
// provider sends to the client's redirect URI; a code exchange or a refresh that does not name
// the resource is answered here with invalid_target, before the provider reads it (a code is
// not spent on it).
func (s *store) resourceCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case authorizePath:
			if err := r.ParseForm(); err != nil {
				http.Error(w, "cannot parse the request", http.StatusBadRequest)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, r.Form["resource"]))
		case tokenPath:
			if r.Method != http.MethodPost {
				break
			}
			if err := r.ParseForm(); err != nil {
				http.Error(w, "cannot parse the request", http.StatusBadRequest)
				return
			}
			switch r.PostForm.Get("grant_type") {
			case string(oidc.GrantTypeCode), string(oidc.GrantTypeRefreshToken):
				if err := s.checkResource(r.PostForm["resource"]); err != nil {
					writeJSON(w, http.StatusBadRequest, map[string]string{"error": string(err.ErrorType), "error_description": err.Description})
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}
