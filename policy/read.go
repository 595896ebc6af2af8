package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"go.yaml.in/yaml/v3"

	"github.com/verdictgate/verdict/internal/suggest"
	"github.com/verdictgate/verdict/internal/yamlpos"
)

// reader reads a document that document has checked into the policy's types, and collects the
// problems (each at the path of its value), which stop the load, and the issues, which do not.
type reader struct {
	problems []Problem
	issues   []Issue
	compile  bool // type-check the expressions; ParsePins does not
	compiler *Compiler
}

func (r *reader) fail(path, format string, args ...any) {
	r.problems = append(r.problems, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// key appends a map key to a path: .name for identifiers, ["name"] otherwise — the notation
// yamlpos reads back to place a problem in the file.
func key(path, k string) string { return yamlpos.Key(path, k) }

func index(path string, i int) string { return yamlpos.Index(path, i) }

// A value is a node of the document at its path; n is nil for a key that is not set.
type value struct {
	r    *reader
	path string
	n    *yaml.Node
}

func (v value) fail(format string, args ...any) { v.r.fail(v.path, format, args...) }

func (v value) issue(msg string) { v.r.issues = append(v.r.issues, Issue{Path: v.path, Msg: msg}) }

// mapping checks that v is a mapping with arbitrary keys and returns its members.
func (v value) mapping() (map[string]*yaml.Node, bool) {
	if v.n == nil || yamlpos.Resolve(v.n).Kind != yaml.MappingNode {
		v.fail("want a mapping, got %s", typeName(v.n))
		return nil, false
	}
	return members(yamlpos.Resolve(v.n)).m, true
}

func (v value) list() ([]value, bool) {
	n := yamlpos.Resolve(v.n)
	if n.Kind != yaml.SequenceNode {
		v.fail("want a list, got %s", typeName(v.n))
		return nil, false
	}
	out := make([]value, len(n.Content))
	for i, e := range n.Content {
		out[i] = value{v.r, index(v.path, i), e}
	}
	return out, true
}

// as reads v as a T, which is want.
func as[T any](v value, want string) (T, bool) {
	x, ok := jsonValue(v.n).(T)
	if !ok {
		v.fail("want %s, got %s", want, typeName(v.n))
	}
	return x, ok
}

func (v value) str() (string, bool)         { return as[string](v, "a string") }
func (v value) boolean() (bool, bool)       { return as[bool](v, "a boolean") }
func (v value) number() (json.Number, bool) { return as[json.Number](v, "an integer") }

func (v value) nonEmpty() (string, bool) {
	s, ok := v.str()
	if ok && strings.TrimSpace(s) == "" {
		v.fail("must not be empty")
		return "", false
	}
	return s, ok
}

// strList reads a list of non-empty strings; a bad element is "" in the list, and ok false.
func (v value) strList() ([]string, bool) {
	list, ok := v.list()
	if !ok {
		return nil, false
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, good := e.nonEmpty()
		out[i], ok = s, ok && good
	}
	return out, ok
}

// duration reads a Go duration string ("30s", "10m").
func (v value) duration() (time.Duration, bool) {
	s, ok := v.str()
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		v.fail("invalid duration %q", s)
	}
	return d, err == nil
}

// expression type-checks the expression expr at v; a compile error is an issue. One longer than
// MaxExprBytes is a problem, never compiled, so that a policy cannot make every reload costly.
func (v value) expression(expr string) (ast *cel.Ast, reads Reads, err error) {
	switch {
	case len(expr) > MaxExprBytes:
		v.fail("%d bytes, at most %d", len(expr), MaxExprBytes)
		return nil, Reads{}, nil
	case !v.r.compile:
		return nil, Reads{}, nil
	case v.r.compiler == nil:
		v.r.compiler, err = NewCompiler()
	}
	if err == nil {
		ast, reads, err = v.r.compiler.Compile(expr)
	}
	if err != nil {
		v.issue(err.Error())
	}
	return ast, reads, err
}

// An object is a mapping read into one of the policy's types. A key is named once, where it is
// read; one that nothing reads is unknown, reported ahead of the problems of the values.
type object struct {
	value
	m     map[string]*yaml.Node
	known []string
}

// object reads v, a mapping, with read, and reports whether it is one.
func (v value) object(read func(*object)) bool {
	m, ok := v.mapping()
	if !ok {
		return false
	}
	o, at := &object{value: v, m: m}, len(v.r.problems)
	read(o)
	var unknown []Problem
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(o.known, k) {
			unknown = append(unknown, Problem{Path: key(v.path, k), Msg: "unknown key" + suggest.DidYouMean(k, o.known)})
		}
	}
	v.r.problems = slices.Insert(v.r.problems, at, unknown...)
	return true
}

// readAs returns a new T read from the mapping v by its read method.
func readAs[T any, P interface {
	*T
	read(*object)
}](v value) P {
	p := P(new(T))
	v.object(p.read)
	return p
}

// mapOf reads the mapping at key k into a map, each member by read, in key order.
func mapOf[T any](o *object, k string, read func(name string, v value) T) map[string]T {
	out := map[string]T{}
	if v, ok := o.get(k); ok {
		m, _ := v.mapping()
		for _, name := range slices.Sorted(maps.Keys(m)) {
			out[name] = read(name, value{o.r, key(v.path, name), m[name]})
		}
	}
	return out
}

// get returns the value of key k, and whether the mapping sets it.
func (o *object) get(k string) (value, bool) {
	o.known = append(o.known, k)
	n, ok := o.m[k]
	return value{o.r, key(o.path, k), n}, ok
}

// required is get of a key that must be set.
func (o *object) required(k string) (value, bool) {
	v, ok := o.get(k)
	if !ok {
		v.fail("required")
	}
	return v, ok
}

// oneOf gets keys a and b, exactly one of which must be set.
func (o *object) oneOf(a, b string) (va value, hasA bool, vb value, hasB bool) {
	va, hasA = o.get(a)
	if vb, hasB = o.get(b); hasA == hasB {
		o.fail("exactly one of %s and %s is required", a, b)
	}
	return va, hasA, vb, hasB
}

// allow names keys whose values are taken as they are, unread.
func (o *object) allow(keys ...string) { o.known = append(o.known, keys...) }

// set reads key k, when it is set, into dst with read (value.str, value.strList, ...).
func set[T any](o *object, k string, dst *T, read func(value) (T, bool)) {
	if v, ok := o.get(k); ok {
		*dst, _ = read(v)
	}
}

// need reads a non-empty string that must be set.
func (o *object) need(k string, dst *string) {
	if v, ok := o.required(k); ok {
		*dst, _ = v.nonEmpty()
	}
}
