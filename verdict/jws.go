package verdict

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
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

// MaxTokenBytes bounds a token. A verdict is well under 4 KiB; anything near this limit is refused
// before it is decoded at all.
const MaxTokenBytes = 64 << 10

// A TrustedIssuer is an issuer id and the keys it signs with.
type TrustedIssuer struct {
	ID   string
	Keys keys.Source
}

// header is the protected header, which holds exactly these three members.
type header struct {
	alg, kid, typ string
}

var headerMembers = []string{"alg", "kid", "typ"}

// parseCompact checks the shape of a compact JWS and returns its header and payload bytes. The
// payload is not yet authenticated.
func parseCompact(token string) (header, []byte, error) {
	var h header
	if len(token) > MaxTokenBytes {
		return h, nil, fmt.Errorf("token is %d bytes, more than %d", len(token), MaxTokenBytes)
	}
	if strings.HasPrefix(strings.TrimSpace(token), "{") {
		return h, nil, errors.New("JSON serialization is not accepted; use compact serialization")
	}
	rawHeader, rest, ok1 := strings.Cut(token, ".")
	rawPayload, rawSig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(rawSig, ".") {
		return h, nil, errors.New("compact serialization needs exactly three parts")
	}
	hb, err := decodePart(rawHeader)
	if err != nil {
		return h, nil, fmt.Errorf("header: %w", err)
	}
	payload, err := decodePart(rawPayload)
	if err != nil {
		return h, nil, fmt.Errorf("payload: %w", err)
	}
	// An empty signature is left to the alg and signature checks: it is what alg "none" looks
	// like, and that deserves its own reason.
	if rawSig != "" {
		if _, err := decodePart(rawSig); err != nil {
			return h, nil, fmt.Errorf("signature: %w", err)
		}
	}
	if !utf8.Valid(hb) || !utf8.Valid(payload) {
		return h, nil, errors.New("header or payload is not UTF-8")
	}
	r := newStrictReader(hb)
	err = r.object(headerMembers, func(i int) error {
		s, err := r.string()
		switch i {
		case 0:
			h.alg = s
		case 1:
			h.kid = s
		case 2:
			h.typ = s
		}
		return err
	})
	if err == nil {
		err = r.end()
	}
	if err != nil {
		return h, nil, fmt.Errorf("header (only alg, kid and typ are allowed): %w", err)
	}
	return h, payload, nil
}

// decodePart decodes one base64url part, without padding and with canonical trailing bits, so a
// token has exactly one encoding.
func decodePart(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	return base64.RawURLEncoding.Strict().DecodeString(s)
}

// supportedAlgs are the only algorithms any configuration can allow.
var supportedAlgs = []jose.SignatureAlgorithm{keys.EdDSA, keys.ES256}

// onlyAlg holds, for each supported algorithm, the one-element allow-list handed to go-jose once
// the key is known: the token may use its key's algorithm and nothing else. Read-only.
var onlyAlg = map[jose.SignatureAlgorithm][]jose.SignatureAlgorithm{
	keys.EdDSA: {keys.EdDSA},
	keys.ES256: {keys.ES256},
}

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

// checkHeader refuses an algorithm the configuration does not allow (before any key is looked
// up) and a token of another type.
func checkHeader(h header, wantTyp string, algs []jose.SignatureAlgorithm) error {
	if !allowedAlg(algs, h.alg) {
		return refuse(AlgNotAllowed, fmt.Errorf("alg %q is not allowed", h.alg))
	}
	if h.typ != wantTyp {
		return refuse(TypMismatch, fmt.Errorf("typ %q, want %q", h.typ, wantTyp))
	}
	return nil
}

// authenticate runs the key checks in contract order: unknown_kid, bad_signature,
// issuer_not_trusted. iss is the token's issuer claim, decoded but not yet trusted.
func authenticate(ctx context.Context, token string, h header, payload []byte, iss string, issuers []TrustedIssuer) error {
	var (
		key       keys.PublicKey
		owner     string
		found     bool
		ambiguous bool // listed by two different issuers
	)
	for _, ti := range issuers {
		if ti.Keys == nil {
			continue
		}
		k, ok := ti.Keys.Key(ctx, h.kid)
		if !ok {
			continue
		}
		if found && ti.ID != owner {
			ambiguous = true
		}
		key, owner, found = k, ti.ID, true
	}
	if !found {
		return refuse(UnknownKID, fmt.Errorf("kid %q is not a trusted key", h.kid))
	}
	if string(key.Algorithm()) != h.alg {
		return refuse(AlgNotAllowed, fmt.Errorf("alg %q on a token whose key %q is %s", h.alg, h.kid, key.Algorithm()))
	}
	obj, err := jose.ParseSignedCompact(token, onlyAlg[key.Algorithm()])
	if err != nil {
		return refuse(Malformed, err)
	}
	verified, err := obj.Verify(key.Key())
	if err != nil {
		return refuse(BadSignature, fmt.Errorf("signature does not verify with key %q", h.kid))
	}
	if !bytes.Equal(verified, payload) {
		// Cannot happen with a compact token; refuse rather than trust either copy.
		return refuse(Malformed, errors.New("payload differs between decoders"))
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
