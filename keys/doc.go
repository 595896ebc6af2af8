// Package keys owns the signing keys of verdictd and the executor and the public key sets that
// verify what they sign.
//
// A key is an Ed25519 (JOSE "EdDSA", the default) or P-256 (JOSE "ES256") key. Its key id is its
// RFC 7638 thumbprint (base64url of SHA-256), so a kid names exactly one key wherever it appears.
//
// A [Signer] holds a private key and never prints it. A [Set] is an immutable public key set read
// from or written as a JWKS. A [Ring] holds the current signer and the previous public keys still
// listed for verification, so keys rotate without invalidating tokens already issued. A [Remote]
// keeps a JWKS fetched from a file or an http(s) URL fresh, keeping the last good set when a
// refresh fails. Each of *Set, *Ring and *Remote is a [Source] of verification keys.
package keys
