// Package upstreamauth is the OAuth client of an upstream MCP server's own authorization
// server: the executor's side of the user_grant credential mode, where each user consents once
// at the server's authorization server and the grant is kept in the vault
// (docs/credentials.md). It finds the authorization server of an upstream MCP server, from
// its 401 (ResourceMetadataURL, FetchResource) or the well-known locations (DiscoverResource),
// then the server's metadata (DiscoverServer); and the client the executor is there:
// configured (a Client), registered (RFC 7591, Register), or a client ID metadata document the
// executor serves (MetadataDocument, MetadataClient). A registration answer that is not the
// client asked for is refused, and no error quotes it: it holds the client's secret, which
// never prints.
//
// Every URL a document names is https, or http on a loopback host (loopback.SecureURL); and
// http only where what named it is itself http. A resource's metadata must be for the URL
// asked about (RFC 9728 §3.3, ErrResourceMismatch), an authorization server's for the issuer
// asked about (RFC 8414 §3.3, ErrIssuerMismatch), and the server must say it supports PKCE with
// S256 (ErrNoPKCE). No request follows a redirect, and at most 64 KiB of a document is read.
package upstreamauth
