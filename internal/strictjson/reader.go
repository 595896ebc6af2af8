package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrUnsupported is matched by a Reader's error for well-formed JSON the Reader does not read
// (a lone surrogate escape, invalid UTF-8 in a string) and for a value whose type is not the one
// asked for. A decoder built on a Reader answers such input by falling back to Unmarshal.
var ErrUnsupported = errors.New("strictjson: value not read by Reader")

// Reader reads JSON text one value at a time, for decoders written by hand for one fixed shape,
// which avoid encoding/json's reflection and the re-scanning of nested json.Unmarshaler values.
// It checks the JSON grammar as it goes and reads values as encoding/json decodes them with
// UseNumber: strings unescaped, numbers as their text.
//
// The first error sticks: every later call does nothing and returns a zero value, so a decoder
// can read a whole object and look at Err once. More reports false after an error, which ends
// every member and element loop.
type Reader struct {
	data    []byte
	pos     int
	depth   int
	opened  bool // an object or array was just opened: no comma before its first member
	err     error
	scratch []byte // unescaped member names
}

// NewReader returns a Reader of data.
func NewReader(data []byte) Reader { return Reader{data: data} }

// Err returns the first error met, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records err as the Reader's error unless it already has one. A decoder calls it to
// refuse a value the Reader read well.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *Reader) syntax(what string) {
	r.Fail(fmt.Errorf("strictjson: offset %d: %s", r.pos, what))
}

func (r *Reader) unsupported(what string) {
	r.Fail(fmt.Errorf("%w: offset %d: %s", ErrUnsupported, r.pos, what))
}

func (r *Reader) ws() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// Peek returns the first byte of the next value ('{', '[', '"', 't', 'f', 'n', '-' or a digit),
// or 0 after an error or at the end of the input.
func (r *Reader) Peek() byte {
	if r.err != nil {
		return 0
	}
	r.ws()
	if r.pos >= len(r.data) {
		return 0
	}
	return r.data[r.pos]
}

// Null consumes the next value if it is null, and reports whether it was.
func (r *Reader) Null() bool {
	if r.Peek() != 'n' {
		return false
	}
	r.literal("null")
	return r.err == nil
}

// Object opens the object that must come next; read its members with Member.
func (r *Reader) Object() {
	if r.Peek() != '{' {
		r.unsupported("expected an object")
		return
	}
	r.open()
}

// Array opens the array that must come next; read its elements with More.
func (r *Reader) Array() {
	if r.Peek() != '[' {
		r.unsupported("expected an array")
		return
	}
	r.open()
}

func (r *Reader) open() {
	r.depth++
	if r.depth > maxScanDepth {
		r.unsupported("nesting too deep")
		return
	}
	r.pos++
	r.opened = true
}

// next steps over the comma before a member or element, or over the closing delimiter, and
// reports whether a member or element follows.
func (r *Reader) next(closing byte) bool {
	if r.err != nil {
		return false
	}
	r.ws()
	if r.pos >= len(r.data) {
		r.syntax("unexpected end of input")
		return false
	}
	c := r.data[r.pos]
	if c == closing {
		r.pos++
		r.depth--
		r.opened = false
		return false
	}
	if r.opened {
		r.opened = false
		return true
	}
	if c != ',' {
		r.syntax("expected a comma")
		return false
	}
	r.pos++
	r.ws()
	if r.pos < len(r.data) && r.data[r.pos] == closing {
		r.syntax("trailing comma")
		return false
	}
	return true
}

// More reports whether the array opened last has another element, which the caller reads
// next; after its last element it consumes the ']' and reports false.
func (r *Reader) More() bool { return r.next(']') }

// Member reads the next member name of the object opened last and the colon after it. At the
// '}' it reports false. The name is a slice of the input or of a buffer of the Reader's, valid
// until the next call; string(name) copies it.
func (r *Reader) Member() (name []byte, ok bool) {
	if !r.next('}') {
		return nil, false
	}
	if r.Peek() != '"' {
		r.syntax("expected a member name")
		return nil, false
	}
	start := r.pos
	if plain := r.str(); r.err != nil {
		return nil, false
	} else if plain {
		name = r.data[start+1 : r.pos-1]
	} else {
		r.scratch = r.unquote(r.scratch[:0], r.data[start+1:r.pos-1])
		name = r.scratch
	}
	if r.Peek() != ':' {
		r.syntax("expected a colon")
		return nil, false
	}
	r.pos++
	return name, r.err == nil
}

// Str reads a string, unescaped as encoding/json unescapes it. (It is not named String so that
// a Reader is no fmt.Stringer, which printing would make consume input.)
func (r *Reader) Str() string {
	if r.Peek() != '"' {
		r.unsupported("expected a string")
		return ""
	}
	start := r.pos
	plain := r.str()
	if r.err != nil {
		return ""
	}
	body := r.data[start+1 : r.pos-1]
	if plain {
		return string(body)
	}
	return string(r.unquote(make([]byte, 0, len(body)), body))
}

