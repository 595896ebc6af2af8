package verdict

import (
	"encoding/json"
	"strconv"
)

// The payloads of the tokens this package signs are written by hand for the common case and by
// encoding/json for the rest, with identical bytes: the appenders below take only strings that
// encoding/json writes verbatim (printable ASCII without '"', '\\' and the HTML characters it
// escapes) and report !ok otherwise, and the caller then marshals the value with encoding/json.
// The hand-written path saves the reflection walk on every verdict and receipt signed.

// marshalClaims encodes c as json.Marshal would.
func marshalClaims(c *Claims) ([]byte, error) {
	if b, ok := appendClaims(make([]byte, 0, 512+128*len(c.Slots)), c); ok {
		return b, nil
	}
	return json.Marshal(c)
}

// marshalReceipt encodes r as json.Marshal would.
func marshalReceipt(r *Receipt) ([]byte, error) {
	if b, ok := appendReceipt(make([]byte, 0, 320), r); ok {
		return b, nil
	}
	return json.Marshal(r)
}

func appendClaims(b []byte, c *Claims) ([]byte, bool) {
	ok := true
	str := func(name, v string) {
		b = append(b, name...)
		b, ok = appendPlainString(b, v, ok)
	}
	num := func(name string, v int64) {
		b = append(b, name...)
		b = strconv.AppendInt(b, v, 10)
	}
	str(`{"iss":`, c.Issuer)
	str(`,"sub":`, c.Subject)
	b = append(b, `,"aud":`...)
	if c.Audience == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, a := range c.Audience {
			if i > 0 {
				b = append(b, ',')
			}
			b, ok = appendPlainString(b, a, ok)
		}
		b = append(b, ']')
	}
	num(`,"iat":`, c.IssuedAt)
	num(`,"nbf":`, c.NotBefore)
	num(`,"exp":`, c.Expiry)
	str(`,"jti":`, c.ID)
	str(`,"srv":`, c.Server)
	str(`,"tool":`, c.Tool)
	str(`,"tsd":`, c.ToolDigest)
	str(`,"pol":`, c.Policy)
	str(`,"args":`, c.Arguments)
	b = append(b, `,"slots":`...)
	if c.Slots == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, s := range c.Slots {
			if i > 0 {
				b = append(b, ',')
			}
			str(`{"id":`, s.ID)
			str(`,"status":`, s.Status)
			b = append(b, `,"source":`...)
			if s.Source == nil {
				b = append(b, "null"...)
			} else {
				b, ok = appendPlainString(b, *s.Source, ok)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	str(`,"akey":`, c.ActionKey)
	str(`,"phase":`, c.Phase)
	str(`,"rec":`, c.Record)
	b = append(b, '}')
	return b, ok
}

func appendReceipt(b []byte, r *Receipt) ([]byte, bool) {
	ok := true
	for _, m := range [...]struct{ name, v string }{
		{`{"iss":`, r.Issuer}, {`,"jti":`, r.ID}, {`,"akey":`, r.ActionKey},
		{`,"args":`, r.Arguments}, {`,"decision":`, r.Decision},
	} {
		b = append(b, m.name...)
		b, ok = appendPlainString(b, m.v, ok)
	}
	b = append(b, `,"iat":`...)
	b = strconv.AppendInt(b, r.IssuedAt, 10)
	b = append(b, '}')
	return b, ok
}

// appendPlainString appends s quoted, and ok && whether encoding/json would have written s the
// same way. The bytes appended for a string it would not are of no use; the caller discards
// them.
func appendPlainString(b []byte, s string, ok bool) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), ok
}
