package canonical

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestTransform(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"sorts members", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"nested reorder", `{"b":{"z":1,"y":[{"d":0,"c":1}]},"a":2}`, `{"a":2,"b":{"y":[{"c":1,"d":0}],"z":1}}`},
		{"whitespace", " \t\n\r{ \"a\" : [ 1 , 2 ] }\n", `{"a":[1,2]}`},
		{"minus zero", `-0`, `0`},
		{"minus zero fraction", `[-0.0,0e10,-0E-3]`, `[0,0,0]`},
		{"one point zero", `1.0`, `1`},
		{"tenth", `0.1`, `0.1`},
		{"1e300", `1e300`, `1e+300`},
		{"1e21 boundary", `[1e21,1e20,999999999999999900000]`, `[1e+21,100000000000000000000,999999999999999900000]`},
		{"1e-7 boundary", `[0.000001,1e-7,0.0000001]`, `[0.000001,1e-7,1e-7]`},
		{"2^53", `9007199254740992`, `9007199254740992`},
		{"large exact", `295147905179352830000`, `295147905179352830000`},
		{"escapes", `"\u0041\/\b\f\n\r\t\"\\\u001f\u007f\u00e9"`, "\"A/\\b\\f\\n\\r\\t\\\"\\\\\\u001f\x7f\u00e9\""},
		{"surrogate pair", `"\ud83d\ude00"`, "\"\U0001F600\""},
		{"U+2028 raw", `"\u2028"`, "\"\u2028\""},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"empty containers", `{"a":{},"b":[]}`, `{"a":{},"b":[]}`},
		{"utf16 order", "{\"\ufb33\":1,\"\U0001F600\":2,\"\u20ac\":3}", "{\"\u20ac\":3,\"\U0001F600\":2,\"\ufb33\":1}"},
		{"prefix shorter first", `{"ab":1,"a":2}`, `{"a":2,"ab":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Transform([]byte(tt.in))
			if err != nil {
				t.Fatalf("Transform(%q): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Fatalf("Transform(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if err := Validate([]byte(tt.in)); err != nil {
				t.Fatalf("Validate(%q): %v", tt.in, err)
			}
		})
	}
}

func TestTransformRejects(t *testing.T) {
	tests := []struct {
		name, in, code string
		off            int64
	}{
		{"2^53+1", `9007199254740993`, CodeNumberNotExact, 0},
		{"18 digits", `{"id":123456789012345678}`, CodeNumberNotExact, 6},
		{"rounded fraction", `333333333.33333329`, CodeNumberNotExact, 0},
		{"1e400", `[1e400]`, CodeNumberRange, 1},
		{"-1e400", `-1e400`, CodeNumberRange, 0},
		{"underflow", `1e-400`, CodeNumberRange, 0},
		{"duplicate", `{"a":1,"b":2,"a":3}`, CodeDuplicateKey, 13},
		{"duplicate after unescape", `{"a":1,"\u0061":2}`, CodeDuplicateKey, 7},
		{"duplicate adjacent", `{"a":1,"a":2}`, CodeDuplicateKey, 7},
		{"invalid utf8", "\"a\xffb\"", CodeInvalidUTF8, 2},
		{"encoded surrogate", "\"\xed\xa0\x80\"", CodeInvalidUTF8, 1},
		{"truncated utf8", "\"\xe2\x82\"", CodeInvalidUTF8, 1},
		{"lone high", `"\ud800x"`, CodeLoneSurrogate, 1},
		{"lone high at end", `"\ud800"`, CodeLoneSurrogate, 1},
		{"lone low", `"\udc00"`, CodeLoneSurrogate, 1},
		{"high high", `"\ud800\ud800"`, CodeLoneSurrogate, 1},
		{"NaN", `NaN`, CodeInvalidJSON, 0},
		{"Infinity", `[Infinity]`, CodeInvalidJSON, 1},
		{"empty", ``, CodeInvalidJSON, 0},
		{"trailing", `{} {}`, CodeInvalidJSON, 3},
		{"trailing comma", `[1,]`, CodeInvalidJSON, 3},
		{"leading zero", `01`, CodeInvalidJSON, 1},
		{"plus", `+1`, CodeInvalidJSON, 0},
		{"bare point", `1.`, CodeInvalidJSON, 0},
		{"hex", `0x10`, CodeInvalidJSON, 1},
		{"single quotes", `{'a':1}`, CodeInvalidJSON, 1},
		{"control char", "\"a\nb\"", CodeInvalidJSON, 2},
		{"bad escape", `"\x"`, CodeInvalidJSON, 1},
		{"short u escape", `"\u12"`, CodeInvalidJSON, 1},
		{"unterminated", `"abc`, CodeInvalidJSON, 0},
		{"bom", "\xef\xbb\xbf{}", CodeInvalidJSON, 0},
		{"too deep", strings.Repeat("[", DefaultMaxDepth+1) + strings.Repeat("]", DefaultMaxDepth+1), CodeTooDeep, DefaultMaxDepth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, f := range []func([]byte) error{
				func(b []byte) error { _, err := Transform(b); return err },
				Validate,
				func(b []byte) error { _, err := DigestJSON(b); return err },
				func(b []byte) error { _, err := Decode(b); return err },
			} {
				err := f([]byte(tt.in))
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("%q: error %v, want *Error %s", tt.in, err, tt.code)
				}
				if e.Code != tt.code || e.Offset != tt.off {
					t.Fatalf("%q: got %s at %d (%v), want %s at %d", tt.in, e.Code, e.Offset, err, tt.code, tt.off)
				}
			}
		})
	}
}

