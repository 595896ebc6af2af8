package canonical

import (
	"errors"
	"strconv"
)

// Reason codes carried by [Error.Code]. They are stable wire values: HTTP
// handlers return them to callers as the error code of a rejected request.
const (
	// CodeNumberNotExact: the number's RFC 8785 form does not denote the
	// decimal value written (for example 9007199254740993, which a double
	// rounds to ...992). Such values belong in strings.
	CodeNumberNotExact = "number_not_exact"
	// CodeDuplicateKey: an object names the same member twice, compared
	// after escapes are decoded ("a" and "\u0061" are the same name).
	CodeDuplicateKey = "duplicate_key"
	// CodeInvalidUTF8: a string is not valid UTF-8.
	CodeInvalidUTF8 = "invalid_utf8"
	// CodeLoneSurrogate: a \u escape names half of a UTF-16 surrogate pair.
	CodeLoneSurrogate = "lone_surrogate"
	// CodeNumberRange: the number is NaN, infinite, or outside the range of
	// an IEEE-754 double (too large, or so small it would become zero).
	CodeNumberRange = "number_out_of_range"
	// CodeInvalidJSON: the text is not JSON (RFC 8259), or the value cannot
	// be marshaled to JSON.
	CodeInvalidJSON = "invalid_json"
	// CodeTooDeep: arrays and objects nest deeper than the limit.
	CodeTooDeep = "too_deep"
)

// Error reports why a JSON text or value has no RFC 8785 canonical form.
type Error struct {
	// Code is one of the Code* constants.
	Code string
	// Offset is the byte offset in the input where the problem was found,
	// or -1 when the input was a Go value rather than JSON text.
	Offset int64
	// Msg describes the problem. It never quotes the input, so it is safe
	// to log and to return to the sender.
	Msg string
}

func (e *Error) Error() string {
	if e.Offset < 0 {
		return "canonical: " + e.Code + ": " + e.Msg
	}
	return "canonical: " + e.Code + " at byte " + strconv.FormatInt(e.Offset, 10) + ": " + e.Msg
}

// IsCode reports whether err, or an error it wraps, is an [*Error] with the
// given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

func newError(code string, off int, msg string) *Error {
	return &Error{Code: code, Offset: int64(off), Msg: msg}
}
