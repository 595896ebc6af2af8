// Package identity authenticates the caller of a resource server from an OAuth 2.1 bearer
// token, the way the MCP authorization specification (2025-06-18) asks of an MCP server: it
// verifies access tokens issued by configured authorization servers and names the caller as a
// Principal, or refuses with an Error whose Reason a caller can branch on.
//
// A JWT access token is verified against its issuer's signing keys, found by OpenID Connect
// discovery (/.well-known/openid-configuration) or, failing that, RFC 8414 authorization server
// metadata, and cached; a key ID the cache does not hold causes one refetch at most every
// RefetchInterval. The token's alg must be on the issuer's allow-list (never "none" nor an HMAC
// algorithm: a resource server holds no shared secret), its iss one of the configured issuers,
// its aud the resource server's own identifier (RFC 8707), and its exp, nbf and iat must hold
// within a bounded clock skew. An opaque token is asked about by RFC 7662 introspection when an
// issuer configures it. When an authorization server cannot be reached the answer is a refusal
// (IdPUnavailable), never a fallback to another way of authenticating.
//
// A Principal's ID is the issuer and the principal claim joined by "#": issuer URLs carry no
// fragment (OpenID Connect Discovery 1.0 §3, RFC 8414 §2), so the first "#" always separates
// them, and two issuers that hand out the same subject name two different principals.
//
// The HTTP helpers make a resource server of a handler: ResourceMetadata serves RFC 9728
// protected resource metadata, WriteError answers a refusal with the RFC 6750 WWW-Authenticate
// challenge that points at it, and Middleware puts the verified Principal in the request's
// context, where FromContext finds it.
package identity
