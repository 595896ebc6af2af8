package verdict

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"unicode/utf8"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/keys"
)

// Token types (the "typ" header). Distinct types keep one kind of token from ever verifying as
// the other (RFC 8725 §3.11).
const (
	TypeVerdict = "verdict+jwt"
	TypeReceipt = "execution-receipt+jwt"
)

// MaxTokenBytes bounds a token. A verdict with a hundred slots is under 8 KiB; a larger token is
// refused before any of it is decoded.
const MaxTokenBytes = 64 << 10

// A TrustedIssuer is an issuer id and the keys it signs with. Every trusted issuer's Keys is asked
// for a token's kid, so that a kid listed by two issuers is caught; a keys.Remote that misses
// refetches at most once per its MinRefetch.
type TrustedIssuer struct {
	ID   string
	Keys keys.Source
}

// header is the protected header, which holds exactly these three members.
type header struct {
	alg, kid, typ string
}

// A parsed token passed the shape, alg and typ checks. Its payload is not yet trusted.
type parsed struct {
	header  header
	signed  string // the JWS signing input: the encoded header and payload, as the token has them
	sig     []byte
	payload []byte
}

// parse runs the checks that need no key, in contract order: malformed (the token's shape and
// its header), alg_not_allowed, typ_mismatch. The payload's claims are for the caller to check.
func parse(token, wantTyp string, algs []jose.SignatureAlgorithm) (parsed, error) {
	p, err := parseCompact(token)
	if err != nil {
		return parsed{}, refuse(Malformed, err)
	}
	if !allowedAlg(algs, p.header.alg) {
		return parsed{}, refuse(AlgNotAllowed, fmt.Errorf("alg %q is not allowed", p.header.alg))
	}
	if p.header.typ != wantTyp {
		return parsed{}, refuse(TypMismatch, fmt.Errorf("typ %q, want %q", p.header.typ, wantTyp))
	}
	if !utf8.Valid(p.payload) {
		return parsed{}, refuse(Malformed, errors.New("payload is not UTF-8"))
	}
	return p, nil
}

// parseCompact checks the shape of a compact JWS and decodes its parts. Its header holds alg,
// kid and typ and nothing else, so no member can change how the token is read or verified
// (crit, b64, jku, x5u, an embedded jwk: RFC 7515's and RFC 7797's) and the signing input is
// the token's first two parts as they stand.
func parseCompact(token string) (parsed, error) {
	var p parsed
	if len(token) > MaxTokenBytes {
		return p, fmt.Errorf("token is %d bytes, more than %d", len(token), MaxTokenBytes)
	}
	if strings.HasPrefix(strings.TrimSpace(token), "{") {
		return p, errors.New("JSON serialization is not accepted; use compact serialization")
	}
	rawHeader, rest, ok1 := strings.Cut(token, ".")
	rawPayload, rawSig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(rawSig, ".") {
		return p, errors.New("compact serialization needs exactly three parts")
	}
	if rawHeader == "" {
		return p, errors.New("empty header")
	}
	if err := checkBase64URL(rawHeader); err != nil {
		return p, fmt.Errorf("header is not base64url: %w", err)
	}
	// A header of the three members fits the stack buffer; one that does not is decoded all the
	// same, and then refused by the member check.
	var buf [256]byte
	hb := buf[:0]
	if n := base64.RawURLEncoding.DecodedLen(len(rawHeader)); n > len(buf) {
		hb = make([]byte, 0, n)
	}
	hb = appendBase64URL(hb, rawHeader)
	if rawPayload == "" {
		return p, errors.New("empty payload")
	}
	if err := checkBase64URL(rawPayload); err != nil {
		return p, fmt.Errorf("payload: %w", err)
	}
	// An empty signature is left to the alg and signature checks: it is what alg "none" looks
	// like, and that deserves its own reason.
	if err := checkBase64URL(rawSig); err != nil {
		return p, fmt.Errorf("signature: %w", err)
	}
	if !utf8.Valid(hb) {
		return p, errors.New("header is not UTF-8")
	}
	h, err := decodeHeader(hb)
	if err != nil {
		return p, fmt.Errorf("header (only alg, kid and typ are allowed): %w", err)
	}
	// The payload and the signature in one allocation; neither is written to once decoded.
	dec := make([]byte, 0, base64.RawURLEncoding.DecodedLen(len(rawPayload))+base64.RawURLEncoding.DecodedLen(len(rawSig)))
	dec = appendBase64URL(dec, rawPayload)
	n := len(dec)
	dec = appendBase64URL(dec, rawSig)
	return parsed{
		header:  h,
		signed:  token[:len(rawHeader)+1+len(rawPayload)],
		payload: dec[:n:n],
		sig:     dec[n:],
	}, nil
}

