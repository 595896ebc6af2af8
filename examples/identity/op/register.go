package main

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// The registration endpoint: where it is, and its bounds (a request body, and the clients it
// registers, so that no caller grows the provider's memory without end).
const (
	registerPath     = "/register"
	discoveryPath    = "/.well-known/openid-configuration"
	maxRegistration  = 64 << 10
	maxRegistered    = 1000
	registeredPrefix = "dyn_" // of a registered client's ID
)

// The token endpoint authentication methods a registered client may have.
const (
	authMethodNone  = "none"
	authMethodBasic = "client_secret_basic"
)

// registered is a client of the registration endpoint.
type registered struct {
	client *storage.Client
	secret string // empty for a public client
	grants []oidc.GrantType
}

// clientMetadata is RFC 7591 §2 client metadata, of a registration request and its answer.
type clientMetadata struct {
	ClientID                string   `json:"client_id,omitempty"`
	ClientSecret            string   `json:"client_secret,omitempty"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at,omitempty"`
	ClientSecretExpiresAt   *int64   `json:"client_secret_expires_at,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	Scope                   string   `json:"scope,omitempty"`
}

// registrationError answers a refused registration (RFC 7591 §3.2.2).
func registrationError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// register is the RFC 7591 registration endpoint: open, as MCP clients expect it, for clients
// of the authorization code grant (with refresh tokens, if they ask) that are public
// (token_endpoint_auth_method none) or confidential with HTTP Basic (client_secret_basic, the
// default). Each is a client of the storage from then on, like the native one.
func (s *store) register(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		registrationError(w, http.StatusBadRequest, "invalid_client_metadata", "the request must be application/json")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRegistration+1))
	if err != nil || len(body) > maxRegistration {
		registrationError(w, http.StatusBadRequest, "invalid_client_metadata", "the request is unreadable or too large")
		return
	}
	var m clientMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		registrationError(w, http.StatusBadRequest, "invalid_client_metadata", "the request is not client metadata")
		return
	}
	if len(m.RedirectURIs) == 0 {
		registrationError(w, http.StatusBadRequest, "invalid_redirect_uri", "redirect_uris is required")
		return
	}
	for _, u := range m.RedirectURIs {
		if p, err := url.Parse(u); err != nil || !p.IsAbs() || p.Fragment != "" {
			registrationError(w, http.StatusBadRequest, "invalid_redirect_uri", "a redirect URI must be absolute, without a fragment")
			return
		}
	}
	m.TokenEndpointAuthMethod = cmp.Or(m.TokenEndpointAuthMethod, authMethodBasic) // RFC 7591 §2's default
	if len(m.GrantTypes) == 0 {
		m.GrantTypes = []string{string(oidc.GrantTypeCode)}
	}
	if len(m.ResponseTypes) == 0 {
		m.ResponseTypes = []string{string(oidc.ResponseTypeCode)}
	}
	var grants []oidc.GrantType
	for _, g := range m.GrantTypes {
		if g != string(oidc.GrantTypeCode) && g != string(oidc.GrantTypeRefreshToken) {
			registrationError(w, http.StatusBadRequest, "invalid_client_metadata", "grant_types: authorization_code and refresh_token alone are served")
			return
		}
		grants = append(grants, oidc.GrantType(g))
	}
	if !slices.Equal(m.ResponseTypes, []string{string(oidc.ResponseTypeCode)}) {
		registrationError(w, http.StatusBadRequest, "invalid_client_metadata", "response_types: code alone is served")
		return
	}

	id := registeredPrefix + rand.Text()
	reg := registered{grants: grants}
	switch m.TokenEndpointAuthMethod {
	case authMethodNone:
		reg.client = storage.NativeClient(id, m.RedirectURIs...)
	case authMethodBasic:
		reg.secret = rand.Text()
		reg.client = storage.WebClient(id, reg.secret, m.RedirectURIs...)
	default:
		registrationError(w, http.StatusBadRequest, "invalid_client_metadata", "token_endpoint_auth_method: none and client_secret_basic alone are served")
		return
	}
	s.mu.Lock()
	full := len(s.registered) >= maxRegistered
	if !full {
		s.registered[id] = reg
	}
	s.mu.Unlock()
	if full {
		registrationError(w, http.StatusBadRequest, "invalid_client_metadata", "no more clients can be registered")
		return
	}

	m.ClientID, m.ClientSecret, m.ClientIDIssuedAt = id, reg.secret, time.Now().Unix()
	if reg.secret != "" {
		never := int64(0)
		m.ClientSecretExpiresAt = &never
	}
	writeJSON(w, http.StatusCreated, m)
}

// withRegistrationEndpoint serves next's discovery document with the registration endpoint in
// it (RFC 8414 §2's registration_endpoint), which the op package does not write.
func withRegistrationEndpoint(issuer string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		var doc map[string]any
		if rec.status != http.StatusOK || json.Unmarshal(rec.body.Bytes(), &doc) != nil {
			http.Error(w, "discovery failed", http.StatusInternalServerError)
			return
		}
		doc["registration_endpoint"] = issuer + registerPath
		b, err := json.Marshal(doc)
		if err != nil {
			http.Error(w, "discovery failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
}

// recorder is the answer of the op package's discovery handler, held to be amended.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(status int)      { r.status = status }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
