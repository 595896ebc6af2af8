package verdict

import "errors"

// A Reason is why a token was refused: one of the codes of the wire contract.
type Reason string

// The reasons, in the order Verify checks them; Replayed is decided by the nonce store.
const (
	Malformed         Reason = "malformed"
	AlgNotAllowed     Reason = "alg_not_allowed"
	TypMismatch       Reason = "typ_mismatch"
	UnknownKID        Reason = "unknown_kid"
	BadSignature      Reason = "bad_signature"
	IssuerNotTrusted  Reason = "issuer_not_trusted"
	AudienceMismatch  Reason = "audience_mismatch"
	Expired           Reason = "expired"
	NotYetValid       Reason = "not_yet_valid"
	TTLTooLong        Reason = "ttl_too_long"
	UnknownTool       Reason = "unknown_tool"
	SchemaChanged     Reason = "schema_changed"
	ArgumentsMismatch Reason = "arguments_mismatch"
	Replayed          Reason = "replayed"
)

// An Error is a refused token: the reason code and what exactly was wrong.
type Error struct {
	Reason Reason
	Err    error // detail; may be nil
	// Claims are the token's claims when it was refused after its signature verified with a
	// trusted key (issuer_not_trusted and every later reason), so that a refusal can be recorded
	// with what the verdict said without decoding it again; nil for an earlier refusal, whose
	// claims nobody vouches for.
	Claims *Claims
}

func (e *Error) Error() string {
	if e.Err == nil {
		return "verdict refused: " + string(e.Reason)
	}
	return "verdict refused: " + string(e.Reason) + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same reason and no detail, so that
// errors.Is(err, ErrReplayed) matches any replayed refusal.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Err == nil && t.Reason == e.Reason
}

// ErrReplayed is the refusal of a verdict whose jti was already consumed. The nonce store returns
// it (or wraps it) so callers branch on one set of reasons.
var ErrReplayed = &Error{Reason: Replayed}

// ReasonOf returns the reason of the first *Error in err's chain, or "" if there is none (an
// internal failure, not a refusal).
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func refuse(r Reason, err error) *Error { return &Error{Reason: r, Err: err} }
