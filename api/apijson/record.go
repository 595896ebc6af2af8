package apijson

import (
	"encoding/json"
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/verdictgate/verdict/api"
)

// The decision record is described once, by the struct tags of Record and the types it holds,
// and written by encoding/json/v2 with recordOptions. The options keep what the record meant
// when encoding/json wrote it:
//
//   - A nil slice or map is null, not [] or {}: "slots": null says no count was made
//     (docs/preflight.md), and a run that made the count sets the slice, empty or not.
//   - Map members are written in sorted order, so that the same record is the same bytes.
//   - Invalid UTF-8 in a string (an upstream's error text, a measured value) is written as
//     U+FFFD: a record reports what happened and is never refused for what it reports.
//   - A json.Number, the form the request decoder gives every number in an argument value, is
//     the number it holds; encoding/json/v2 would write its text as a JSON string.
//
// <, >, &, U+2028 and U+2029 are no longer escaped: JSON does not need it, and no record is
// embedded in HTML or JavaScript source.
//
// In the tags, omitzero leaves out a zero Go value (false, 0, a nil pointer or interface), and
// omitempty whatever encodes as "", null, [] or {}. omitempty is for strings, slices and maps
// only: on an any it would leave out a known value of "" or [].
var recordOptions = jsonv2.JoinOptions(
	jsonv2.FormatNilSliceAsNull(true),
	jsonv2.FormatNilMapAsNull(true),
	jsonv2.Deterministic(true),
	jsontext.AllowInvalidUTF8(true),
	jsonv2.WithMarshalers(jsonv2.MarshalToFunc(marshalNumber)),
)

// AppendRecord appends r's JSON, one compact object, to b. verdictd encodes each record once,
// into the value the store keeps; those bytes are the response too. On error, b is returned as
// it was.
func AppendRecord(b []byte, r *api.Record) ([]byte, error) {
	w := appendWriter{b: b}
	if err := jsonv2.MarshalWrite(&w, r, recordOptions); err != nil {
		return b, fmt.Errorf("encode record: %w", err)
	}
	return w.b, nil
}

// appendWriter appends what is written to it to b. The encoder writes through its own pooled
// buffer, so a b sized for the record (verdictd sizes it from the previous one) is never
// grown. A bytes.Buffer would be written in place, but the encoder then keeps a quarter of
// the length free, which reallocates a buffer sized to fit.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// marshalNumber writes n as the JSON number it holds, its text unchanged. As encoding/json
// did, an empty Number is 0 and text that is not a JSON number (surrounding whitespace
// included) is an error.
func marshalNumber(enc *jsontext.Encoder, n json.Number) error {
	if n == "" {
		n = "0"
	}
	v := jsontext.Value(n)
	if v.Kind() != '0' || strings.Trim(string(n), " \t\r\n") != string(n) {
		return fmt.Errorf("invalid number literal %q", string(n))
	}
	return enc.WriteValue(v)
}

// CaptureMember is the member of a stored decision record that holds its capture.
const CaptureMember = "capture"

// AppendCapture appends c as the last member ("capture") of the record b ends with, which
// AppendRecord wrote: a stored record that keeps its capture. On error, b is returned as it
// was.
func AppendCapture(b []byte, c *api.Capture) ([]byte, error) {
	if len(b) < 2 || b[len(b)-1] != '}' {
		return b, fmt.Errorf("encode capture: the record does not end its object")
	}
	w := appendWriter{b: append(b[:len(b)-1], `,"`+CaptureMember+`":`...)}
	if err := jsonv2.MarshalWrite(&w, c, recordOptions); err != nil {
		return append(b[:len(b)-1], '}'), fmt.Errorf("encode capture: %w", err)
	}
	return append(w.b, '}'), nil
}
