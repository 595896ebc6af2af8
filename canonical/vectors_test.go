package canonical

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// RFC 8785 Appendix B: IEEE-754 bit patterns and their serialization.
var appendixB = []struct{ bits, want string }{
	{"0000000000000000", "0"},
	{"8000000000000000", "0"},
	{"0000000000000001", "5e-324"},
	{"8000000000000001", "-5e-324"},
	{"7fefffffffffffff", "1.7976931348623157e+308"},
	{"ffefffffffffffff", "-1.7976931348623157e+308"},
	{"4340000000000000", "9007199254740992"},
	{"c340000000000000", "-9007199254740992"},
	{"4430000000000000", "295147905179352830000"},
	{"44b52d02c7e14af5", "9.999999999999997e+22"},
	{"44b52d02c7e14af6", "1e+23"},
	{"44b52d02c7e14af7", "1.0000000000000001e+23"},
	{"444b1ae4d6e2ef4e", "999999999999999700000"},
	{"444b1ae4d6e2ef4f", "999999999999999900000"},
	{"444b1ae4d6e2ef50", "1e+21"},
	{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
	{"3eb0c6f7a0b5ed8d", "0.000001"},
	{"41b3de4355555553", "333333333.3333332"},
	{"41b3de4355555554", "333333333.33333325"},
	{"41b3de4355555555", "333333333.3333333"},
	{"41b3de4355555556", "333333333.3333334"},
	{"41b3de4355555557", "333333333.33333343"},
	{"becbf647612f3696", "-0.0000033333333333333333"},
	{"43143ff3c1cb0959", "1424953923781206.2"},
	// NaN and Infinity have no JSON form.
	{"7fffffffffffffff", ""},
	{"7ff0000000000000", ""},
}

func bitsFloat(t *testing.T, s string) float64 {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b))
}

func TestAppendixBNumbers(t *testing.T) {
	for _, tt := range appendixB {
		f := bitsFloat(t, tt.bits)
		got, ok := appendFloat(nil, f)
		if tt.want == "" {
			if ok {
				t.Errorf("0x%s: got %s, want refusal", tt.bits, got)
			}
			if _, err := Marshal(f); !IsCode(err, CodeNumberRange) {
				t.Errorf("Marshal(0x%s): %v, want %s", tt.bits, err, CodeNumberRange)
			}
			continue
		}
		if string(got) != tt.want {
			t.Errorf("0x%s: got %s, want %s", tt.bits, got, tt.want)
		}
		// The expected text is itself exact, so it canonicalizes to itself,
		// and the float64 marshals to it.
		if out, err := Transform([]byte(tt.want)); err != nil || string(out) != tt.want {
			t.Errorf("Transform(%s) = %s, %v", tt.want, out, err)
		}
		if out, err := Marshal(f); err != nil || string(out) != tt.want {
			t.Errorf("Marshal(0x%s) = %s, %v", tt.bits, out, err)
		}
	}
}

// RFC 8785 §3.2.2: the sample object and its canonical form. One of its
// numbers is rounded by RFC 8785, which this package refuses; with that
// number written exactly, the output is the RFC's byte for byte.
func TestRFC8785SampleObject(t *testing.T) {
	const in = `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	const want = `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`

	if _, err := Transform([]byte(in)); !IsCode(err, CodeNumberNotExact) {
		t.Fatalf("Transform(sample) error = %v, want %s", err, CodeNumberNotExact)
	}
	got, err := Options{allowInexact: true}.Transform([]byte(in))
	if err != nil || string(got) != want {
		t.Fatalf("Transform(sample) without exactness = %s, %v; want %s", got, err, want)
	}
	exact := strings.Replace(in, "333333333.33333329", "333333333.3333333", 1)
	got, err = Transform([]byte(exact))
	if err != nil || string(got) != want {
		t.Fatalf("Transform(exact sample) = %s, %v; want %s", got, err, want)
	}
}

// RFC 8785 §3.2.3: member sorting by UTF-16 code units.
func TestRFC8785Sorting(t *testing.T) {
	const in = `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	const want = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\"," +
		"\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\"," +
		"\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	got, err := Transform([]byte(in))
	if err != nil || string(got) != want {
		t.Fatalf("Transform = %s, %v; want %s", got, err, want)
	}
}

func TestCyberphoneVectors(t *testing.T) {
	inputs, err := filepath.Glob("testdata/jcs/input/*.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata/jcs/output", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Options{allowInexact: true}.Transform(data)
			if err != nil || string(got) != string(want) {
				t.Fatalf("Transform = %s, %v; want %s", got, err, want)
			}
			got, err = Transform(data)
			if name == "values.json" {
				if !IsCode(err, CodeNumberNotExact) {
					t.Fatalf("Transform = %s, %v; want %s", got, err, CodeNumberNotExact)
				}
				return
			}
			if err != nil || string(got) != string(want) {
				t.Fatalf("Transform = %s, %v; want %s", got, err, want)
			}
			if ref, err := jcs.Transform(data); err != nil || string(ref) != string(want) {
				t.Fatalf("jcs.Transform = %s, %v", ref, err)
			}
		})
	}
}

// Objects out of order at every level of the deepest nesting allowed come
// out as jcs writes them.
func TestDeepUnsortedNesting(t *testing.T) {
	var sb strings.Builder
	for i := 0; i < DefaultMaxDepth-2; i++ { // each level holds an array holding an object
		sb.WriteString(`{"b":`)
	}
	sb.WriteString(`"\u00e9"`)
	for i := 0; i < DefaultMaxDepth-2; i++ {
		sb.WriteString(`,"a":[1.50,{"d":1,"c":2}]}`)
	}
	in := []byte(sb.String())
	got, err := Transform(in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := jcs.Transform(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("deep output differs from jcs")
	}
	if _, err := Transform(append([]byte(`[`), append(in, ']')...)); !IsCode(err, CodeTooDeep) {
		t.Fatalf("one level deeper: %v, want %s", err, CodeTooDeep)
	}
}
