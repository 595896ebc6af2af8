package api

import "time"

// Grant is what may be shown of a user's grant the executor holds (docs/credentials.md): every
// field but its tokens and its client's secret, which no wire carries. The executor's admin API
// lists and revokes grants in this form (GET and DELETE /v1/grants).
type Grant struct {
	ID        string `json:"id"`
	Principal string `json:"principal"`
	Server    string `json:"server"`
	// Kind is how it was obtained: user_grant (the user consented at the server's
	// authorization server) or token_exchange.
	Kind            string    `json:"kind"`
	Subject         string    `json:"subject,omitempty"`
	Issuer          string    `json:"issuer,omitempty"`
	ClientID        string    `json:"client_id,omitempty"`
	TokenType       string    `json:"token_type,omitempty"`
	Expiry          time.Time `json:"expiry,omitzero"`
	Scopes          []string  `json:"scopes,omitempty"`
	HasRefreshToken bool      `json:"has_refresh_token"`
	Created         time.Time `json:"created"`
	Updated         time.Time `json:"updated"`
}

// Grants is the body of the executor's GET /v1/grants.
type Grants struct {
	Grants []Grant `json:"grants"`
}

// GrantRevoked is the body of the executor's answer to DELETE /v1/grants/{server}: the grant
// removed, and whether its authorization server was told (RFC 7009) and took it.
type GrantRevoked struct {
	Grant Grant `json:"grant"`
	// Upstream is "revoked" when the authorization server took the revocation, "unsupported"
	// when it offers none (the tokens serve until they expire there), or "failed" (the
	// executor's log says why): the grant is gone from the executor either way.
	Upstream string `json:"upstream"`
}

// What GrantRevoked.Upstream says.
const (
	GrantUpstreamRevoked     = "revoked"
	GrantUpstreamUnsupported = "unsupported"
	GrantUpstreamFailed      = "failed"
)

// Connection is the body of the executor's answer to GET /v1/connections/{server}: whether
// the user whose token came with the request has a grant at the server.
type Connection struct {
	Server    string `json:"server"`
	Connected bool   `json:"connected"`
}

// CodeGrantUnreadable is the executor's refusal of GET /v1/grants when a stored grant of the
// principal does not open (changed, or moved within the executor's file): nothing is listed
// rather than part, and the message names the grant's server, to revoke or connect again.
const CodeGrantUnreadable = "grant_unreadable"
