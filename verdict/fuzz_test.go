package verdict

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/keys"
)

// FuzzVerify feeds arbitrary strings to Verify and VerifyReceipt: neither may panic, each must
// refuse every string with a contract reason, and each may accept only the one valid token of its
// kind it was seeded with, byte for byte. The receipt's checker trusts the verdict's issuers too,
// so a verdict is refused as a receipt for what it is, not for its key.
func FuzzVerify(f *testing.F) {
	fx := newFixture(f)
	exec, err := keys.Generate(keys.EdDSA)
	if err != nil {
		f.Fatal(err)
	}
	execSet, _ := keys.NewSet(exec.Public())
	receiptWant := ReceiptExpectation{
		Issuers: append([]TrustedIssuer{{ID: "executor-bank", Keys: execSet}}, fx.want.Issuers...),
		Now:     fx.want.Now,
		Skew:    5 * time.Second,
	}
	receipt := Receipt{Issuer: "executor-bank", ID: fx.claims.ID, ActionKey: fx.claims.ActionKey,
		Arguments: fx.claims.Arguments, Decision: "executed", IssuedAt: fx.now.Unix()}
	receiptTok, err := SignReceipt(exec, receipt)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fx.token)
	f.Add(receiptTok)
	f.Add(flipSignatureBit(fx.token))
	f.Add(flipSignatureBit(receiptTok))
	f.Add(fx.token[:strings.LastIndex(fx.token, ".")+1])
	f.Add(jsonSerialization(nil, fx.token, ""))
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("..")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := Verify(tok, fx.want)
		switch {
		case err == nil && (tok != fx.token || c == nil):
			t.Fatalf("accepted %q as a verdict", tok)
		case err != nil && (ReasonOf(err) == "" || c != nil):
			t.Fatalf("verdict refusal without a reason: %v", err)
		case err != nil && tok == fx.token:
			t.Fatalf("the signed verdict is refused: %v", err)
		}

		r, err := VerifyReceipt(tok, receiptWant)
		switch {
		case err == nil && (tok != receiptTok || r == nil || *r != receipt):
			t.Fatalf("accepted %q as a receipt", tok)
		case err != nil && (ReasonOf(err) == "" || r != nil):
			t.Fatalf("receipt refusal without a reason: %v", err)
		case err != nil && tok == receiptTok:
			t.Fatalf("the signed receipt is refused: %v", err)
		}
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
