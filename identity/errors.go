package identity

import (
	"errors"
	"fmt"
)

// A Reason is the stable code of a refusal. Callers branch on it with errors.Is (a Reason is
// an error that an *Error matches) or read it with ReasonOf; the text of an error is for people
// and may change.
type Reason string

// The reasons a token is refused.
const (
	TokenMissing      Reason = "token_missing"       // no bearer token in the request
	TokenMalformed    Reason = "token_malformed"     // not a JWS compact token, or its claims do not parse
	ClaimMissing      Reason = "claim_missing"       // a required claim (exp, the principal claim) is absent
	TokenExpired      Reason = "token_expired"       // exp is past, beyond the allowed skew
	TokenNotYetValid  Reason = "token_not_yet_valid" // nbf or iat is ahead, beyond the allowed skew
	LifetimeTooLong   Reason = "lifetime_too_long"   // exp - iat exceeds the issuer's max_token_lifetime
	WrongAudience     Reason = "wrong_audience"      // aud does not name this resource server
	WrongIssuer       Reason = "wrong_issuer"        // iss is not a configured issuer
	AlgNotAllowed     Reason = "alg_not_allowed"     // alg is not on the issuer's allow-list
	BadSignature      Reason = "bad_signature"       // the signature does not verify with the issuer's key
	UnknownKey        Reason = "unknown_key"         // kid names no key the issuer publishes
	IdPUnavailable    Reason = "idp_unavailable"     // the issuer's metadata, keys or introspection could not be had
	InsufficientScope Reason = "insufficient_scope"  // a required scope is not granted
	TokenInactive     Reason = "token_inactive"      // introspection says the token is not active
)

// Reasons returns every Reason, in the order of the table in docs/identity.md: for a daemon
// that counts refusals by reason and makes each series exist from the start.
func Reasons() []Reason {
	return []Reason{TokenMissing, TokenMalformed, ClaimMissing, TokenExpired, TokenNotYetValid, LifetimeTooLong, WrongAudience,
		WrongIssuer, AlgNotAllowed, BadSignature, UnknownKey, IdPUnavailable, InsufficientScope, TokenInactive}
}

// Error implements error, so that errors.Is(err, identity.TokenExpired) reads as it means.
func (r Reason) Error() string { return string(r) }

// An Error is a refusal: its Reason, the issuer concerned when one is known, and the cause.
// Its message may carry details of the token; never echo it to the caller of the resource
// server, whose answer WriteError builds from the Reason alone.
type Error struct {
	Reason Reason
	Issuer string // the configured issuer the token was checked against, if any
	Err    error  // the cause, if any
}

func (e *Error) Error() string {
	msg := "identity: " + string(e.Reason)
	if e.Issuer != "" {
		msg += " (issuer " + e.Issuer + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is e's Reason.
func (e *Error) Is(target error) bool {
	r, ok := target.(Reason)
	return ok && r == e.Reason
}

// ReasonOf returns the Reason of the *Error in err's chain, or "" when there is none.
func ReasonOf(err error) Reason {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Reason
	}
	return ""
}

func refuse(r Reason, issuer string, format string, args ...any) *Error {
	return &Error{Reason: r, Issuer: issuer, Err: fmt.Errorf(format, args...)}
}
