package canonical

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Digest returns "sha256:" and the lowercase hex SHA-256 of the canonical
// form of v, which must be a value encoding/json can marshal.
//
// json.Number and json.RawMessage values inside v are taken as the JSON text
// they hold, never through float64, so a number keeps the exact value
// written. A Go string that is not valid UTF-8 is refused rather than
// repaired the way encoding/json would repair it.
func Digest(v any) (string, error) { return Options{}.Digest(v) }

// Marshal returns the canonical form of v, under the rules of [Digest].
func Marshal(v any) ([]byte, error) { return Options{}.Marshal(v) }

// Digest returns "sha256:" and the lowercase hex SHA-256 of the canonical
// form of v; see the package-level [Digest].
func (o Options) Digest(v any) (string, error) {
	b, err := o.Marshal(v)
	if err != nil {
		return "", err
	}
	return digestOf(b), nil
}

// Marshal returns the canonical form of v; see the package-level [Marshal].
func (o Options) Marshal(v any) ([]byte, error) {
	var keys [32]string
	e := encoder{opts: o, maxDepth: o.maxDepth(), out: make([]byte, 0, 1024), keys: keys[:0]}
	if err := e.value(v); err != nil {
		return nil, err
	}
	return e.out, nil
}

// encoder writes the canonical form of a Go value. The dynamic types that
// decoded JSON and hand-built argument maps are made of are written
// directly; any other value is marshaled with encoding/json and its text
// canonicalized, which gives it encoding/json's meaning.
type encoder struct {
	opts     Options
	maxDepth int
	depth    int
	out      []byte
	keys     []string // member names being sorted, innermost object last
}

func valueError(code, msg string) *Error { return &Error{Code: code, Offset: -1, Msg: msg} }

func (e *encoder) enter() *Error {
	e.depth++
	if e.depth > e.maxDepth {
		return valueError(CodeTooDeep, "arrays and objects nest too deeply")
	}
	return nil
}

func (e *encoder) value(v any) *Error {
	switch x := v.(type) {
	case nil:
		e.out = append(e.out, "null"...)
	case bool:
		e.out = strconv.AppendBool(e.out, x)
	case string:
		return e.string(x)
	case json.Number:
		// encoding/json writes an empty Number as 0.
		return e.numberText([]byte(cmp.Or(x, "0")))
	case float64:
		var ok bool
		if e.out, ok = appendFloat(e.out, x); !ok {
			return valueError(CodeNumberRange, "NaN and infinities have no JSON form")
		}
	case float32:
		// encoding/json writes the shortest text that reads back as the same
		// float32; that text is the value meant.
		if x != x || x > 3.4028234663852886e38 || x < -3.4028234663852886e38 {
			return valueError(CodeNumberRange, "NaN and infinities have no JSON form")
		}
		return e.numberText(strconv.AppendFloat(nil, float64(x), 'g', -1, 32))
	case int:
		return e.numberText(strconv.AppendInt(nil, int64(x), 10))
	case int64:
		return e.numberText(strconv.AppendInt(nil, x, 10))
	case int32:
		return e.numberText(strconv.AppendInt(nil, int64(x), 10))
	case uint64:
		return e.numberText(strconv.AppendUint(nil, x, 10))
	case uint:
		return e.numberText(strconv.AppendUint(nil, uint64(x), 10))
	case json.RawMessage:
		if x == nil { // as encoding/json
			e.out = append(e.out, "null"...)
			return nil
		}
		return e.text(x, false)
	case map[string]any:
		if x == nil {
			e.out = append(e.out, "null"...)
			return nil
		}
		return e.object(x)
	case []any:
		if x == nil {
			e.out = append(e.out, "null"...)
			return nil
		}
		if err := e.enter(); err != nil {
			return err
		}
		e.out = append(e.out, '[')
		for i, el := range x {
			if i > 0 {
				e.out = append(e.out, ',')
			}
			if err := e.value(el); err != nil {
				return err
			}
		}
		e.out = append(e.out, ']')
		e.depth--
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return valueError(CodeInvalidJSON, "cannot marshal value: "+err.Error())
		}
		return e.text(b, true)
	}
	return nil
}

func (e *encoder) object(m map[string]any) *Error {
	if err := e.enter(); err != nil {
		return err
	}
	base := len(e.keys)
	for k := range m {
		if !utf8.ValidString(k) {
			e.keys = e.keys[:base]
			return valueError(CodeInvalidUTF8, "object member name is not valid UTF-8")
		}
		e.keys = append(e.keys, k)
	}
	keys := e.keys[base:]
	slices.SortFunc(keys, compareUTF16[string])
	e.out = append(e.out, '{')
	for i, k := range keys {
		if i > 0 {
			e.out = append(e.out, ',')
		}
		e.out = appendString(e.out, k)
		e.out = append(e.out, ':')
		if err := e.value(m[k]); err != nil {
			return err
		}
	}
	e.out = append(e.out, '}')
	e.keys = e.keys[:base]
	e.depth--
	return nil
}

func (e *encoder) string(s string) *Error {
	if !utf8.ValidString(s) {
		return valueError(CodeInvalidUTF8, "string is not valid UTF-8")
	}
	e.out = appendString(e.out, s)
	return nil
}

// numberText writes the canonical form of a number given as JSON text.
func (e *encoder) numberText(lit []byte) *Error {
	n, end, err := scanNumber(lit, 0)
	if err == nil && end != len(lit) {
		err = newError(CodeInvalidJSON, end, "")
	}
	if err != nil {
		return valueError(CodeInvalidJSON, "json.Number is not a valid JSON number")
	}
	e.out, err = appendNumber(e.out, lit, n, 0, e.opts.allowInexact)
	if err != nil {
		err.Offset = -1
		return err
	}
	return nil
}

// text writes the canonical form of the JSON text b, nested at the current
// depth. fromMarshal says that encoding/json produced b from a Go value, in
// which case a \ufffd escape is its repair of invalid UTF-8.
func (e *encoder) text(b []byte, fromMarshal bool) *Error {
	p := parser{
		in:           b,
		out:          e.out,
		maxDepth:     e.maxDepth - e.depth,
		allowInexact: e.opts.allowInexact,
	}
	if err := p.run(); err != nil {
		err.Offset = -1
		return err
	}
	if fromMarshal && p.sawReplacement {
		return valueError(CodeInvalidUTF8, "string is not valid UTF-8")
	}
	if len(p.moved) == 0 {
		e.out = p.out
		return nil
	}
	// Reordering reads the parsed text while writing, so it needs a
	// buffer of its own.
	prefix := len(e.out)
	tail := p.reorder(make([]byte, 0, len(p.out)-prefix), prefix)
	e.out = append(p.out[:prefix], tail...)
	return nil
}

// appendString appends s, valid UTF-8, as a canonical JSON string.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[run:i]...)
		dst = appendStringRune(dst, rune(c))
		run = i + 1
	}
	dst = append(dst, s[run:]...)
	return append(dst, '"')
}
