package yamlpos

import (
	"errors"
	"fmt"
	"testing"
)

const doc = `listen: a
servers:
  bank:
    command: [bank, --state, s.json]
  "a.b": {url: "http://x"}
tools:
  bank/transfer:
    fields:
      to: {allowed_sources: [user_answer, instruction]}
defaults: &d
  kind: etcd
store:
  <<: *d
  prefix: /x/
`

func TestFind(t *testing.T) {
	root, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path  string
		pos   string
		exact bool
	}{
		{"listen", "1:1", true},
		{"servers.bank", "3:3", true},
		{"servers.bank.command[2]", "4:30", true},
		{`servers["a.b"].url`, "5:11", true},
		{`tools["bank/transfer"].fields.to.allowed_sources[1]`, "9:43", true},
		{"store.kind", "11:3", true},   // through a merge key, at the anchor's key
		{"store.prefix", "14:3", true}, // the mapping's own key
		{"servers.bank.env", "3:3", false},
		{"servers.bank.command[9]", "4:5", false},
		{"nothing", "", false},
		{"", "", true},
		{"listen[", "", false},
		{".listen", "", false},
	}
	for _, tt := range tests {
		pos, exact := Find(root, tt.path)
		if pos.String() != tt.pos || exact != tt.exact {
			t.Errorf("Find(%q) = %s %v, want %s %v", tt.path, pos, exact, tt.pos, tt.exact)
		}
	}
}

func TestPathRoundTrip(t *testing.T) {
	p := Index(Key(Key(Key("", "tools"), "bank/tr]ans\"fer"), "allowed_sources"), 2)
	if p != `tools["bank/tr]ans\"fer"].allowed_sources[2]` {
		t.Fatalf("path %s", p)
	}
	steps, err := split(p)
	if err != nil || len(steps) != 4 || steps[1].key != `bank/tr]ans"fer` || !steps[3].isIndex || steps[3].index != 2 {
		t.Fatalf("split: %+v %v", steps, err)
	}
	if Join("nonce_store", "endpoints[0]") != "nonce_store.endpoints[0]" || Join("a", "[1]") != "a[1]" || Join("", "b") != "b" || Join("a", "") != "a" {
		t.Fatal("Join")
	}
}

func TestSyntaxError(t *testing.T) {
	tests := []struct {
		in   string
		line int
	}{
		{"a: 1\nb: [1, 2\nc: 3\n", 2},
		{"a:\n  b: 1\n c: 2\n", 2},
		{"a: 1\nb: 2\n\tc: 3\n", 3},
		{"a: 1\nb: c: d\n", 2},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.in))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Line != tt.line || se.Msg == "" {
			t.Errorf("%q: %v (%+v), want a syntax error on line %d", tt.in, err, se, tt.line)
			continue
		}
		if got := se.Error(); got[:5] == "yaml:" {
			t.Errorf("%q: message keeps the yaml prefix: %s", tt.in, got)
		}
	}
	if root, err := Parse(nil); root != nil || err != nil {
		t.Errorf("empty document: %v %v", root, err)
	}
}

// A document only sigs.k8s.io/yaml takes is left without places by Parse, and refused by
// ParseAlone, whose caller has nothing else to read it with.
func TestParseAlone(t *testing.T) {
	const onlySigs = "\"\"\"\n\"\""
	if root, err := Parse([]byte(onlySigs)); root != nil || err != nil {
		t.Errorf("Parse: %v %v, want no places and no error", root, err)
	}
	var se *SyntaxError
	if _, err := ParseAlone([]byte(onlySigs)); !errors.As(err, &se) || se.Msg == "" {
		t.Errorf("ParseAlone: %v, want a syntax error", err)
	}
	for _, doc := range []string{"a: [1, 2\n", "a: 1\n", ""} {
		r1, err1 := Parse([]byte(doc))
		r2, err2 := ParseAlone([]byte(doc))
		if (r1 == nil) != (r2 == nil) || fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Errorf("%q: Parse %v %v, ParseAlone %v %v", doc, r1, err1, r2, err2)
		}
	}
}

func TestDuplicates(t *testing.T) {
	root, err := Parse([]byte("a: 1\nb:\n  x: 1\n  x: 2\na: 3\nl:\n  - {k: 1, k: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := Duplicates(root)
	want := []Duplicate{
		{Path: "b", Key: "x", At: Pos{4, 3}, First: Pos{3, 3}},
		{Path: "", Key: "a", At: Pos{5, 1}, First: Pos{1, 1}},
		{Path: "l[0]", Key: "k", At: Pos{7, 12}, First: Pos{7, 6}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("duplicate %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
