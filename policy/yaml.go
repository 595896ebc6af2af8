package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/verdictgate/verdict/internal/yamlpos"
)

// document parses data, once, into the yaml.Node tree the policy is read from, and checks it
// as a document of the policy language before any key is read: no key set twice, no aliasing
// past yaml.v2's bound, every key text, every merge key's value mappings, every tag fitting its
// value, every number one JSON holds. It returns the top node, nil for an empty document, or
// the problems, which stop the load. The values keep the reading the policy language has always
// had, YAML 1.1's as sigs.k8s.io/yaml reads it (see scalar), which FuzzDocumentAsJSON holds
// this file to.
func document(data []byte) (*yaml.Node, []Problem) {
	root, err := yamlpos.ParseAlone(data)
	if se, ok := errors.AsType[*yamlpos.SyntaxError](err); ok {
		return nil, []Problem{{Msg: se.Msg, Line: se.Line}}
	}
	var dups []Problem // a decoder would keep one of the two values without a word
	for _, d := range yamlpos.Duplicates(root) {
		dups = append(dups, Problem{Path: key(d.Path, d.Key), Msg: fmt.Sprintf("key already set at line %d", d.First.Line),
			Line: d.At.Line, Column: d.At.Column})
	}
	if len(dups) > 0 || root == nil {
		return nil, dups
	}
	w := &shape{total: 1, sizes: map[*yaml.Node]int{}} // the document node
	w.walk(root, "")
	switch {
	case w.over:
		return nil, []Problem{{Msg: "document contains excessive aliasing"}}
	case len(w.keys) > 0:
		slices.SortFunc(w.keys, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
		return nil, locate(root, w.keys)
	}
	return root, locate(root, w.others)
}

// shape walks a document once, as it is written (an alias stands where its anchor is), for
// what document refuses. Keys that do not read as text are kept apart: YAML 1.1 reads 007 as 7,
// on as true and 1e3 as 1000, and a principal 007 named "7" would silently get no checklist.
// Aliases are counted against yaml.v2's bound, which read the policy before: 99% of the nodes
// decoded so far, up to 400,000 of them, down to 10% at 4,000,000 (a few bytes of anchors and
// aliases can stand for billions of nodes); an alias inside the node it names has no bound.
type shape struct {
	keys, others   []Problem
	total, aliased int
	sizes          map[*yaml.Node]int // of the anchored nodes: how many nodes each stands for
	over           bool
}

const mostNodes = 4_000_000

// walk walks n at path and returns the number of nodes it stands for, aliases expanded.
func (w *shape) walk(n *yaml.Node, path string) int {
	if s, ok := w.sizes[n]; ok {
		return s
	}
	w.total++
	if n.Anchor != "" {
		w.sizes[n] = mostNodes // until it is known: an alias inside it
	}
	s := 1
	switch n.Kind {
	case yaml.AliasNode:
		t := w.walk(n.Alias, path)
		s, w.total, w.aliased = s+t, w.total+t, w.aliased+t
		allowed := 0.99 - 0.89*min(1, max(0, float64(w.total-400_000)/3_600_000))
		w.over = w.over || w.aliased > 100 && w.total > 1000 && float64(w.aliased)/float64(w.total) > allowed
	case yaml.ScalarNode:
		v, err := scalar(n)
		if f, isFloat := v.(float64); err != nil {
			w.fail(path, err.Error())
		} else if isFloat && (math.IsInf(f, 0) || math.IsNaN(f)) {
			w.fail(path, n.Value+": not a number JSON holds")
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			s += w.walk(e, index(path, i))
		}
	case yaml.MappingNode:
		s += w.mapping(n, path)
	}
	if s = min(s, mostNodes); n.Anchor != "" { // sizes grow as the powers of a bomb do
		w.sizes[n] = s
	}
	return s
}

func (w *shape) mapping(n *yaml.Node, path string) (s int) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		s += w.walk(n.Content[i], path)
		k := yamlpos.Resolve(n.Content[i])
		kv, err := scalar(k)
		if _, isText := kv.(string); k.Kind != yaml.ScalarNode {
			w.keys = append(w.keys, Problem{Path: path, Msg: "a key is a list or a mapping, not text"})
		} else if err == nil && !isText {
			w.keys = append(w.keys, Problem{Path: key(path, fmt.Sprint(kv)), Msg: fmt.Sprintf("key reads as %T %v, not as text: quote it", kv, kv)})
		}
		s += w.walk(n.Content[i+1], key(path, k.Value))
	}
	if w.over {
		return s // the merges may hold the mapping itself: members would not end
	}
	// A key a merge sets again is refused as a duplicate is: which of the two values counts is
	// a guess the reader of the file should not have to make.
	m := members(n)
	for _, k := range m.again {
		w.fail(key(path, k), "key set twice: here and by a merge key (<<)")
	}
	if m.badMerge {
		w.fail(path, "map merge requires map or sequence of maps as the value")
	}
	return s
}

