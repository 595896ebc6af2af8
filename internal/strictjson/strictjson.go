// Package strictjson owns the one way safety inputs are decoded: unknown members are errors,
// member names must match exactly (encoding/json matches them case-insensitively, so
// {"trust":"untrusted","Trust":"user"} would decode as trust "user"), numbers stay json.Number,
// and nothing may follow the value. Reader serves decoders written by hand for one hot shape;
// they hand whatever they do not read exactly as Unmarshal would to Unmarshal.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// ErrFieldCase is matched by the error for a member whose name differs from a known field's only
// in case.
var ErrFieldCase = errors.New("member name differs from a field name only in case")

// Unmarshal decodes data into v strictly.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("strictjson: Unmarshal needs a non-nil pointer")
	}
	if err := CheckNames(data, rv.Type().Elem()); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// CheckNames refuses a member of a struct object in data whose name is not exactly one of the
// struct's JSON names but equals one ignoring case (ErrFieldCase), walking data along t as
// Unmarshal decodes it. Unknown members, type mismatches and syntax errors are left to the
// decoder, except that a syntax error met before any case mismatch is returned as the
// decoder's token reader reports it.
//
// Well-formed input is checked by a single pass over the bytes; input the fast scanner does not
// take (a syntax error, escaped member names it cannot compare byte-wise, extreme nesting) is
// checked again by the json.Decoder token walk, whose answer is then the answer.
func CheckNames(data []byte, t reflect.Type) error {
	sc := scanner{data: data}
	err := sc.value(t)
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrFieldCase) {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return checkNames(dec, t, "")
}

// checkNames walks the next value along t and refuses a member of a struct object whose name is
// not exactly one of the struct's JSON names. Values whose type decodes itself (json.Unmarshaler)
// are skipped: such a type must use this package for its own members.
func checkNames(dec *json.Decoder, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType) ||
		reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return skip(dec)
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := fieldsOf(t)
		return walkObject(dec, path, func(name string) (reflect.Type, error) {
			if ft, ok := fields.exact[name]; ok {
				return ft, nil
			}
			if _, ok := fields.folded[foldName(name)]; ok {
				return nil, fmt.Errorf("json: unknown field %q at %s: %w", name, where(path), ErrFieldCase)
			}
			return nil, nil // unknown: the decoder's DisallowUnknownFields reports it
		})
	case reflect.Map:
		return walkObject(dec, path, func(string) (reflect.Type, error) { return t.Elem(), nil })
	case reflect.Slice, reflect.Array:
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if tok != json.Delim('[') {
			return nil // a type mismatch; the decoder reports it
		}
		for i := 0; dec.More(); i++ {
			if err := checkNames(dec, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	default:
		return skip(dec)
	}
}

// walkObject walks an object, asking member for the type of each member's value.
func walkObject(dec *json.Decoder, path string, member func(name string) (reflect.Type, error)) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		if d, ok := tok.(json.Delim); ok && d == '[' {
			return skipRest(dec, 1)
		}
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		ft, err := member(name)
		if err != nil {
			return err
		}
		if ft == nil {
			if err := skip(dec); err != nil {
				return err
			}
			continue
		}
		if err := checkNames(dec, ft, path+"."+name); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

func where(path string) string {
	if path == "" {
		return "the top level"
	}
	return strings.TrimPrefix(path, ".")
}

// skip consumes the next value whatever it is.
func skip(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		return skipRest(dec, 1)
	}
	return nil
}

func skipRest(dec *json.Decoder, depth int) error {
	for depth > 0 {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
		}
	}
	return nil
}

type fieldSet struct {
	exact  map[string]reflect.Type
	folded map[string]struct{}
}

// hasFolded reports whether the ASCII name raw, folded, is a folded field name. It is foldName
// for ASCII, without allocating for a name that is already upper case.
func (fs *fieldSet) hasFolded(raw []byte) bool {
	for i, c := range raw {
		if 'a' <= c && c <= 'z' {
			upper := make([]byte, len(raw))
			copy(upper, raw[:i])
			for j := i; j < len(raw); j++ {
				c := raw[j]
				if 'a' <= c && c <= 'z' {
					c -= 'a' - 'A'
				}
				upper[j] = c
			}
			_, ok := fs.folded[string(upper)]
			return ok
		}
	}
	_, ok := fs.folded[string(raw)]
	return ok
}

// foldName folds name as encoding/json folds member names to match them to fields (its
// foldName, bytes.EqualFold's equivalence): ASCII letters upper-cased, every other rune the
// smallest of its Unicode fold orbit. Comparing lower-cased names instead would miss that the
// decoder matches "ſ" (U+017F) to "s" and "K" (U+212A) to "k", and so would let
// {"trust":"untrusted","truſt":"user"} through as trust "user".
func foldName(name string) string {
	var out []byte
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(name[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return string(out)
}

// foldRune returns the smallest rune of r's fold orbit.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// fieldCache memoizes fieldsOf, like encoding/json's own field cache: a type's members never
// change while the program runs, so the cache holds facts, not state.
var fieldCache sync.Map // reflect.Type → *fieldSet

// fieldsOf returns the JSON member names of struct type t, as encoding/json sees them
// (tags, untagged exported fields, embedded structs flattened).
func fieldsOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(*fieldSet)
	}
	fs := buildFields(t)
	fieldCache.Store(t, fs)
	return fs
}

func buildFields(t reflect.Type) *fieldSet {
	fs := &fieldSet{exact: map[string]reflect.Type{}, folded: map[string]struct{}{}}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				et := f.Type
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					add(et)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fs.exact[name] = f.Type
			fs.folded[foldName(name)] = struct{}{}
		}
	}
	add(t)
	return fs
}
