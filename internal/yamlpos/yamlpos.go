// Package yamlpos finds where in a YAML file a value stands, so that an error about a config or
// policy value can name its line and column, and reads YAML syntax errors into a line and a
// message.
//
// Values are named by key paths in one notation throughout the project: a key that is an
// identifier follows a dot (servers.bank.command), any other key is a JSON string in brackets
// (tools["bank/transfer"]), a list element is its index in brackets (allowed_sources[2]). The
// notation reads back unambiguously, which is what lets a path found by a validator be mapped to
// a place in the file.
package yamlpos

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// Pos is a place in a file, 1-based; the zero Pos is no place.
type Pos struct {
	Line, Column int
}

// IsZero reports whether p is no place.
func (p Pos) IsZero() bool { return p.Line == 0 }

// String is "line:column", "line" without a column, or "" for no place.
func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return ""
	case p.Column == 0:
		return strconv.Itoa(p.Line)
	}
	return strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Column)
}

// Of returns the place of n.
func Of(n *yaml.Node) Pos {
	if n == nil {
		return Pos{}
	}
	return Pos{Line: n.Line, Column: n.Column}
}

// SyntaxError is a document that is not YAML.
type SyntaxError struct {
	Line int    // 0 when the parser named none
	Msg  string // the parser's description, without its "yaml: line N:" prefix
}

func (e *SyntaxError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// Parse parses a YAML (or JSON) document and returns its top node, nil for an empty document.
// A syntax error is a *SyntaxError.
//
// The documents are read for their values by sigs.k8s.io/yaml (YAML 1.1), and its parser has
// the last word: a document it takes is never refused here, only left without places (nil)
// in the rare case that this parser does not take it. Its error is also the one reported, since
// it names a better line for some errors (an unclosed flow list, a tab in an indent).
func Parse(data []byte) (*yaml.Node, error) { return parse(data, false) }

// ParseAlone is Parse for a document read from its nodes alone: one this parser does not take
// is a *SyntaxError, whether or not sigs.k8s.io/yaml takes it.
func ParseAlone(data []byte) (*yaml.Node, error) { return parse(data, true) }

func parse(data []byte, alone bool) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		if _, serr := sigsyaml.YAMLToJSON(data); serr != nil || alone {
			return nil, syntaxError(cmp.Or(serr, err))
		}
		return nil, nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// syntaxError reads the parser's error. The YAML package reports syntax errors as text only,
// "yaml: line 8: did not find expected key", so the line is read from that form; any other
// form is kept whole, without a line, rather than guessed at.
func syntaxError(err error) *SyntaxError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, after, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil && n > 0 {
				return &SyntaxError{Line: n, Msg: after}
			}
		}
	}
	return &SyntaxError{Msg: msg}
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Key appends the map key k to path.
func Key(path, k string) string {
	if identRE.MatchString(k) {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	b, _ := json.Marshal(k)
	return path + "[" + string(b) + "]"
}

// Index appends the list index i to path.
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Join appends the relative path rel (as Key and Index write them, from the empty path) to path.
func Join(path, rel string) string {
	switch {
	case path == "":
		return rel
	case rel == "" || strings.HasPrefix(rel, "["):
		return path + rel
	}
	return path + "." + rel
}

// elem is one step of a path: a key, or an index when isIndex.
type elem struct {
	key     string
	index   int
	isIndex bool
}

var errBadPath = errors.New("not a key path")

// split reads path back into its steps.
func split(path string) ([]elem, error) {
	var out []elem
	for i := 0; i < len(path); {
		if path[i] == '[' {
			e, n, err := bracket(path[i:])
			if err != nil {
				return nil, err
			}
			out = append(out, e)
			i += n
			continue
		}
		if path[i] == '.' {
			if i == 0 {
				return nil, errBadPath
			}
			i++
		} else if i > 0 {
			return nil, errBadPath // a key runs into the one before it
		}
		j := i
		for j < len(path) && path[j] != '.' && path[j] != '[' {
			j++
		}
		if j == i {
			return nil, errBadPath
		}
		out = append(out, elem{key: path[i:j]})
		i = j
	}
	return out, nil
}

// bracket reads the step at the start of s, `[2]` or `["a/b"]`, and its length.
func bracket(s string) (elem, int, error) {
	if strings.HasPrefix(s, `["`) {
		// A JSON string may hold "]": the decoder finds its end.
		dec := json.NewDecoder(strings.NewReader(s[1:]))
		var k string
		if err := dec.Decode(&k); err != nil {
			return elem{}, 0, errBadPath
		}
		end := 1 + int(dec.InputOffset())
		if end >= len(s) || s[end] != ']' {
			return elem{}, 0, errBadPath
		}
		return elem{key: k}, end + 1, nil
	}
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return elem{}, 0, errBadPath
	}
	n, err := strconv.Atoi(s[1:end])
	if err != nil || n < 0 {
		return elem{}, 0, errBadPath
	}
	return elem{index: n, isIndex: true}, end + 1, nil
}

