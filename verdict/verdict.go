package verdict

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-json-experiment/json"

	"github.com/verdictgate/verdict/keys"
)

// Claims are the claims of a verdict. All are required; times are Unix seconds.
type Claims struct {
	Issuer     string   `json:"iss"`   // verdictd issuer id
	Subject    string   `json:"sub"`   // principal
	Audience   []string `json:"aud"`   // executor ids allowed to run it
	IssuedAt   int64    `json:"iat"`   //
	NotBefore  int64    `json:"nbf"`   //
	Expiry     int64    `json:"exp"`   //
	ID         string   `json:"jti"`   // single-use nonce, from NewID
	Server     string   `json:"srv"`   // server id
	Tool       string   `json:"tool"`  // tool name
	ToolDigest string   `json:"tsd"`   // "sha256:<hex>" of the tool definition
	Policy     string   `json:"pol"`   // policy version
	Arguments  string   `json:"args"`  // "sha256:<hex>" of the canonical call arguments
	Slots      []Slot   `json:"slots"` // every slot, condition and checklist item
	ActionKey  string   `json:"akey"`  //
	Phase      string   `json:"phase"` // "at_instruction" or "at_trigger"
	Record     string   `json:"rec"`   // decision record id
}

// A Slot is the result of one slot, condition or checklist item as the verdict binds it.
type Slot struct {
	ID     string  `json:"id"`
	Status string  `json:"status"` // "known" or "null": a verdict never carries an unknown slot
	Source *string `json:"source"` // nil when the slot has no source
}

// Slot statuses and sources a verdict may carry.
var (
	slotStatuses = []string{"known", "null"}
	slotSources  = []string{"user_answer", "instruction", "pre_set_data", "measured_data", "prior_state", "evaluation", "reviewed_draft", "console_approval"}
	phases       = []string{"at_instruction", "at_trigger"}
)

// NewID returns a fresh verdict id: the current time in milliseconds (48 bits) followed by
// 128 bits from crypto/rand, base64url without padding (30 characters).
//
// The random bits are the nonce; the time prefix is there for the stores. Every store that
// indexes verdicts by id (the executor's nonces and execution records, verdictd's decision
// records) keeps a B+tree that only grows: purely random ids put each insert on a random page of
// it, while ids issued close together in time land on the same few pages, so a group commit
// writes fewer pages. The prefix reveals nothing the verdict's iat does not already say.
// Verification accepts any id form: it never relies on the prefix.
func NewID() (string, error) { return newIDAt(time.Now()) }

