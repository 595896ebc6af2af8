package canonical

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The digests in testdata/digests were computed outside Go (see its
// README), from the canonical forms the tests expect. A digest that hashes
// anything but exactly the canonical bytes — a trailing newline, a prefix,
// another encoding — differs from them, however consistent the package is
// with itself.

// pinnedVectors reads testdata/digests/vectors.txt: canonical form →
// "sha256:<hex>".
func pinnedVectors(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "digests", "vectors.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		hex, canon, ok := strings.Cut(sc.Text(), " ")
		if !ok || len(hex) != 64 || canon == "" {
			t.Fatalf("vectors.txt:%d: want \"<hex> <canonical JSON>\"", n)
		}
		out[canon] = "sha256:" + hex
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pinnedDigest is the independently computed digest of the canonical form
// canon; a form without one is a test mistake.
func pinnedDigest(t *testing.T, canon string) string {
	t.Helper()
	d, ok := pinnedVectors(t)[canon]
	if !ok {
		t.Fatalf("no pinned digest for %s in testdata/digests/vectors.txt", canon)
	}
	return d
}

func TestPinnedDigests(t *testing.T) {
	vs := pinnedVectors(t)
	if len(vs) == 0 {
		t.Fatal("no vectors")
	}
	for canon, want := range vs {
		if got, err := DigestJSON([]byte(canon)); err != nil || got != want {
			t.Errorf("DigestJSON(%s) = %s, %v; want %s", canon, got, err, want)
		}
		if got, err := Digest(json.RawMessage(canon)); err != nil || got != want {
			t.Errorf("Digest(%s) = %s, %v; want %s", canon, got, err, want)
		}
		if got, err := Transform([]byte(canon)); err != nil || string(got) != canon {
			t.Errorf("Transform(%s) = %s, %v: a pinned form is not canonical", canon, got, err)
		}
	}
}

// The digests of the cyberphone vectors: each input digests to the pinned
// digest of its expected output (values.json only with exactness off; see
// testdata/jcs/README.md).
func TestCyberphoneDigests(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "digests", "jcs.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	inputs, _ := filepath.Glob(filepath.Join("testdata", "jcs", "input", "*.json"))
	if len(lines) != len(inputs) {
		t.Fatalf("%d pinned digests for %d inputs", len(lines), len(inputs))
	}
	for _, line := range lines {
		hex, name, ok := strings.Cut(line, "  ")
		if !ok || len(hex) != 64 {
			t.Fatalf("jcs.sha256: bad line %q", line)
		}
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", "jcs", "input", name))
			if err != nil {
				t.Fatal(err)
			}
			o := Options{}
			if name == "values.json" {
				o.allowInexact = true
			}
			if got, err := o.DigestJSON(in); err != nil || got != "sha256:"+hex {
				t.Fatalf("DigestJSON = %s, %v; want sha256:%s", got, err, hex)
			}
		})
	}
}

// RFC 8785's own examples, from their input text to the digest of their
// canonical form.
func TestRFC8785Digests(t *testing.T) {
	const sample = `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	const sorting = `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	tests := []struct {
		name, in, canon string
		o               Options
	}{
		{"sample", sample, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`, Options{allowInexact: true}},
		{"sample written exactly", strings.Replace(sample, "333333333.33333329", "333333333.3333333", 1), `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`, Options{}},
		{"sorting", sorting, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\"," +
			"\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\"," +
			"\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}", Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := pinnedDigest(t, tt.canon)
			if got, err := tt.o.DigestJSON([]byte(tt.in)); err != nil || got != want {
				t.Fatalf("DigestJSON = %s, %v; want %s", got, err, want)
			}
		})
	}
}
