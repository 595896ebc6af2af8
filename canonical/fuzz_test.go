package canonical

import (
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
)

func FuzzTransform(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[1.0,2e3,"x\u0041"],"c":{"z":1,"y":2}}`,
		`9007199254740993`, `-0`, `1e21`, `0.000001`, `333333333.33333329`,
		`{"a":1,"\u0061":2}`, `"\ud83d\ude00\u20ac\ufb33"`, `"\ud800"`, "\"\xff\"",
		`[[[[{"\u00e9":{"e":null,"é":true}}]]]]`, `{"":{"":[]}," ":0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Transform(data)
		if verr := Validate(data); (verr == nil) != (err == nil) {
			t.Fatalf("Validate = %v, Transform = %v", verr, err)
		}
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not *Error", err)
			}
		} else {
			again, err := Transform(out)
			if err != nil || string(again) != string(out) {
				t.Fatalf("not idempotent: %q -> %q (%v)", out, again, err)
			}
			if !json.Valid(out) {
				t.Fatalf("output is not JSON: %q", out)
			}
			if err := Validate(out); err != nil {
				t.Fatalf("Validate(output): %v", err)
			}
			dj, err := DigestJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := Digest(json.RawMessage(data)); err != nil || d != dj {
				t.Fatalf("Digest(RawMessage) = %s (%v), DigestJSON = %s", d, err, dj)
			}
			v, err := Decode(data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if d, err := Digest(v); err != nil || d != dj {
				t.Fatalf("Digest(Decode) = %s (%v), DigestJSON = %s", d, err, dj)
			}
		}

		// Byte for byte the same as jcs, apart from the exactness check.
		loose, lerr := Options{allowInexact: true}.Transform(data)
		ref, jerr := jcs.Transform(data)
		if IsCode(lerr, CodeTooDeep) {
			return // jcs allows 10000 levels
		}
		if IsCode(lerr, CodeNumberRange) && jerr == nil {
			// A non-zero literal that underflows to zero (1e-1000) is refused even without the
			// exactness check; jcs writes it as 0.
			return
		}
		if (lerr == nil) != (jerr == nil) {
			t.Fatalf("accepts differ: ours %v, jcs %v", lerr, jerr)
		}
		if lerr == nil && string(loose) != string(ref) {
			t.Fatalf("output differs:\nours %q\njcs  %q", loose, ref)
		}
	})
}
