package verdict

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzVerify feeds arbitrary strings to Verify: it must never panic, must refuse every one with a
// contract reason, and must never accept anything but the one valid token it was seeded with.
func FuzzVerify(f *testing.F) {
	fx := newFixture(f)
	f.Add(fx.token)
	f.Add(flipSignatureBit(fx.token))
	f.Add(fx.token[:strings.LastIndex(fx.token, ".")+1])
	f.Add(jsonSerialization(nil, fx.token, ""))
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("..")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := Verify(tok, fx.want)
		if err == nil {
			if tok != fx.token || c == nil {
				t.Fatalf("accepted %q", tok)
			}
			return
		}
		if ReasonOf(err) == "" || c != nil {
			t.Fatalf("refusal without a reason: %v", err)
		}
		VerifyReceipt(tok, ReceiptExpectation{Issuers: fx.want.Issuers})
	})
}

// FuzzStrictReader checks the hand-written reader against encoding/json on the values it reads:
// where the token starts like a string or a number, both must accept or refuse it alike, and
// agree on the value.
func FuzzStrictReader(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b\u00e9\ud83d\ude00"`, `"\ud800"`, `"tab\there"`, ` "x" `, `"x"y`,
		`0`, `-0`, `AB`, `AQ`, `AAE`, `AAB`, `A`, `_-`, `007`, `1.0`, `1e3`, `-9223372036854775808`, `9223372036854775808`, ` 42 `, `-`, `"\x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The base64url check agrees with the strict decoder (which, unlike it, skips newlines).
		if !strings.ContainsAny(string(data), "\r\n") {
			_, derr := base64.RawURLEncoding.Strict().DecodeString(string(data))
			cerr := checkBase64URL(string(data))
			if (cerr == nil) != (derr == nil) {
				t.Fatalf("base64url %q: check %v, decoder %v", data, cerr, derr)
			}
			if cerr == nil {
				want, _ := base64.RawURLEncoding.DecodeString(string(data))
				if got := appendBase64URL(nil, string(data)); !bytes.Equal(got, want) {
					t.Fatalf("base64url %q: decoded %x, want %x", data, got, want)
				}
			}
		}
		first := strings.TrimLeft(string(data), " \t\r\n")
		if first == "" {
			return
		}
		if !utf8.Valid(data) {
			return
		}
		switch c := first[0]; {
		case c == '"':
			r := newStrictReader(data)
			got, err := r.string()
			if err == nil {
				err = r.end()
			}
			var want string
			jerr := json.Unmarshal(data, &want)
			if (err == nil) != (jerr == nil) || (err == nil && got != want) {
				t.Fatalf("string %q: strict %q, %v; encoding/json %q, %v", data, got, err, want, jerr)
			}
		case c == '-' || '0' <= c && c <= '9':
			r := newStrictReader(data)
			got, err := r.int()
			if err == nil {
				err = r.end()
			}
			var want int64
			jerr := json.Unmarshal(data, &want)
			if (err == nil) != (jerr == nil) || (err == nil && got != want) {
				t.Fatalf("int %q: strict %d, %v; encoding/json %d, %v", data, got, err, want, jerr)
			}
		}
	})
}
