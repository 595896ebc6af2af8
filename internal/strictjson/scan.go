package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// errScan means the fast scanner did not take the input; CheckNames then asks the token walk.
var errScan = errors.New("strictjson: input not taken by the fast scanner")

// maxScanDepth bounds the scanner's nesting, below encoding/json's own limit of 10,000: deeper
// input goes to the token walk, which reports what the decoder would.
const maxScanDepth = 1000

// scanner walks JSON text along a Go type in one pass, checking member names as checkNames does.
// It is exact on well-formed JSON and refuses (errScan) everything it is not sure of.
type scanner struct {
	data  []byte
	pos   int
	depth int
	stack []frame
	space bool // whitespace seen between tokens
}

// kind classifies a type the way checkNames branches on it.
type kind uint8

const (
	kindSkip kind = iota // any value, nothing to check inside
	kindStruct
	kindMap
	kindSlice
)

type typeInfo struct {
	kind   kind
	elem   reflect.Type // map and slice element
	fields *fieldSet
}

// typeCache memoizes infoOf; see fieldCache.
var typeCache sync.Map // reflect.Type → *typeInfo

func infoOf(t reflect.Type) *typeInfo {
	if ti, ok := typeCache.Load(t); ok {
		return ti.(*typeInfo)
	}
	ti := &typeInfo{}
	e := t
	for e.Kind() == reflect.Pointer {
		e = e.Elem()
	}
	switch {
	case reflect.PointerTo(e).Implements(unmarshalerType) || e.Implements(unmarshalerType) ||
		reflect.PointerTo(e).Implements(textUnmarshalerType):
		ti.kind = kindSkip
	case e.Kind() == reflect.Struct:
		ti.kind, ti.fields = kindStruct, fieldsOf(e)
	case e.Kind() == reflect.Map:
		ti.kind, ti.elem = kindMap, e.Elem()
	case e.Kind() == reflect.Slice || e.Kind() == reflect.Array:
		ti.kind, ti.elem = kindSlice, e.Elem()
	}
	typeCache.Store(t, ti)
	return ti
}

// frame is one step of the path to the value being walked: a member name (a slice of the
// input, or its unquoted form) or an array index. The path is only spelt out for an error.
type frame struct {
	name    string
	raw     []byte
	index   int
	isIndex bool
}

func (s *scanner) path() string {
	var b strings.Builder
	for _, f := range s.stack {
		switch {
		case f.isIndex:
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		case f.raw != nil:
			b.WriteString(".")
			b.Write(f.raw)
		default:
			b.WriteString("." + f.name)
		}
	}
	return b.String()
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
			s.space = true
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// value checks the next value along t.
func (s *scanner) value(t reflect.Type) error {
	ti := infoOf(t)
	switch c := s.peek(); {
	case ti.kind == kindStruct && c == '{', ti.kind == kindMap && c == '{':
		return s.object(ti)
	case ti.kind == kindSlice && c == '[':
		return s.array(ti.elem)
	default:
		return s.skip()
	}
}

func (s *scanner) enter() error {
	s.depth++
	if s.depth > maxScanDepth {
		return errScan
	}
	return nil
}

// object walks an object (the next byte is '{') holding ti's members; a nil ti skips them.
func (s *scanner) object(ti *typeInfo) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '{'
	if s.peek() == '}' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		if s.peek() != '"' {
			return errScan
		}
		raw, name, err := s.name()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return errScan
		}
		s.pos++
		var ft reflect.Type
		switch {
		case ti == nil:
		case ti.kind == kindMap:
			ft = ti.elem
		case raw != nil:
			if ft = ti.fields.exact[string(raw)]; ft == nil && ti.fields.hasFolded(raw) {
				return fmt.Errorf("json: unknown field %q at %s: %w", raw, where(s.path()), ErrFieldCase)
			}
		default:
			if ft = ti.fields.exact[name]; ft == nil {
				if _, ok := ti.fields.folded[foldName(name)]; ok {
					return fmt.Errorf("json: unknown field %q at %s: %w", name, where(s.path()), ErrFieldCase)
				}
			}
		}
		if ft == nil {
			err = s.skip()
		} else {
			s.stack = append(s.stack, frame{name: name, raw: raw})
			err = s.value(ft)
			s.stack = s.stack[:len(s.stack)-1]
		}
		if err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			return nil
		default:
			return errScan
		}
	}
}

// array walks an array (the next byte is '[') whose elements are of type elem.
func (s *scanner) array(elem reflect.Type) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '['
	if s.peek() == ']' {
		s.pos++
		s.depth--
		return nil
	}
	for i := 0; ; i++ {
		s.stack = append(s.stack, frame{index: i, isIndex: true})
		err := s.value(elem)
		s.stack = s.stack[:len(s.stack)-1]
		if err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			return nil
		default:
			return errScan
		}
	}
}

// name reads a member name (the next byte is '"'). A name of printable ASCII without escapes
// comes back as raw, a slice of the input; any other comes back as name, unquoted exactly as
// encoding/json unquotes it (invalid UTF-8 becomes U+FFFD there).
func (s *scanner) name() (raw []byte, name string, err error) {
	start := s.pos
	plain, err := s.str()
	if err != nil {
		return nil, "", err
	}
	quoted := s.data[start:s.pos]
	if plain {
		return quoted[1 : len(quoted)-1], "", nil
	}
	name, err = unquote(quoted)
	return nil, name, err
}

// unquote is name's slow path, kept apart so that its string escapes to the heap only for the
// names that need it.
func unquote(quoted []byte) (string, error) {
	var name string
	if err := json.Unmarshal(quoted, &name); err != nil {
		return "", errScan
	}
	return name, nil
}

// str reads a string (the next byte is '"'). plain reports printable ASCII without escapes.
func (s *scanner) str() (plain bool, err error) {
	s.pos++ // opening quote
	plain = true
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return plain, nil
		case c == '\\':
			plain = false
			if s.pos+1 >= len(s.data) {
				return false, errScan
			}
			switch s.data[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case 'u':
				if s.pos+6 > len(s.data) {
					return false, errScan
				}
				for _, h := range s.data[s.pos+2 : s.pos+6] {
					if !isHex(h) {
						return false, errScan
					}
				}
				s.pos += 6
			default:
				return false, errScan
			}
		case c < 0x20:
			return false, errScan
		case c >= utf8.RuneSelf:
			plain = false
			s.pos++
		default:
			s.pos++
		}
	}
	return false, errScan
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skip consumes the next value whatever it is, checking its syntax.
func (s *scanner) skip() error {
	switch c := s.peek(); {
	case c == '{':
		return s.object(nil)
	case c == '[':
		if err := s.enter(); err != nil {
			return err
		}
		s.pos++
		if s.peek() == ']' {
			s.pos++
			s.depth--
			return nil
		}
		for {
			if err := s.skip(); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.pos++
			case ']':
				s.pos++
				s.depth--
				return nil
			default:
				return errScan
			}
		}
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return errScan
	}
}

func (s *scanner) literal(lit string) error {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return errScan
	}
	s.pos += len(lit)
	return nil
}

// number consumes a number in the JSON grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	default:
		return errScan
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
		if i == j {
			return errScan
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
		if i == j {
			return errScan
		}
	}
	s.pos = i
	return nil
}
