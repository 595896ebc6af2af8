// Package apijson is the one codec of package api's types, on encoding/json/v2
// (github.com/go-json-experiment/json): it reads them with numbers kept exact as json.Number
// and the types whose JSON is not their struct shape read by the functions here, a request
// strictly; and it writes the decision record (AppendRecord).
package apijson

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/verdictgate/verdict/api"
)

// strictOptions are how a request is read: member names match exactly (a name that differs
// only in case, or by a Unicode folding such as the long s, is unknown), unknown and duplicate
// members are refused, and the few types whose JSON is not their struct shape are read by the
// functions below.
var strictOptions = jsonv2.JoinOptions(jsonv2.RejectUnknownMembers(true), wireUnmarshalers)

// wireUnmarshalers read the types whose JSON is not their struct shape, and every value of
// type any with its numbers exact.
var wireUnmarshalers = jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(
	jsonv2.UnmarshalFromFunc(unmarshalInstruction),
	jsonv2.UnmarshalFromFunc(unmarshalCandidate),
	jsonv2.UnmarshalFromFunc(unmarshalSpan),
	jsonv2.UnmarshalFromFunc(unmarshalValue),
	jsonv2.UnmarshalFromFunc(unmarshalAny),
))

// ExactNumbers is the option that reads every value of type any with its numbers as
// json.Number holding their exact text, for decoders of other types that carry values from
// outside (a config's pre-set data): encoding/json/v2 would round them to float64.
var ExactNumbers = jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(unmarshalAny))

// Unmarshal reads data written from api's types (a stored record, a deferred intent, a
// decision record answered by verdictd) into v: numbers exact, a value's presence kept. Members
// v has no field for are skipped, so that a record a newer version wrote with more members
// still reads.
func Unmarshal(data []byte, v any) error { return jsonv2.Unmarshal(data, v, wireUnmarshalers) }

// UnmarshalStrict reads a request into v: as Unmarshal, and a member that is not exactly one of
// its type's names, or is there twice, is an error that matches ErrUnknownMember or
// ErrDuplicateMember. Every error is a *Error.
func UnmarshalStrict(data []byte, v any) error {
	if err := jsonv2.Unmarshal(data, v, strictOptions); err != nil {
		return &Error{err: err}
	}
	return nil
}

// Errors a strict read is told apart by.
var (
	ErrUnknownMember   = jsonv2.ErrUnknownName
	ErrDuplicateMember = jsontext.ErrDuplicateName
)

// Error is a refusal of UnmarshalStrict, worded for the sender: where in the body it happened
// (a JSON pointer) and what was wrong, without the Go type names a sender cannot act on.
type Error struct{ err error }

func (e *Error) Error() string { return describe(e.err) }

func (e *Error) Unwrap() error { return e.err }

// errSpan is the refusal of a span that is not two integers.
var errSpan = errors.New("span must be two integers")

// errCandidate* are the refusals of a candidate whose members do not fit together.
var (
	errCandidateValue    = errors.New("candidate: value is required")
	errCandidateLocation = errors.New("candidate: segment and span come together")
)

func describe(err error) string {
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) {
		return err.Error()
	}
	where := cmp.Or(string(se.JSONPointer), "the body")
	switch {
	case errors.Is(err, jsonv2.ErrUnknownName):
		return fmt.Sprintf("unknown member at %s", where)
	case errors.Is(err, jsontext.ErrDuplicateName):
		return fmt.Sprintf("duplicate member at %s", where)
	case se.Err != nil:
		return fmt.Sprintf("%s: %v", where, se.Err)
	case se.JSONKind != 0:
		return fmt.Sprintf("%s: unexpected JSON %s", where, se.JSONKind)
	default:
		return fmt.Sprintf("%s: %v", where, err)
	}
}

// unmarshalInstruction reads an array of segments, or a plain string (which disables the
// instruction source), or null.
func unmarshalInstruction(dec *jsontext.Decoder, in *api.Instruction) error {
	switch dec.PeekKind() {
	case '"':
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		*in = api.Instruction{Plain: true, Text: tok.String()}
		return nil
	case 'n':
		*in = api.Instruction{}
		_, err := dec.ReadToken()
		return err
	}
	var segs []api.Segment
	if err := jsonv2.UnmarshalDecode(dec, &segs); err != nil {
		return err
	}
	*in = api.Instruction{Segments: segs}
	return nil
}

// candidate is api.Candidate as it is read: with its value's presence.
type candidate struct {
	Field   string    `json:"field"`
	Segment *int      `json:"segment,omitempty"`
	Span    *api.Span `json:"span,omitempty"`
	Value   api.Value `json:"value"`
}

// unmarshalCandidate reads a candidate and checks that its value is present (null is a value)
// and that segment and span come together.
func unmarshalCandidate(dec *jsontext.Decoder, c *api.Candidate) error {
	var cj candidate
	if err := jsonv2.UnmarshalDecode(dec, &cj); err != nil {
		return err
	}
	if !cj.Value.Set {
		return errCandidateValue
	}
	if (cj.Segment == nil) != (cj.Span == nil) {
		return errCandidateLocation
	}
	*c = api.Candidate{Field: cj.Field, Segment: cj.Segment, Span: cj.Span, Value: cj.Value.V}
	return nil
}

// unmarshalSpan reads exactly two integers; null is not a span.
func unmarshalSpan(dec *jsontext.Decoder, s *api.Span) error {
	if dec.PeekKind() != '[' {
		_, _ = dec.ReadValue()
		return errSpan
	}
	var a [2]int
	if err := jsonv2.UnmarshalDecode(dec, &a); err != nil {
		return errSpan
	}
	*s = a
	return nil
}

// unmarshalValue reads any JSON value, numbers kept as json.Number holding the exact text
// sent, and records that the member was present (an explicit null is a value).
func unmarshalValue(dec *jsontext.Decoder, v *api.Value) error {
	x, err := readAny(dec)
	if err != nil {
		return err
	}
	*v = api.Value{Set: true, V: x}
	return nil
}

// unmarshalAny reads a value of type any with its numbers as json.Number.
func unmarshalAny(dec *jsontext.Decoder, v *any) error {
	x, err := readAny(dec)
	if err != nil {
		return err
	}
	*v = x
	return nil
}

// readAny reads the next value as encoding/json decodes it into an interface value with
// UseNumber: objects as map[string]any, arrays as []any, numbers as json.Number.
func readAny(dec *jsontext.Decoder) (any, error) {
	switch dec.PeekKind() {
	case '{':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		m := make(map[string]any)
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			name := tok.String() // a token is void after the next read
			v, err := readAny(dec)
			if err != nil {
				return nil, err
			}
			m[name] = v
		}
		_, err := dec.ReadToken()
		return m, err
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		a := []any{}
		for dec.PeekKind() != ']' {
			v, err := readAny(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.ReadToken()
		return a, err
	case '0':
		raw, err := dec.ReadValue()
		return json.Number(raw), err
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '"':
		return tok.String(), nil
	case 't', 'f':
		return tok.Bool(), nil
	default:
		return nil, nil
	}
}
