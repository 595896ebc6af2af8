// Package upstreamauth is the OAuth client of an upstream MCP server's own authorization
// server: the executor's side of the user_grant credential mode, where each user consents once
// at the server's authorization server and the grant is kept in the vault
// (docs/credentials.md). It finds the authorization server, registers a client there when
// none is configured, runs the authorization code flow with PKCE, and refreshes and revokes
// the grant. The token endpoint is golang.org/x/oauth2's; the rest is small enough to do here.
//
// # The steps
//
//	// 1. The server's 401 names its metadata; else the well-known locations are asked.
//	u, _, err := upstreamauth.ResourceMetadataURL(resp.Header.Get("WWW-Authenticate"))
//	res, err := upstreamauth.FetchResource(ctx, hc, serverURL, u) // or DiscoverResource(ctx, hc, serverURL)
//	// 2. Its authorization server (RFC 8414, then OpenID discovery).
//	as, err := upstreamauth.DiscoverServer(ctx, hc, res.AuthorizationServers[0])
//	// 3. A client: configured, registered (RFC 7591), or a client ID metadata document.
//	client, err := upstreamauth.Register(ctx, hc, as, upstreamauth.RegistrationRequest{
//		ClientName: "verdict executor", RedirectURIs: []string{callback}})
//	// 4. The user's consent.
//	flow := &upstreamauth.Flow{Server: as, Client: client, Resource: serverURL, RedirectURL: callback, Scopes: scopes}
//	err = flow.Check()
//	authURL, pending := flow.Start() // send the user to authURL; keep pending until the callback
//	tok, err := flow.Exchange(ctx, hc, pending, callbackRequest.URL.Query())
//	// The grant the vault keeps: vault.Grant{Kind: vault.KindUserGrant, AccessToken: tok.AccessToken,
//	// RefreshToken: tok.RefreshToken, TokenType: tok.TokenType, Expiry: tok.Expiry,
//	// Scopes: flow.GrantedScopes(tok), …}
//	// 5. Later.
//	tok, err = flow.Refresh(ctx, hc, tok.RefreshToken) // errors.Is(err, ErrRevoked): ask again
//	err = flow.Revoke(ctx, hc, tok.RefreshToken)
//
// # What it holds to
//
//   - Every URL a document or an answer names, that anything is sent to, is https, or http on
//     a loopback host (loopback.SecureURL); and http only where what named it is itself http:
//     an https server cannot send the executor's requests, its secret or a user's code to plain
//     http, not even on the executor's own host. Refused: ErrInsecureURL.
//   - A resource's metadata must be for the URL asked about (RFC 9728 §3.3,
//     ErrResourceMismatch), an authorization server's for the issuer asked about (RFC 8414
//     §3.3, ErrIssuerMismatch), and the server must say it supports PKCE with S256 (ErrNoPKCE):
//     one that does not say so is not used, whatever it would do.
//   - No request follows a redirect: the 30x is the answer, and an unusable one. The
//     well-known locations are the RFCs', the endpoints the metadata's, and a redirect would
//     carry a code, a token or the client's secret elsewhere.
//   - What is read of an answer is bounded: 64 KiB of a document or a registration's or a
//     revocation's answer, 1 MiB of a token response (oauth2's bound).
//   - The callback's state must be the flow's (ErrStateMismatch, compared in constant time),
//     and its iss the server's when it sends one, or always when it says it does (RFC 9207,
//     ErrIssuerMismatch); an error in the callback is an *Error, whatever else came with it.
//   - RFC 8707's resource goes with the authorization request, the code exchange and every
//     refresh: the tokens are for the one server.
//   - No error holds a token, a code, a verifier, a state or a secret: an OAuth error's code and
//     description are the server's words with every secret of the request cut out, and cut
//     short; so is the text of a transport error, which may quote a malformed answer; all
//     else the server sent (a body, a reason phrase, a Location) is left out.
//     A Client's secret, and a Pending's state and verifier, never leave through fmt,
//     log/slog, JSON or YAML.
//
// A token a flow returns is a Bearer access token a header can carry (visible ASCII, at most
// 16 KiB) with, if any, a refresh token the vault can store; anything else is ErrAnswer.
//
// # Errors
//
// A caller branches with errors.Is on the sentinels (ErrRevoked: the grant is gone, ask the
// user again; ErrUnreachable: try again later; the others: the server or the configuration is
// not usable) and with errors.As on *Error for the OAuth error code an endpoint answered.
package upstreamauth
