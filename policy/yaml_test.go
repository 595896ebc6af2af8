package policy

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
	goyaml "sigs.k8s.io/yaml/goyaml.v2"

	"github.com/verdictgate/verdict/internal/yamlpos"
)

// legacyJSON is the reading of a policy document the node reading replaced: sigs.k8s.io/yaml's
// strict conversion to JSON, decoded with UseNumber, a document with a key that YAML 1.1 does
// not read as text refused. ok is false for a document it refuses.
func legacyJSON(data []byte) (doc any, ok bool) {
	var raw any
	if err := goyaml.Unmarshal(data, &raw); err != nil || !textKeys(raw) {
		return nil, false
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, false
	}
	return doc, true
}

func textKeys(v any) bool {
	switch x := v.(type) {
	case map[any]any:
		for k, e := range x {
			if _, ok := k.(string); !ok || !textKeys(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !textKeys(e) {
				return false
			}
		}
	}
	return true
}

// nodeJSON is the node reading: document's checks, then the value of every node as jsonValue
// reads a free-form one.
func nodeJSON(data []byte) (doc any, ok bool) {
	root, problems := document(data)
	if len(problems) > 0 {
		return nil, false
	}
	if root == nil {
		return nil, true
	}
	return jsonValue(root), true
}

// nonSpecific says data may carry the non-specific tag "!", which yaml.v3 drops: the value is
// read as untagged, where the old reading read it as text. No policy has one.
func nonSpecific(data []byte) bool { return nonSpecificTag.Match(data) }

var nonSpecificTag = regexp.MustCompile(`(^|[^!])!($|[^!\w])`)

// v3Refuses says yaml.v3 does not parse data, which the old reading took from its other
// parser alone, and the node reading refuses.
func v3Refuses(data []byte) bool {
	_, err := yamlpos.ParseAlone(data)
	return err != nil
}

const aliasBomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
	"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"

var documentCases = []string{
	"policy_version: v1\nservers: {}\n",
	"a: [yes, no, on, off, y, n, Yes, NO, true, False, ~, null, '', \"yes\"]\n",
	"a: [0x1F, 0o17, 017, 08, 0b101, -0b101, 1_000, +5, -7, 1.5, .5, 1e3, 1.0, 12345678901234567890, 1e400]\n",
	"a: [0b+00, 0o+7, -0o17, 0o1_7]\n",
	"a: [2026-11-30, 2026-11-30T10:00:00Z, 1.0.0, -, +, ., ..., '007']\n",
	"a: [.inf, -.Inf]\n",
	"b: .nan\n",
	"007: x\n",
	"on: x\n",
	"{1e3: a, x: {~: b}}\n",
	"d: &d {a: 1, b: [x, y]}\ne: *d\nf: {<<: *d, c: 2}\n",
	"d: &d {a: 1}\nf: {<<: *d, a: 2}\n",
	"d: &d {a: 1}\ne: &e {a: 2}\nf: {<<: [*d, *e]}\n",
	"f: {<<: 1}\n",
	aliasBomb,
	"? [a]\n: b\n",
	"{}:\n",
	"b: !!binary 00000000\nc: !!binary aGVsbG8=\n",
	"a: 1\n[]: x\n",
	"a: !foo bar\nb: !!binary aGVsbG8=\nc: !!timestamp 2001-12-14\nd: !!int '12'\ne: !!float 3\nf: !!bool yes\ng: !!int x\n",
	"a: |\n  text\n  more\nb: >\n  folded\n  text\n",
	"",
	"# only a comment\n",
	"[1, 2]\n",
	"plain\n",
	"[0_o+0, 0o+7, -0o-7, 0o_17, -0o1_7, 0o+17_]\n",
	"a: !!int 0o+7\n",
	"a: !!float 0o-7\n",
	`{"policy_version": "v1", "n": 1.50, "s": "\u00e9<>&"}`,
}

// TestDocumentAsJSON: the node reading takes the documents the old reading took, and reads
// each to the same values.
func TestDocumentAsJSON(t *testing.T) {
	for _, c := range documentCases {
		checkDocumentAsJSON(t, []byte(c))
	}
	for _, f := range policyFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkDocumentAsJSON(t, data)
	}
	// The core schema's tags read as they did.
	core := []byte("a: !!int '12'\nb: !!float 3\nc: !!str 12\nd: !!bool yes\ne: !!null ''\n")
	want, _ := legacyJSON(core)
	if got, ok := nodeJSON(core); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("tags: %#v, want %#v", got, want)
	}
}