func TestErrorWrapping(t *testing.T) {
	_, err := Transform([]byte(`9007199254740993`))
	wrapped := fmt.Errorf("arguments: %w", err)
	if !IsCode(wrapped, CodeNumberNotExact) || IsCode(wrapped, CodeDuplicateKey) {
		t.Fatalf("IsCode through wrapping: %v", wrapped)
	}
	var e *Error
	if !errors.As(wrapped, &e) || e.Code != CodeNumberNotExact {
		t.Fatalf("errors.As through wrapping: %v", wrapped)
	}
}

func TestMaxDepth(t *testing.T) {
	o := Options{MaxDepth: 3}
	if _, err := o.Transform([]byte(`[[{"a":1}]]`)); err != nil {
		t.Fatalf("depth 3: %v", err)
	}
	if _, err := o.Transform([]byte(`[[{"a":[]}]]`)); !IsCode(err, CodeTooDeep) {
		t.Fatalf("depth 4: %v, want %s", err, CodeTooDeep)
	}
	if _, err := o.Digest(map[string]any{"a": []any{map[string]any{"b": []any{}}}}); !IsCode(err, CodeTooDeep) {
		t.Fatalf("Digest depth 4: %v, want %s", err, CodeTooDeep)
	}
	if _, err := o.Digest(map[string]any{"a": json.RawMessage(`[[[1]]]`)}); !IsCode(err, CodeTooDeep) {
		t.Fatalf("Digest raw depth 4: %v", err)
	}
}

// Each value digests to the digest pinned in testdata/digests for its
// canonical form, computed outside Go.
func TestDigest(t *testing.T) {
	tests := []struct {
		name string
		v    any
		json string
	}{
		{"map", map[string]any{"b": 1, "a": []any{1.5, "x", nil, true}}, `{"a":[1.5,"x",null,true],"b":1}`},
		{"number preserved", map[string]any{"n": json.Number("1.0e2")}, `{"n":100}`},
		{"raw message", map[string]any{"r": json.RawMessage(`{"z":1, "y":[2.50]}`)}, `{"r":{"y":[2.5],"z":1}}`},
		{"struct", struct {
			B string `json:"b"`
			A int    `json:"a"`
		}{"<&>", 3}, `{"a":3,"b":"<&>"}`},
		{"typed map", map[string]string{"\u20ac": "1", "\U0001F600": "2"}, "{\"\u20ac\":\"1\",\"\U0001F600\":\"2\"}"},
		{"nil map", map[string]any(nil), `null`},
		{"float", 0.1, `0.1`},
		{"float32", float32(0.1), `0.1`},
		{"int64 exact", int64(1) << 53, `9007199254740992`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Marshal(tt.v)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(b) != tt.json {
				t.Fatalf("Marshal = %s, want %s", b, tt.json)
			}
			d, err := Digest(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			dj, err := DigestJSON([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if want := pinnedDigest(t, tt.json); d != want || dj != want {
				t.Fatalf("Digest = %s, DigestJSON = %s, want %s", d, dj, want)
			}
		})
	}
}

func TestDigestRejects(t *testing.T) {
	tests := []struct {
		name string
		v    any
		code string
	}{
		{"int64 2^53+1", int64(1)<<53 + 1, CodeNumberNotExact},
		{"json.Number inexact", json.Number("123456789012345678"), CodeNumberNotExact},
		{"json.Number garbage", json.Number("1x"), CodeInvalidJSON},
		{"NaN", map[string]any{"a": nan()}, CodeNumberRange},
		{"invalid utf8 string", []any{"a\xff"}, CodeInvalidUTF8},
		{"invalid utf8 key", map[string]any{"\xff": 1}, CodeInvalidUTF8},
		{"invalid utf8 in struct", struct{ S string }{"\xff"}, CodeInvalidUTF8},
		{"raw duplicate", json.RawMessage(`{"a":1,"a":2}`), CodeDuplicateKey},
		{"channel", make(chan int), CodeInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Digest(tt.v); !IsCode(err, tt.code) {
				t.Fatalf("Digest: %v, want %s", err, tt.code)
			}
		})
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}

func TestDecode(t *testing.T) {
	v, err := Decode([]byte(`{"n":1.50,"a":[1,"x"]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if m["n"] != json.Number("1.50") {
		t.Fatalf("n = %#v, want json.Number(\"1.50\")", m["n"])
	}
	d1, _ := Digest(v)
	d2, _ := DigestJSON([]byte(`{"a":[1,"x"],"n":1.5}`))
	if d1 != d2 {
		t.Fatalf("Digest(Decode(x)) = %s, want %s", d1, d2)
	}
}
