// Package verdict owns the signed tokens that cross the boundary between verdictd and the
// executor: the verdict (typ "verdict+jwt"), which authorizes exactly one tool call, and the
// execution receipt (typ "execution-receipt+jwt"), which reports what the executor did with it.
//
// Both are JWS in compact serialization with a protected header of exactly alg, kid and typ,
// signed with a [keys.Signer]. Verification is strict and fail-closed, and every refusal is an
// [*Error] carrying one [Reason] from the wire contract, checked in a fixed order:
//
//	malformed, alg_not_allowed, typ_mismatch, unknown_kid, bad_signature, issuer_not_trusted,
//	audience_mismatch, expired, not_yet_valid, ttl_too_long, unknown_tool, schema_changed,
//	arguments_mismatch
//
// (replayed is decided later, by the nonce store, with [ErrReplayed]).
//
// Decisions a reader may look for:
//
//   - The token is checked for shape before anything else: size, three strict base64url parts
//     and a header of exactly {"alg","kid","typ"}, with duplicate or differently-cased members
//     refused. So a header naming crit, jku, x5u, jwk, zip, b64 or anything else is malformed, as
//     is a JSON-serialized token (the only way to carry two signatures). The claim set depends on
//     typ, so the payload is checked for shape (exactly the required claims, well formed) right
//     after alg and typ, and is malformed before any key is looked up; a receipt offered as a
//     verdict is therefore typ_mismatch. Claims are decoded but not trusted until the signature
//     verifies.
//   - The algorithm allow-list comes from the verifier's configuration and is intersected with
//     {EdDSA, ES256}; "none", HMAC and the rest are refused before any key is looked up. A key
//     verifies only the algorithm of its own type: a token whose alg differs from its key's is
//     alg_not_allowed, so an ES256 key never verifies an EdDSA token or the reverse.
//   - The key that verified decides the issuer: the kid is resolved among the trusted issuers'
//     key sets, and the token's iss must name the issuer that listed that key. A kid listed by
//     issuer B on a token claiming issuer A is issuer_not_trusted, and so is a kid listed by two
//     issuers, since the key then cannot tell them apart.
//   - Tokens are signed with go-jose. A token is verified from the one parse that checked its
//     shape: the signature over its first two parts, as they stand, with crypto/ed25519 or
//     crypto/ecdsa, which is all RFC 7515 leaves once the header holds nothing but alg, kid and
//     typ. A property and a fuzz target hold that verification to go-jose's.
//   - An ES256 signature has a second valid form, (r, n-s), which go-jose and crypto/ecdsa both
//     accept: an ES256 token can be re-encoded by anyone who holds it. Nothing here keys on a
//     token's bytes; a verdict is used once by its jti, in the nonce store.
//   - Times are whole seconds. With skew s, a token is expired from exp+s on, not yet valid before
//     nbf-s or iat-s, and its exp-iat may not exceed the configured maximum TTL.
package verdict