// Find returns the place of the value at path under root: a map member's key, a list's element.
// When path leads nowhere (a required key that is missing, an index past the end), it returns
// the place of the deepest value on the way that exists, and exact is false; the top of the
// document is no place.
func Find(root *yaml.Node, path string) (pos Pos, exact bool) {
	steps, err := split(path)
	if err != nil || root == nil {
		return Pos{}, false
	}
	n := root
	for _, s := range steps {
		n = Resolve(n)
		var next, at *yaml.Node
		switch {
		case s.isIndex && n.Kind == yaml.SequenceNode && s.index < len(n.Content):
			next = n.Content[s.index]
			at = next
		case !s.isIndex && n.Kind == yaml.MappingNode:
			at, next = member(n, s.key)
		}
		if next == nil {
			return pos, false
		}
		pos, n = Of(at), next
	}
	return pos, true
}

// member returns the key and value nodes of key k in mapping n, looking into merged mappings
// ("<<: *defaults") after n's own keys, as a decoder does; nils if there is none.
func member(n *yaml.Node, k string) (key, value *yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if kn := n.Content[i]; kn.Kind == yaml.ScalarNode && kn.Value == k && kn.Tag != "!!merge" {
			return kn, n.Content[i+1]
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Tag != "!!merge" {
			continue
		}
		for _, m := range Merged(n.Content[i+1]) {
			if kn, vn := member(m, k); kn != nil {
				return kn, vn
			}
		}
	}
	return nil, nil
}

// Merged returns the mappings a merge key's value names: one mapping, or a list of them.
func Merged(v *yaml.Node) []*yaml.Node {
	v = Resolve(v)
	switch v.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{v}
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, e := range v.Content {
			if e = Resolve(e); e.Kind == yaml.MappingNode {
				out = append(out, e)
			}
		}
		return out
	}
	return nil
}

// Resolve follows aliases to the node they name.
func Resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// Duplicate is a key set twice in one mapping.
type Duplicate struct {
	Path  string // the mapping's path
	Key   string
	At    Pos // the second setting
	First Pos
}

// Duplicates lists every key set more than once in a mapping under root, in document order.
// A decoder would keep one of the two values without a word; in a config or a policy that is
// an edit lost.
func Duplicates(root *yaml.Node) []Duplicate {
	var out []Duplicate
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if n == nil || n.Kind == yaml.AliasNode {
			return // an alias repeats a node walked where it is defined
		}
		switch n.Kind {
		case yaml.MappingNode:
			first := map[string]Pos{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
					walk(v, path)
					continue
				}
				if p, ok := first[k.Value]; ok {
					out = append(out, Duplicate{Path: path, Key: k.Value, At: Of(k), First: p})
				} else {
					first[k.Value] = Of(k)
				}
				walk(v, Key(path, k.Value))
			}
		case yaml.SequenceNode:
			for i, e := range n.Content {
				walk(e, Index(path, i))
			}
		}
	}
	walk(root, "")
	return out
}
