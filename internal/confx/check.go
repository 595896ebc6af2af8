package confx

import (
	"cmp"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/verdictgate/verdict/internal/suggest"
	"github.com/verdictgate/verdict/internal/yamlpos"
)

// checker walks a parsed document along the Go type it is decoded into and records, at their
// places, the problems the strict JSON decode would refuse the document for: an unknown or
// misspelt key, a list where a mapping belongs, a value its field cannot hold. It reports every
// problem, not the first, so that one run of a daemon lists all there is to fix.
type checker struct {
	file     string
	problems []error
}

func (c *checker) fail(n *yaml.Node, path string, err error) {
	pos := yamlpos.Of(n)
	c.problems = append(c.problems, &Error{File: c.file, Line: pos.Line, Column: pos.Column, Path: path, Err: err})
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
)

func typeOf(v any) reflect.Type {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// value checks node n, the value at path, against type t.
func (c *checker) value(n *yaml.Node, t reflect.Type, path string) {
	n = yamlpos.Resolve(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // null leaves the zero value, as in JSON
	}
	switch {
	case t == rawMessageType || t.Kind() == reflect.Interface:
		return // free-form by design
	case reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType):
		c.leaf(n, t, path) // decodes itself: check the value as it will be decoded
		return
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if n.Kind != yaml.MappingNode {
			c.fail(n, path, wantGot("a mapping", n))
			return
		}
		member := func(k, v *yaml.Node) { c.value(v, t.Elem(), yamlpos.Key(path, k.Value)) }
		if t.Kind() == reflect.Struct {
			fs := fieldsOf(t)
			member = func(k, v *yaml.Node) {
				if ft, ok := fs.types[k.Value]; ok {
					c.value(v, ft, yamlpos.Key(path, k.Value))
					return
				}
				c.fail(k, path, &UnknownFieldError{Name: k.Value, Suggestion: suggest.Closest(k.Value, fs.names)})
			}
		}
		c.members(n, path, member, func(m *yaml.Node) { c.value(m, t, path) })
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			c.leaf(n, t, path) // bytes are a base64 string
			return
		}
		if n.Kind != yaml.SequenceNode {
			c.fail(n, path, wantGot("a list", n))
			return
		}
		for i, e := range n.Content {
			c.value(e, t.Elem(), yamlpos.Index(path, i))
		}
	default:
		if n.Kind != yaml.ScalarNode {
			c.fail(n, path, wantGot(describe(t), n))
			return
		}
		c.leaf(n, t, path)
	}
}

// members calls member with each key of mapping n and its value, and merged with each mapping
// a merge key ("<<: *defaults") brings in.
func (c *checker) members(n *yaml.Node, path string, member func(key, value *yaml.Node), merged func(*yaml.Node)) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		switch {
		case k.Kind == yaml.ScalarNode && k.Tag == "!!merge":
			for _, m := range yamlpos.Merged(n.Content[i+1]) {
				merged(m)
			}
		case k.Kind != yaml.ScalarNode:
			c.fail(k, path, errors.New("a key must be text"))
		default:
			member(k, n.Content[i+1])
		}
	}
}

// leaf checks a value the walk does not descend into by decoding it alone, converted to JSON the
// way the whole document is, into a fresh value of its type: whatever fails here fails there.
func (c *checker) leaf(n *yaml.Node, t reflect.Type, path string) {
	js, err := nodeJSON(n)
	if err != nil {
		c.fail(n, path, err)
		return
	}
	if err := unmarshalStrict(js, reflect.New(t).Interface()); err != nil {
		if se, ok := errors.AsType[*jsonv2.SemanticError](err); ok && se.JSONPointer == "" {
			if se.Err != nil {
				err = se.Err // the value's own UnmarshalJSON said what is wrong
			} else {
				err = fmt.Errorf("want %s, got %s", describe(t), js)
			}
		}
		c.fail(n, path, err)
	}
}

// nodeJSON converts one value the way sigs.k8s.io/yaml converts the whole document. A plain
// scalar is converted from its own text, so that it resolves as it does in place (YAML 1.1:
// 0x1F is a number, on is true); a quoted one is a string.
func nodeJSON(n *yaml.Node) ([]byte, error) {
	if n.Kind == yaml.ScalarNode && n.Style&yaml.TaggedStyle == 0 {
		switch {
		case n.Style == 0:
			return sigsyaml.YAMLToJSON([]byte(n.Value))
		case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0:
			return json.Marshal(n.Value)
		}
	}
	b, err := yaml.Marshal(n)
	if err != nil {
		return nil, err
	}
	return sigsyaml.YAMLToJSON(b)
}

// wantGot says what a value should have been and what it is.
func wantGot(want string, n *yaml.Node) error {
	var got string
	switch n.Kind {
	case yaml.MappingNode:
		got = "a mapping"
	case yaml.SequenceNode:
		got = "a list"
	default:
		if js, err := nodeJSON(n); err == nil {
			got = string(js)
		} else {
			got = fmt.Sprintf("%q", n.Value)
		}
	}
	return fmt.Errorf("want %s, got %s", want, got)
}

// describe names what a value of type t is written as.
func describe(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, not negative"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return "a " + t.String()
}

// fieldSet is what keys a struct type takes, as encoding/json reads them: the exported fields
// by their json names, with the fields of embedded structs promoted unless the outer struct has
// a field of that name.
type fieldSet struct {
	names []string // in declaration order, for suggestions
	types map[string]reflect.Type
}

func fieldsOf(t reflect.Type) *fieldSet {
	fs := &fieldSet{types: map[string]reflect.Type{}}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		var embedded []reflect.Type
		for f := range t.Fields() {
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if ft := f.Type; f.Anonymous && name == "" {
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					embedded = append(embedded, ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			name = cmp.Or(name, f.Name)
			if _, dup := fs.types[name]; !dup {
				fs.names = append(fs.names, name)
				fs.types[name] = f.Type
			}
		}
		for _, e := range embedded {
			add(e)
		}
	}
	add(t)
	return fs
}
