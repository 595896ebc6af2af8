package verdict

import (
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The JSON of a token's header and claims is described once, by the struct tags of header,
// Claims, Slot and Receipt, and read and written by json (encoding/json/v2). Decoding is strict:
// its defaults already refuse a member name that matches only up to case ({"TYP":...} must not
// be read as the issuer's "typ"), a duplicate name (a second "aud" must not overwrite the
// first) and invalid UTF-8, and strictOptions adds unknown members. What v2 does not do is
// require a member: a missing claim is caught by validate (every claim has a form a zero value
// does not pass), and the two members whose absence their zero value cannot show (the header's,
// and a slot's nullable "source") are read through a presence check below.
var strictOptions = json.JoinOptions(
	json.RejectUnknownMembers(true),
	json.WithUnmarshalers(json.UnmarshalFromFunc(unmarshalSlot)),
)

// errMissingMember is wrapped by every refusal of a JSON object that lacks a required member.
var errMissingMember = errors.New("missing member")

// unmarshal decodes data, one JSON value, strictly into v.
func unmarshal(data []byte, v any) error { return json.Unmarshal(data, v, strictOptions) }

// wireHeader is the protected header as read: pointers tell a missing member from an empty one.
type wireHeader struct {
	Alg *string `json:"alg"`
	Kid *string `json:"kid"`
	Typ *string `json:"typ"`
}

// decodeHeader reads a header that holds exactly alg, kid and typ, each a string.
func decodeHeader(data []byte) (header, error) {
	var w wireHeader
	if err := unmarshal(data, &w); err != nil {
		return header{}, err
	}
	for _, m := range []struct {
		name string
		v    *string
	}{{"alg", w.Alg}, {"kid", w.Kid}, {"typ", w.Typ}} {
		if m.v == nil {
			return header{}, fmt.Errorf("%w %q", errMissingMember, m.name)
		}
	}
	return header{alg: *w.Alg, kid: *w.Kid, typ: *w.Typ}, nil
}

// unmarshalSlot reads one slot. Slot.Source is nil both for "source":null and for no "source"
// at all, and only the first is a slot without a source; the member is read as a raw value to
// tell them apart.
func unmarshalSlot(dec *jsontext.Decoder, s *Slot) error {
	var w struct {
		ID     string         `json:"id"`
		Status string         `json:"status"`
		Source jsontext.Value `json:"source"`
	}
	if err := json.UnmarshalDecode(dec, &w); err != nil {
		return err
	}
	*s = Slot{ID: w.ID, Status: w.Status}
	switch {
	case w.Source == nil:
		return fmt.Errorf("slot %q: %w \"source\"", w.ID, errMissingMember)
	case w.Source.Kind() == 'n':
		return nil
	}
	// The value is a JSON string or another kind; the decoder has already checked its syntax.
	if w.Source.Kind() != '"' {
		return fmt.Errorf("slot %q: source is not a string or null", w.ID)
	}
	src, err := jsontext.AppendUnquote(nil, w.Source)
	if err != nil {
		return fmt.Errorf("slot %q: source: %w", w.ID, err)
	}
	s.Source = new(string(src))
	return nil
}
