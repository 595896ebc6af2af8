package verdict

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// strictReader decodes the small, fixed JSON objects of a token header and its claims, reading
// exactly the type expected at each place. It exists for two reasons. encoding/json matches
// member names case-insensitively and lets duplicates overwrite each other: {"TYP":...} or a
// second "aud" must not be read as if the issuer had written one "typ" or "aud"; here every
// member is matched exactly, at most once, and all are required. And json.Decoder.Token, the
// standard way to get that control, allocates for every token and cost more than the signature
// check it guards.
//
// The input must be valid UTF-8 (checked by the caller); strings with escapes are handed to
// encoding/json, so escape handling is the standard library's. The input is copied into one
// string when the reader is made, and every string read without escapes is a substring of it:
// a token's claims cost one allocation, not one per member.
type strictReader struct {
	data string
	pos  int
}

func newStrictReader(data []byte) strictReader { return strictReader{data: string(data)} }

func (r *strictReader) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", r.pos, fmt.Sprintf(format, args...))
}

func (r *strictReader) skipSpace() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (r *strictReader) peek() byte {
	r.skipSpace()
	if r.pos < len(r.data) {
		return r.data[r.pos]
	}
	return 0
}

func (r *strictReader) expect(c byte) error {
	if r.peek() != c {
		return r.errorf("want %q", c)
	}
	r.pos++
	return nil
}

// object reads an object whose members are exactly names (at most 32), calling member with the
// index of each name as it is read; member must consume the value.
func (r *strictReader) object(names []string, member func(i int) error) error {
	if err := r.expect('{'); err != nil {
		return err
	}
	var seen uint32
	next := 0 // the member a writer that follows names' order writes next
	if r.peek() != '}' {
		for {
			key, err := r.string()
			if err != nil {
				return err
			}
			i := next
			if i >= len(names) || names[i] != key {
				i = slices.Index(names, key)
			}
			next = i + 1
			if i < 0 {
				return fmt.Errorf("unexpected member %q", key)
			}
			if seen&(1<<i) != 0 {
				return fmt.Errorf("duplicate member %q", key)
			}
			seen |= 1 << i
			if err := r.expect(':'); err != nil {
				return err
			}
			if err := member(i); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			if r.peek() != ',' {
				break
			}
			r.pos++
		}
	}
	if err := r.expect('}'); err != nil {
		return err
	}
	for i, name := range names {
		if seen&(1<<i) == 0 {
			return fmt.Errorf("missing member %q", name)
		}
	}
	return nil
}

// array reads an array, calling elem once per element; elem must consume it.
func (r *strictReader) array(elem func() error) error {
	if err := r.expect('['); err != nil {
		return err
	}
	if r.peek() == ']' {
		r.pos++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if r.peek() != ',' {
			break
		}
		r.pos++
	}
	return r.expect(']')
}

func (r *strictReader) string() (string, error) {
	if r.peek() != '"' {
		return "", r.errorf("want a string")
	}
	start := r.pos
	escaped := false
	for i := start + 1; i < len(r.data); i++ {
		switch c := r.data[i]; {
		case c == '\\':
			escaped = true
			i++ // the escaped byte cannot end the string
		case c == '"':
			r.pos = i + 1
			if !escaped {
				return r.data[start+1 : i], nil
			}
			var s string
			if err := json.Unmarshal([]byte(r.data[start:i+1]), &s); err != nil {
				r.pos = start
				return "", r.errorf("bad string: %v", err)
			}
			return s, nil
		case c < 0x20:
			r.pos = i
			return "", r.errorf("control character in string")
		}
	}
	return "", r.errorf("unterminated string")
}

// stringOrNull reads a string or null; ok is false for null.
func (r *strictReader) stringOrNull() (s string, ok bool, err error) {
	if r.peek() == 'n' {
		return "", false, r.literal("null")
	}
	s, err = r.string()
	if err != nil {
		return "", false, r.errorf("want a string or null")
	}
	return s, true, nil
}

func (r *strictReader) literal(lit string) error {
	if !strings.HasPrefix(r.data[r.pos:], lit) {
		return r.errorf("want %s", lit)
	}
	r.pos += len(lit)
	return nil
}

// int reads an integer: JSON number syntax without fraction or exponent, within int64.
func (r *strictReader) int() (int64, error) {
	r.skipSpace()
	start, i := r.pos, r.pos
	if i < len(r.data) && r.data[i] == '-' {
		i++
	}
	digits := i
	for i < len(r.data) && '0' <= r.data[i] && r.data[i] <= '9' {
		i++
	}
	switch {
	case i == digits:
		return 0, r.errorf("want an integer")
	case r.data[digits] == '0' && i-digits > 1:
		return 0, r.errorf("integer with a leading zero")
	case i < len(r.data) && (r.data[i] == '.' || r.data[i] == 'e' || r.data[i] == 'E'):
		return 0, r.errorf("want an integer, not a fraction or exponent")
	}
	v, err := strconv.ParseInt(r.data[start:i], 10, 64)
	if err != nil {
		return 0, r.errorf("integer out of range")
	}
	r.pos = i
	return v, nil
}

// stringArray reads an array of strings. Room for a few is made at once: an audience names one
// or two executors.
func (r *strictReader) stringArray() ([]string, error) {
	out := make([]string, 0, 4)
	err := r.array(func() error {
		s, err := r.string()
		out = append(out, s)
		return err
	})
	return out, err
}

// end checks that only white space follows the value read.
func (r *strictReader) end() error {
	if r.peek() != 0 || r.pos != len(r.data) {
		return errors.New("data after the object")
	}
	return nil
}
