package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// decodeAny is the reference for Reader.Any: encoding/json into an interface value with
// UseNumber, nothing after the value.
func decodeAny(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func readAny(data []byte) (any, error) {
	r := NewReader(data)
	v := r.Any()
	r.End()
	return v, r.Err()
}

func TestReaderAny(t *testing.T) {
	tests := []struct {
		in  string
		err string // "" = as encoding/json decodes it; "syntax"; "unsupported"
	}{
		{`null`, ""},
		{` true `, ""},
		{`false`, ""},
		{`-0.5e+3`, ""},
		{`12345678901234567890123`, ""},
		{`"a\"b\\c\/d\b\f\n\r\t\u00e9\u0000\ud83d\ude00"`, ""},
		{`"송금 é"`, ""},
		{`{}`, ""},
		{`[]`, ""},
		{`{"a":[1,{"b":null}],"\u0063":"d", "e" : [ ] }`, ""},
		{`[[[["x"]]]]`, ""},
		{`"\ud800"`, "unsupported"},
		{`"\udc00\ud800"`, "unsupported"},
		{`"\ud800\u0041"`, "unsupported"},
		{"\"\xff\"", "unsupported"},
		{strings.Repeat("[", maxScanDepth+1) + strings.Repeat("]", maxScanDepth+1), "unsupported"},
		{``, "syntax"},
		{`nul`, "syntax"},
		{`01`, "syntax"},
		{`1.`, "syntax"},
		{`-`, "syntax"},
		{`[1,]`, "syntax"},
		{`[,1]`, "syntax"},
		{`[1 2]`, "syntax"},
		{`{"a":1,}`, "syntax"},
		{`{,"a":1}`, "syntax"},
		{`{"a" 1}`, "syntax"},
		{`{"a":1 "b":2}`, "syntax"},
		{`{"a":1]`, "syntax"},
		{`[1}`, "syntax"},
		{`{1:2}`, "syntax"},
		{`"\x"`, "syntax"},
		{"\"a\tb\"", "syntax"},
		{`"abc`, "syntax"},
		{`[1] 2`, "syntax"},
		{`[1] ]`, "syntax"},
	}
	for _, tt := range tests {
		got, err := readAny([]byte(tt.in))
		switch tt.err {
		case "":
			want, werr := decodeAny([]byte(tt.in))
			if err != nil || werr != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("%q: %#v, %v; encoding/json %#v, %v", tt.in, got, err, want, werr)
			}
		case "unsupported":
			if !errors.Is(err, ErrUnsupported) {
				t.Errorf("%q: %v, want ErrUnsupported", tt.in, err)
			}
		case "syntax":
			if err == nil || errors.Is(err, ErrUnsupported) {
				t.Errorf("%q: %v, want a syntax error", tt.in, err)
			}
		}
	}
}

func TestReaderTyped(t *testing.T) {
	type result struct {
		s   string
		b   bool
		n   int
		raw string
	}
	tests := []struct {
		in   string
		read func(r *Reader) result
		want result
		err  bool
	}{
		{`"x\ty"`, func(r *Reader) result { return result{s: r.Str()} }, result{s: "x\ty"}, false},
		{`1`, func(r *Reader) result { return result{s: r.Str()} }, result{}, true},
		{`true`, func(r *Reader) result { return result{b: r.Bool()} }, result{b: true}, false},
		{`null`, func(r *Reader) result { return result{b: r.Bool()} }, result{}, true},
		{`-42`, func(r *Reader) result { return result{n: r.Int()} }, result{n: -42}, false},
		{`-0`, func(r *Reader) result { return result{n: r.Int()} }, result{}, false},
		{`1.0`, func(r *Reader) result { return result{n: r.Int()} }, result{}, true},
		{`1e2`, func(r *Reader) result { return result{n: r.Int()} }, result{}, true},
		{`9223372036854775807`, func(r *Reader) result { return result{n: r.Int()} }, result{n: 9223372036854775807}, false},
		{`9223372036854775808`, func(r *Reader) result { return result{n: r.Int()} }, result{}, true},
		{`"1"`, func(r *Reader) result { return result{n: r.Int()} }, result{}, true},
		{` {"a" : [1, 2] } `, func(r *Reader) result { return result{raw: string(r.Raw())} }, result{raw: `{"a" : [1, 2] }`}, false},
		{`null`, func(r *Reader) result { return result{b: r.Null()} }, result{b: true}, false},
		{`{"a":1,"b\u0063":2,"a\\b":3}`, func(r *Reader) result {
			var names []string
			r.Object()
			for {
				name, ok := r.Member()
				if !ok {
					break
				}
				names = append(names, string(name))
				r.Int()
			}
			return result{s: strings.Join(names, "|")}
		}, result{s: `a|bc|a\b`}, false},
	}
	for _, tt := range tests {
		r := NewReader([]byte(tt.in))
		got := tt.read(&r)
		r.End()
		if (r.Err() != nil) != tt.err || !tt.err && got != tt.want {
			t.Errorf("%q: %+v, %v; want %+v (error %v)", tt.in, got, r.Err(), tt.want, tt.err)
		}
	}
}

// FuzzReader: what the Reader reads, encoding/json reads alike; what it refuses as a syntax
// error, encoding/json refuses too.
func FuzzReader(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}],"\u0063":"d"}`, `[1,]`, `"\ud83d\ude00"`, `"\ud800"`, `-0.5e+3`, `{"a" 1}`, "[\"\xff\"]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readAny(data)
		want, werr := decodeAny(data)
		switch {
		case err == nil && (werr != nil || !reflect.DeepEqual(got, want)):
			t.Fatalf("%q: read %#v; encoding/json %#v, %v", data, got, want, werr)
		case err != nil && !errors.Is(err, ErrUnsupported) && werr == nil:
			t.Fatalf("%q: syntax error %v; encoding/json read %#v", data, err, want)
		}
	})
}

func BenchmarkReaderAny(b *testing.B) {
	body := []byte(`{"verdict":"eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJ2In0.c2ln","arguments":{"account":"1102534471","amount":250000},` +
		`"segments":[{"text":"send money: 250,000 won to 110-222-333","trust":"user"},{"text":"forwarded","trust":"untrusted"}],` +
		`"by_name":{"from":{"text":"1102534471","trust":"user"}},"ptr":{"text":"x","trust":"user"},"amount":[1,2,3],"inner":"i"}`)
	b.Run("reader", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := readAny(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeAny(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