// FuzzDocumentAsJSON holds the node reading to the old one on any document.
func FuzzDocumentAsJSON(f *testing.F) {
	for _, c := range documentCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDocumentAsJSON(t, data) })
}

// isMapping says doc may be a policy: one that is not is refused whatever its reading.
func isMapping(doc any) bool {
	_, ok := doc.(map[string]any)
	return ok
}

func checkDocumentAsJSON(t *testing.T, data []byte) {
	t.Helper()
	if nonSpecific(data) {
		return
	}
	want, wantOK := legacyJSON(data)
	got, gotOK := nodeJSON(data)
	switch {
	case wantOK && gotOK && !reflect.DeepEqual(got, want):
		t.Fatalf("%q reads as\n%#v\nwant\n%#v", data, got, want)
	case gotOK && !wantOK && isMapping(got):
		t.Fatalf("%q is taken, and the old reading refused it", data)
	case wantOK && !gotOK && !v3Refuses(data) && !refusedRightly(data):
		_, problems := document(data)
		t.Fatalf("%q is refused (%v), and the old reading took it", data, problems)
	}
}

// refusedRightly says the node reading refuses data for what the old reading took only by
// changing it without a word: a key that is an empty list or mapping ("{}: x", "[]:"), which
// yaml.v2 drops with its value, or a !!binary value whose bytes are not UTF-8, which became
// U+FFFD on the way through JSON.
func refusedRightly(data []byte) bool {
	_, problems := document(data)
	for _, p := range problems {
		if p.Msg == "a key is a list or a mapping, not text" || strings.HasSuffix(p.Msg, "decodes to bytes that are not UTF-8 text") {
			return true
		}
	}
	return false
}

// TestDocumentProblems: what the node reading refuses that the old one refused without a place,
// it refuses at its place.
func TestDocumentProblems(t *testing.T) {
	for _, tt := range []struct{ doc, want string }{
		{"a: [1, .inf]\n", "a[1]: .inf: not a number JSON holds"},
		{"d: &d {a: 1}\nf: {<<: *d, a: 2}\n", "f.a: key set twice: here and by a merge key (<<)"},
		{"f: {<<: [1]}\n", "f: map merge requires map or sequence of maps as the value"},
		{"a: !!int x\n", "a: cannot decode !!str `x` as a !!int"},
		{"? [a]\n: b\n", "a key is a list or a mapping, not text"},
		{"{}: x\n", "a key is a list or a mapping, not text"},
		{"b: !!binary 00000000\n", `b: !!binary "00000000" decodes to bytes that are not UTF-8 text`},
		{aliasBomb, "document contains excessive aliasing"},
		{"a: &a [*a]\n", "document contains excessive aliasing"},
		{"d: &d {a: 1}\ne: &e {<<: [*d, *e]}\n", "document contains excessive aliasing"},
		{"e: &e {b: {<<: *e}}\n", "document contains excessive aliasing"},
	} {
		_, problems := document([]byte(tt.doc))
		var got []string
		for _, p := range problems {
			got = append(got, p.String())
		}
		if len(got) != 1 || got[0] != tt.want {
			t.Errorf("%q: problems %q, want %q", tt.doc, strings.Join(got, "; "), tt.want)
		}
	}
}

// TestScalarsReadAsBefore holds the node reading to the old one on every short scalar made of
// the characters YAML's numbers, booleans and nulls are spelled with, plain, as a key and under
// each core tag: the fuzzer found its differences here (0_o+0 is an integer only to yaml.v3).
func TestScalarsReadAsBefore(t *testing.T) {
	for _, sweep := range []struct {
		alphabet string
		length   int
	}{
		{"0o+_.eb", 4},
		{"01o+-_.ebx:yN~", 3},
	} {
		for _, s := range spellings(sweep.alphabet, sweep.length) {
			for _, doc := range []string{"[" + s + "]\n", "{" + s + ": 1}\n", "a: !!str " + s + "\n",
				"a: !!bool " + s + "\n", "a: !!null " + s + "\n", "a: !!int " + s + "\n", "a: !!float " + s + "\n"} {
				checkDocumentAsJSON(t, []byte(doc))
			}
		}
	}
}

// spellings returns every string of 1 to n characters drawn from alphabet.
func spellings(alphabet string, n int) []string {
	out := []string{""}
	var all []string
	for range n {
		var next []string
		for _, p := range out {
			for _, c := range alphabet {
				next = append(next, p+string(c))
			}
		}
		all, out = append(all, next...), next
	}
	return all
}