// checkBase64URL checks, without decoding, that s is base64url without padding, with no white
// space (which Go's decoder would skip) and canonical trailing bits: a token has exactly one
// encoding.
func checkBase64URL(s string) error {
	if len(s)%4 == 1 {
		return errors.New("impossible base64 length")
	}
	// Branch-free over the input: or-ing the table entries sets the high bit for any byte
	// outside the alphabet.
	var acc byte
	for i := 0; i < len(s); i++ {
		acc |= base64URLValue[s[i]]
	}
	if acc&invalidBase64 != 0 {
		for i := 0; i < len(s); i++ {
			if base64URLValue[s[i]] == invalidBase64 {
				return fmt.Errorf("byte %d is not base64url", i)
			}
		}
	}
	if len(s) == 0 {
		return nil
	}
	last := base64URLValue[s[len(s)-1]]
	if len(s)%4 == 2 && last&0x0f != 0 || len(s)%4 == 3 && last&0x03 != 0 {
		return errors.New("non-canonical base64 ending")
	}
	return nil
}

// appendBase64URL appends the bytes s encodes. s must have passed checkBase64URL.
func appendBase64URL(dst []byte, s string) []byte {
	for len(s) >= 4 {
		v := uint32(base64URLValue[s[0]])<<18 | uint32(base64URLValue[s[1]])<<12 |
			uint32(base64URLValue[s[2]])<<6 | uint32(base64URLValue[s[3]])
		dst = append(dst, byte(v>>16), byte(v>>8), byte(v))
		s = s[4:]
	}
	switch len(s) {
	case 2:
		v := uint32(base64URLValue[s[0]])<<18 | uint32(base64URLValue[s[1]])<<12
		dst = append(dst, byte(v>>16))
	case 3:
		v := uint32(base64URLValue[s[0]])<<18 | uint32(base64URLValue[s[1]])<<12 | uint32(base64URLValue[s[2]])<<6
		dst = append(dst, byte(v>>16), byte(v>>8))
	}
	return dst
}

// invalidBase64 marks, in base64URLValue, a byte outside the base64url alphabet.
const invalidBase64 = 0x80

// base64URLValue maps each byte to its base64url value, or to invalidBase64. Read-only.
var base64URLValue = func() (t [256]byte) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range t {
		t[i] = invalidBase64
	}
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = byte(i)
	}
	return t
}()

// supportedAlgs are the only algorithms any configuration can allow.
var supportedAlgs = []jose.SignatureAlgorithm{keys.EdDSA, keys.ES256}

// allowedAlg reports whether alg is configured: configured algorithms (EdDSA alone if none are)
// intersected with the supported ones.
func allowedAlg(configured []jose.SignatureAlgorithm, alg string) bool {
	a := jose.SignatureAlgorithm(alg)
	if !slices.Contains(supportedAlgs, a) {
		return false
	}
	if len(configured) == 0 {
		return a == keys.EdDSA
	}
	return slices.Contains(configured, a)
}