// Bool reads true or false.
func (r *Reader) Bool() bool {
	switch r.Peek() {
	case 't':
		r.literal("true")
		return r.err == nil
	case 'f':
		r.literal("false")
	default:
		r.unsupported("expected a boolean")
	}
	return false
}

// Int reads a number that is an integer written without fraction or exponent, as encoding/json
// decodes one into an int: 1.0, 1e2 and numbers beyond int64 are refused.
func (r *Reader) Int() int {
	text := r.number()
	if r.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(string(text), 10, 64)
	if err != nil || int64(int(n)) != n {
		r.unsupported("expected an integer")
		return 0
	}
	return int(n)
}

func (r *Reader) number() []byte {
	if c := r.Peek(); c != '-' && (c < '0' || c > '9') {
		r.unsupported("expected a number")
		return nil
	}
	start := r.pos
	sc := scanner{data: r.data, pos: r.pos}
	if sc.number() != nil {
		r.syntax("invalid number")
		return nil
	}
	r.pos = sc.pos
	return r.data[start:r.pos]
}

// Any reads any value as encoding/json decodes it into an interface value with UseNumber:
// map[string]any, []any, json.Number, string, bool or nil.
func (r *Reader) Any() any {
	switch c := r.Peek(); {
	case c == '{':
		r.open()
		m := map[string]any{}
		for {
			name, ok := r.Member()
			if !ok {
				break
			}
			key := string(name)
			m[key] = r.Any()
		}
		if r.err != nil {
			return nil
		}
		return m
	case c == '[':
		r.open()
		a := []any{}
		for r.More() {
			a = append(a, r.Any())
		}
		if r.err != nil {
			return nil
		}
		return a
	case c == '"':
		return r.Str()
	case c == 't' || c == 'f':
		return r.Bool()
	case c == 'n':
		r.literal("null")
		return nil
	case c == '-' || '0' <= c && c <= '9':
		return json.Number(r.number())
	case c == 0 && r.err != nil:
		return nil
	default:
		r.syntax("expected a value")
		return nil
	}
}

// Raw skips the next value and returns its text, a slice of the input.
func (r *Reader) Raw() []byte {
	if r.Peek() == 0 {
		if r.err == nil {
			r.syntax("expected a value")
		}
		return nil
	}
	start := r.pos
	sc := scanner{data: r.data, pos: r.pos, depth: r.depth}
	if sc.skip() != nil {
		r.unsupported("value not taken by the scanner")
		return nil
	}
	r.pos = sc.pos
	return r.data[start:r.pos]
}

// End checks that nothing but whitespace follows.
func (r *Reader) End() {
	if r.err != nil {
		return
	}
	r.ws()
	if r.pos != len(r.data) {
		r.syntax("data after the JSON value")
	}
}

func (r *Reader) literal(lit string) {
	if len(r.data)-r.pos < len(lit) || string(r.data[r.pos:r.pos+len(lit)]) != lit {
		r.syntax("invalid literal")
		return
	}
	r.pos += len(lit)
}

// str steps over a string (the next byte is '"'); plain reports printable ASCII without
// escapes, whose text needs no unquoting. A string with invalid UTF-8 is unsupported: encoding/json
// would replace each bad byte, which no caller of a Reader wants to rely on.
func (r *Reader) str() (plain bool) {
	sc := scanner{data: r.data, pos: r.pos}
	plain, err := sc.str()
	if err != nil {
		r.syntax("invalid string")
		return false
	}
	if !plain && !utf8.Valid(r.data[r.pos+1:sc.pos-1]) {
		r.unsupported("string is not valid UTF-8")
		return false
	}
	r.pos = sc.pos
	return plain
}

// unquote appends the unescaped form of body, the inside of a string str has checked, to dst.
// A surrogate escape that is not half of a pair is unsupported.
func (r *Reader) unquote(dst, body []byte) []byte {
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			j := i + 1
			for j < len(body) && body[j] != '\\' {
				j++
			}
			dst = append(dst, body[i:j]...)
			i = j
			continue
		}
		switch e := body[i+1]; e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			rr := hex4(body[i+2 : i+6])
			if utf16.IsSurrogate(rr) {
				if i+12 > len(body) || body[i+6] != '\\' || body[i+7] != 'u' {
					r.unsupported("lone surrogate escape")
					return dst
				}
				dec := utf16.DecodeRune(rr, hex4(body[i+8:i+12]))
				if dec == utf8.RuneError {
					r.unsupported("lone surrogate escape")
					return dst
				}
				dst = utf8.AppendRune(dst, dec)
				i += 12
				continue
			}
			dst = utf8.AppendRune(dst, rr)
			i += 6
			continue
		}
		i += 2
	}
	return dst
}

// hex4 decodes four hex digits the scanner has checked.
func hex4(h []byte) rune {
	var v rune
	for _, c := range h {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		v = v<<4 | rune(c)
	}
	return v
}