func newIDAt(now time.Time) (string, error) {
	var b [22]byte
	ms := uint64(now.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	if _, err := rand.Read(b[6:]); err != nil {
		return "", fmt.Errorf("verdict: new id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Sign signs c as a verdict with s. It refuses claims that Verify would call malformed, so a
// verdict that leaves verdictd always has the full claim set.
func Sign(s *keys.Signer, c Claims) (string, error) {
	if c.Slots == nil {
		c.Slots = []Slot{}
	}
	return sign(s, &c, TypeVerdict, "sign")
}

// sign validates a verdict's claims or a receipt and signs its JSON as a token of typ; what
// names the operation in an error.
func sign(s *keys.Signer, v interface{ validate() error }, typ, what string) (string, error) {
	if err := v.validate(); err != nil {
		return "", fmt.Errorf("verdict: %s: %w", what, err)
	}
	payload, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("verdict: %s: %w", what, err)
	}
	return s.SignCompact(payload, typ)
}

// DefaultMaxTTL is the longest verdict lifetime accepted when an Expectation sets none: the
// largest verdict_ttl verdictd can be configured with.
const DefaultMaxTTL = 10 * time.Minute

// An Expectation is what the executor requires of a verdict for the call it is about to make.
type Expectation struct {
	// Issuers are the trusted issuers. A kid must be listed by exactly one of them, and the
	// token's iss must be that issuer.
	Issuers []TrustedIssuer
	// Algorithms allowed; nil means EdDSA only. Only EdDSA and ES256 can ever be allowed.
	Algorithms []jose.SignatureAlgorithm
	// Audience is the executor's own id; aud must contain it.
	Audience string
	// SoleAudience requires aud to name Audience and no other executor. An executor whose
	// nonce store guards only itself sets it: a verdict that named a second executor could
	// otherwise run once on each.
	SoleAudience bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Skew is the clock skew tolerated on exp, nbf and iat.
	Skew time.Duration
	// MaxTTL bounds exp-iat; zero means DefaultMaxTTL.
	MaxTTL time.Duration
	// ToolDigest returns the digest of the tool definition as the upstream server lists it now;
	// ok=false means the tool is unknown. Nil refuses every tool.
	ToolDigest func(server, tool string) (digest string, ok bool)
	// ArgumentsDigest is "sha256:<hex>" of the canonical arguments about to be sent.
	ArgumentsDigest string
}

// Verify is VerifyContext with context.Background().
func Verify(token string, want Expectation) (*Claims, error) {
	return VerifyContext(context.Background(), token, want)
}

// VerifyContext checks a verdict against want, in the contract's order, and returns its claims.
// Every refusal is an *Error. ctx bounds key lookups, which may refetch a remote key set.
// The nonce (jti) is not consumed here: that is the nonce store's job.
func VerifyContext(ctx context.Context, token string, want Expectation) (*Claims, error) {
	p, err := parse(token, TypeVerdict, want.Algorithms)
	if err != nil {
		return nil, err
	}
	c, err := decodeClaims(p.payload)
	if err != nil {
		return nil, refuse(Malformed, fmt.Errorf("claims: %w", err))
	}
	if err := p.authenticate(ctx, c.Issuer, want.Issuers); err != nil {
		// issuer_not_trusted is decided after the signature verified with a trusted key.
		if e := (*Error)(nil); errors.As(err, &e) && e.Reason == IssuerNotTrusted {
			e.Claims = c
		}
		return nil, err
	}
	if err := checkVerdict(c, want); err != nil {
		err.Claims = c
		return nil, err
	}
	return c, nil
}

// checkVerdict runs the checks of a verdict whose signature verified, from audience_mismatch
// on, in the contract's order.
func checkVerdict(c *Claims, want Expectation) *Error {
	if !slices.Contains(c.Audience, want.Audience) {
		return refuse(AudienceMismatch, fmt.Errorf("aud %q does not name %q", c.Audience, want.Audience))
	}
	if want.SoleAudience && slices.ContainsFunc(c.Audience, func(a string) bool { return a != want.Audience }) {
		return refuse(AudienceMismatch, fmt.Errorf("aud %q names another executor than %q, and single use is guarded here alone", c.Audience, want.Audience))
	}
	now := time.Now
	if want.Now != nil {
		now = want.Now
	}
	t := now()
	skew := max(want.Skew, 0)
	if !t.Before(time.Unix(c.Expiry, 0).Add(skew)) {
		return refuse(Expired, fmt.Errorf("exp %d, now %d, skew %s", c.Expiry, t.Unix(), skew))
	}
	if t.Before(time.Unix(c.NotBefore, 0).Add(-skew)) {
		return refuse(NotYetValid, fmt.Errorf("nbf %d, now %d, skew %s", c.NotBefore, t.Unix(), skew))
	}
	if t.Before(time.Unix(c.IssuedAt, 0).Add(-skew)) {
		return refuse(NotYetValid, fmt.Errorf("iat %d is in the future: now %d, skew %s", c.IssuedAt, t.Unix(), skew))
	}
	maxTTL := want.MaxTTL
	if maxTTL <= 0 {
		maxTTL = DefaultMaxTTL
	}
	// In seconds: exp-iat can be far too large for a time.Duration.
	if c.Expiry-c.IssuedAt > int64(maxTTL/time.Second) {
		return refuse(TTLTooLong, fmt.Errorf("exp-iat is %ds, more than %s", c.Expiry-c.IssuedAt, maxTTL))
	}
	var digest string
	ok := false
	if want.ToolDigest != nil {
		digest, ok = want.ToolDigest(c.Server, c.Tool)
	}
	if !ok {
		return refuse(UnknownTool, fmt.Errorf("no tool %q on server %q", c.Tool, c.Server))
	}
	if digest != c.ToolDigest {
		return refuse(SchemaChanged, fmt.Errorf("tool %s/%s definition is now %s, verdict has %s", c.Server, c.Tool, digest, c.ToolDigest))
	}
	if want.ArgumentsDigest != c.Arguments {
		return refuse(ArgumentsMismatch, fmt.Errorf("arguments digest %s, verdict has %s", want.ArgumentsDigest, c.Arguments))
	}
	return nil
}

func decodeClaims(payload []byte) (*Claims, error) { return decode[Claims](payload) }

// decode reads a verdict's claims or a receipt strictly (exact member names, no duplicates, no
// others) and validates their form, which refuses a missing member too.
func decode[T any, P interface {
	*T
	validate() error
}](payload []byte) (*T, error) {
	v := P(new(T))
	if err := unmarshal(payload, v); err != nil {
		return nil, err
	}
	if err := v.validate(); err != nil {
		return nil, err
	}
	return v, nil
}

// validate checks the form of every claim: what Sign refuses to sign and Verify calls malformed.
func (c *Claims) validate() error {
	for _, f := range []struct{ name, v string }{
		{"iss", c.Issuer}, {"sub", c.Subject}, {"srv", c.Server}, {"tool", c.Tool},
		{"pol", c.Policy}, {"akey", c.ActionKey}, {"rec", c.Record},
	} {
		if f.v == "" {
			return fmt.Errorf("%s is empty", f.name)
		}
	}
	if len(c.Audience) == 0 {
		return errors.New("aud is empty")
	}
	if slices.Contains(c.Audience, "") {
		return errors.New("aud holds an empty id")
	}
	if err := checkTimes(c.IssuedAt, c.NotBefore, c.Expiry); err != nil {
		return err
	}
	if err := checkID(c.ID); err != nil {
		return fmt.Errorf("jti: %w", err)
	}
	if err := checkDigest(c.ToolDigest); err != nil {
		return fmt.Errorf("tsd: %w", err)
	}
	if err := checkDigest(c.Arguments); err != nil {
		return fmt.Errorf("args: %w", err)
	}
	if c.Slots == nil {
		return errors.New("slots is missing")
	}
	for i, s := range c.Slots {
		if s.ID == "" {
			return fmt.Errorf("slots[%d]: empty id", i)
		}
		if !slices.Contains(slotStatuses, s.Status) {
			return fmt.Errorf("slots[%d] %q: status %q (a verdict carries only known or null slots)", i, s.ID, s.Status)
		}
		if s.Source != nil && !slices.Contains(slotSources, *s.Source) {
			return fmt.Errorf("slots[%d] %q: unknown source %q", i, s.ID, *s.Source)
		}
	}
	if !slices.Contains(phases, c.Phase) {
		return fmt.Errorf("phase %q", c.Phase)
	}
	return nil
}

// maxUnixSeconds is 9999-12-31T23:59:59Z; larger times are nonsense and would overflow sums.
const maxUnixSeconds = 253402300799

func checkTimes(iat, nbf, exp int64) error {
	for _, t := range []struct {
		name string
		v    int64
	}{{"iat", iat}, {"nbf", nbf}, {"exp", exp}} {
		if t.v <= 0 || t.v > maxUnixSeconds {
			return fmt.Errorf("%s %d is out of range", t.name, t.v)
		}
	}
	if exp <= iat {
		return fmt.Errorf("exp %d is not after iat %d", exp, iat)
	}
	return nil
}

// checkID checks a nonce: base64url without padding of at least 128 bits. It checks the
// encoding without decoding it, so a valid id costs no allocation.
func checkID(id string) error {
	if checkBase64URL(id) != nil {
		return errors.New("not base64url")
	}
	if n := base64.RawURLEncoding.DecodedLen(len(id)); n < 16 {
		return fmt.Errorf("%d bits, want at least 128", 8*n)
	}
	return nil
}

// checkDigest checks the form "sha256:" followed by 64 lowercase hex digits.
func checkDigest(d string) error {
	const prefix = "sha256:"
	if len(d) != len(prefix)+64 || d[:len(prefix)] != prefix {
		return fmt.Errorf("%q is not sha256:<64 hex digits>", d)
	}
	if strings.Trim(d[len(prefix):], "0123456789abcdef") != "" {
		return fmt.Errorf("%q is not sha256:<64 lowercase hex digits>", d)
	}
	return nil
}