func (w *shape) fail(path, msg string) { w.others = append(w.others, Problem{Path: path, Msg: msg}) }

// mapping is a mapping's members by key, those of the mappings it merges included.
type mapping struct {
	m        map[string]*yaml.Node
	again    []string // keys a merge sets again
	badMerge bool     // a merge of something other than mappings
}

func members(n *yaml.Node) mapping {
	out := mapping{m: make(map[string]*yaml.Node, len(n.Content)/2)}
	var add func(n *yaml.Node)
	add = func(n *yaml.Node) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := yamlpos.Resolve(n.Content[i]), n.Content[i+1]
			if k.Tag != "!!merge" {
				if _, ok := out.m[k.Value]; ok {
					out.again = append(out.again, k.Value)
				}
				out.m[k.Value] = v
				continue
			}
			ms := yamlpos.Merged(v)
			r := yamlpos.Resolve(v)
			out.badMerge = out.badMerge || r.Kind != yaml.MappingNode && (r.Kind != yaml.SequenceNode || len(ms) != len(r.Content))
			for _, m := range ms {
				add(m)
			}
		}
	}
	add(n)
	return out
}

// scalar reads a scalar node as yaml.v2 read the policy: as yaml.v3 does, but with YAML 1.1's
// words for true and false (yes, on, y; no, off, n) when plain or tagged !!bool, and a timestamp
// kept as its text. It returns nil, a bool, an int, a uint64, a float64 or a string.
func scalar(n *yaml.Node) (any, error) {
	if b, ok := yaml11Bools[n.Value]; ok && (n.Style == 0 || n.Tag == "!!bool") {
		return b, nil
	}
	if (n.Tag == "!!int" || n.Tag == "!!float") && v3Octal(n.Value) {
		if n.Style&yaml.TaggedStyle != 0 {
			return nil, fmt.Errorf("cannot decode !!str `%s` as a %s", n.Value, n.Tag)
		}
		return n.Value, nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	switch s := v.(type) {
	case string:
		// YAML's text is UTF-8 already; a !!binary value decodes to any bytes, which the old
		// reading turned into U+FFFD without a word. A policy's text is never such bytes.
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("%s %.20q decodes to bytes that are not UTF-8 text", n.Tag, n.Value)
		}
	case time.Time:
		return n.Value, nil
	}
	return v, nil
}

// v3Octal says text is an integer only to yaml.v3: an octal YAML 1.2 spells with 0o whose digits
// Go's base-prefixed parsing refuses, as in 0o+7, -0o-7 or 0_o+0 (both readings drop every "_"
// first). yaml.v2 read such text as a string, and refused it where tagged !!int.
func v3Octal(text string) bool {
	plain := strings.ReplaceAll(text, "_", "")
	if !strings.HasPrefix(plain, "0o") && !strings.HasPrefix(plain, "-0o") {
		return false
	}
	_, errInt := strconv.ParseInt(plain, 0, 64)
	_, errUint := strconv.ParseUint(plain, 0, 64)
	return errInt != nil && errUint != nil
}

var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
}

// jsonValue returns the value of n as a JSON decoder with UseNumber returns it: nil, a bool, a
// json.Number, a string, a []any or a map[string]any.
func jsonValue(n *yaml.Node) any {
	if n == nil {
		return nil
	}
	switch n = yamlpos.Resolve(n); n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for k, v := range members(n).m {
			m[k] = jsonValue(v)
		}
		return m
	case yaml.SequenceNode:
		a := make([]any, len(n.Content))
		for i, e := range n.Content {
			a[i] = jsonValue(e)
		}
		return a
	}
	v, _ := scalar(n) // document refused every scalar that does not read
	switch v.(type) {
	case int, uint64, float64:
		b, _ := json.Marshal(v)
		return json.Number(b)
	}
	return v
}

// typeName names what n is, in a problem's words.
func typeName(n *yaml.Node) string {
	switch jsonValue(n).(type) {
	case map[string]any:
		return "mapping"
	case []any:
		return "list"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		return "number"
	}
	return "null"
}