// authenticate runs the key checks in contract order: unknown_kid, bad_signature,
// issuer_not_trusted. iss is the token's issuer claim, decoded but not yet trusted.
func (p *parsed) authenticate(ctx context.Context, iss string, issuers []TrustedIssuer) error {
	h := p.header
	key, owner, found, ambiguous := cachedKey(issuers, h.kid)
	if !found {
		key, owner, found = fetchKey(ctx, issuers, h.kid)
		if found {
			// A fetch brought the key in; another issuer listing it too still makes it ambiguous.
			_, other, _, amb := cachedKey(issuers, h.kid)
			ambiguous = amb || other != owner
		}
	}
	if !found {
		return refuse(UnknownKID, fmt.Errorf("kid %q is not a trusted key", h.kid))
	}
	if string(key.Algorithm()) != h.alg {
		return refuse(AlgNotAllowed, fmt.Errorf("alg %q on a token whose key %q is %s", h.alg, h.kid, key.Algorithm()))
	}
	if !verifySignature(key.Key(), p.signed, p.sig) {
		return refuse(BadSignature, fmt.Errorf("signature does not verify with key %q", h.kid))
	}
	// The key that verified decides the issuer.
	if ambiguous {
		return refuse(IssuerNotTrusted, fmt.Errorf("key %q is listed by more than one trusted issuer", h.kid))
	}
	if iss != owner {
		return refuse(IssuerNotTrusted, fmt.Errorf("iss %q, but key %q belongs to issuer %q", iss, h.kid, owner))
	}
	return nil
}

// cachedKey looks kid up in what every issuer already holds, without I/O. Sources that cannot
// answer from a cache are asked directly (a static Set never blocks).
func cachedKey(issuers []TrustedIssuer, kid string) (key keys.PublicKey, owner string, found, ambiguous bool) {
	for _, ti := range issuers {
		if ti.Keys == nil {
			continue
		}
		var (
			k  keys.PublicKey
			ok bool
		)
		if c, isCache := ti.Keys.(keys.Cache); isCache {
			k, ok = c.Lookup(kid)
		} else {
			k, ok = ti.Keys.Key(context.Background(), kid)
		}
		if !ok {
			continue
		}
		if found && ti.ID != owner {
			ambiguous = true
		}
		key, owner, found = k, ti.ID, true
	}
	return key, owner, found, ambiguous
}

// fetchKey asks every cache-backed issuer to look kid up, fetching its key set if it must, all at
// once: the first to find it wins and the others are cancelled, so one slow key server costs a
// token whose key it does not hold nothing.
func fetchKey(ctx context.Context, issuers []TrustedIssuer, kid string) (keys.PublicKey, string, bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type hit struct {
		key   keys.PublicKey
		owner string
		ok    bool
	}
	results := make(chan hit, len(issuers))
	n := 0
	for _, ti := range issuers {
		if _, isCache := ti.Keys.(keys.Cache); !isCache {
			continue // already asked in full by cachedKey
		}
		n++
		go func() {
			k, ok := ti.Keys.Key(ctx, kid)
			results <- hit{k, ti.ID, ok}
		}()
	}
	for range n {
		if h := <-results; h.ok {
			return h.key, h.owner, true
		}
	}
	return keys.PublicKey{}, "", false
}

// verifySignature reports whether sig is a signature of signed by key, as RFC 7518 defines
// EdDSA (RFC 8037) and ES256: Ed25519 over the signing input, or ECDSA P-256 over its SHA-256
// with R and S as 32 bytes each. key's algorithm is the token's, checked by the caller. go-jose,
// which signs, verifies the same way: TestSignatureAgreesWithGoJose and
// FuzzSignatureAgreesWithGoJose hold the two to the same answer on tokens go-jose signed, then
// changed or cut, and on any header and payload validly signed. Verifying from the parts
// parseCompact already decoded spares a second parse of the token, the half of verification
// that is not the signature itself.
func verifySignature(key crypto.PublicKey, signed string, sig []byte) bool {
	switch k := key.(type) {
	case ed25519.PublicKey:
		return len(k) == ed25519.PublicKeySize && ed25519.Verify(k, []byte(signed), sig)
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() || len(sig) != 64 {
			return false
		}
		digest := sha256.Sum256([]byte(signed))
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(k, digest[:], r, s)
	}
	return false
}
