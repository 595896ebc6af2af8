package verdict

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
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

// FuzzBase64URL checks the base64url check and decoder against the standard library's strict
// decoder, on inputs without newlines (which that decoder skips and the check refuses).
func FuzzBase64URL(f *testing.F) {
	for _, s := range []string{`AB`, `AQ`, `AAE`, `AAB`, `A`, `_-`, `q1w2e3r4t5y6u7i8o9p0aQ`, "AB\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
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
	})
}
