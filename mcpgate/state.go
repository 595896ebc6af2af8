package mcpgate

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/api"
)

// Reasons a requestState is refused. Each is also the reason code the
// tool error carries in _meta["io.verdict/reason"].
var (
	// ErrStateInvalid: the token is malformed or its MAC does not verify
	// (forged, truncated, or sealed under another key).
	ErrStateInvalid = errors.New(api.ReasonStateInvalid)
	// ErrStateExpired: the token verified but its expiry has passed.
	ErrStateExpired = errors.New(api.ReasonStateExpired)
	// ErrStateMismatch: the token was issued for another principal, tool
	// or argument object than the call that carries it.
	ErrStateMismatch = errors.New(api.ReasonStateMismatch)
	// ErrStateReplayed: the token was already used, or this gateway never
	// issued a continuation for it (for example after a restart).
	ErrStateReplayed = errors.New(api.ReasonStateReplayed)
)

// stateVersion prefixes every token; the MAC covers it via the domain
// separator.
const stateVersion = "v1"

// macDomain separates requestState MACs from anything else the same key
// might ever sign.
const macDomain = "io.verdict/mcpgate/request-state/v1\x00"

// StateClaims are what a requestState binds. The token carries them in
// the clear (base64url JSON): nothing in them is secret to the client
// that made the call.
type StateClaims struct {
	Principal   string   `json:"p"`
	Tool        string   `json:"t"` // the exposed name, "server.tool"
	ArgsDigest  string   `json:"a"` // canonical digest of the call's arguments
	QuestionIDs []string `json:"q"` // the questions this round asks
	Expiry      int64    `json:"e"` // unix seconds
	Nonce       string   `json:"n"` // 128 random bits, base64url; the single-use key
}

// StateCodec seals and opens requestState tokens with HMAC-SHA256.
type StateCodec struct {
	key []byte
}

// NewStateCodec returns a codec over key, which must be at least
// MinStateKeyBytes long.
func NewStateCodec(key []byte) (*StateCodec, error) {
	if len(key) < MinStateKeyBytes {
		return nil, fmt.Errorf("state key: %d bytes, need at least %d", len(key), MinStateKeyBytes)
	}
	return &StateCodec{key: slices.Clone(key)}, nil
}

func (c *StateCodec) mac(payload string) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(macDomain))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// Seal returns the token for claims: "v1.<payload>.<mac>", both parts
// base64url without padding.
func (c *StateCodec) Seal(claims StateClaims) (string, error) {
	b, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	payload := stateVersion + "." + base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(c.mac(payload)), nil
}

// maxStateLen bounds the token a client may send back; a sealed token is
// far shorter.
const maxStateLen = 8 << 10

// Open verifies tok and returns its claims. It checks the MAC before
// reading anything else, then the expiry against now. It does not check
// the binding nor single use: see [Gateway] for both.
func (c *StateCodec) Open(tok string, now time.Time) (StateClaims, error) {
	var zero StateClaims
	if len(tok) > maxStateLen {
		return zero, fmt.Errorf("%w: too long", ErrStateInvalid)
	}
	i := strings.LastIndexByte(tok, '.')
	if i < 0 {
		return zero, fmt.Errorf("%w: not a sealed token", ErrStateInvalid)
	}
	payload, sig := tok[:i], tok[i+1:]
	got, err := decodeCanonical(sig)
	if err != nil || !hmac.Equal(got, c.mac(payload)) {
		return zero, fmt.Errorf("%w: signature does not verify", ErrStateInvalid)
	}
	ver, body, ok := strings.Cut(payload, ".")
	if !ok || ver != stateVersion {
		return zero, fmt.Errorf("%w: unknown version", ErrStateInvalid)
	}
	b, err := decodeCanonical(body)
	if err != nil {
		return zero, fmt.Errorf("%w: payload: %v", ErrStateInvalid, err)
	}
	var claims StateClaims
	if err := json.Unmarshal(b, &claims); err != nil {
		return zero, fmt.Errorf("%w: payload: %v", ErrStateInvalid, err)
	}
	if claims.Nonce == "" || claims.Expiry == 0 {
		return zero, fmt.Errorf("%w: incomplete claims", ErrStateInvalid)
	}
	if now.Unix() >= claims.Expiry {
		return zero, ErrStateExpired
	}
	return claims, nil
}

// Check reports whether claims were issued for this principal, tool and
// argument digest.
func (s StateClaims) Check(principal, tool, argsDigest string) error {
	switch {
	case s.Principal != principal:
		return fmt.Errorf("%w: issued to another principal", ErrStateMismatch)
	case s.Tool != tool:
		return fmt.Errorf("%w: issued for another tool", ErrStateMismatch)
	case s.ArgsDigest != argsDigest:
		return fmt.Errorf("%w: issued for other arguments", ErrStateMismatch)
	}
	return nil
}

// decodeCanonical decodes unpadded base64url and accepts only the one
// spelling Seal writes: the decoder skips CR and LF even in strict mode, so
// without the re-encoding check a token with a line break in its signature
// would open as well as the token that was sealed.
func decodeCanonical(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, err
	}
	if base64.RawURLEncoding.EncodedLen(len(b)) != len(s) {
		return nil, errors.New("not canonical base64url")
	}
	return b, nil
}

// newNonce returns 128 random bits, base64url.
func newNonce() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
