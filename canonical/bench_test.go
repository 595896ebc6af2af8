package canonical

import (
	"crypto/sha256"
	"testing"

	"github.com/gowebpki/jcs"
)

// args1KiB is a tool-call argument object of the size and shape verdicts
// bind: nested objects, strings with non-ASCII text, integers, decimals and
// an array of records. Members are deliberately not in canonical order.
var args1KiB = []byte(`{
  "to_account": "DE89370400440532013000",
  "from_account": "DE02120300000000202051",
  "amount": 500000,
  "currency": "EUR",
  "reference": "Invoice 2026-11-0042 — Müller & Söhne GmbH",
  "execute_at": "2026-11-30T09:15:00Z",
  "fee_rate": 0.0025,
  "priority": "normal",
  "beneficiary": {
    "name": "Müller & Söhne GmbH",
    "address": {"street": "Hauptstraße 12", "city": "München", "postcode": "80331", "country": "DE"},
    "bic": "COBADEFFXXX",
    "verified": true
  },
  "line_items": [
    {"sku": "A-1001", "description": "Consulting, November", "quantity": 12, "unit_price": 1250.50, "tax_rate": 0.19},
    {"sku": "A-1002", "description": "Travel expenses", "quantity": 1, "unit_price": 842.17, "tax_rate": 0.07},
    {"sku": "B-2001", "description": "Licence renewal (annual)", "quantity": 3, "unit_price": 2999.99, "tax_rate": 0.19}
  ],
  "tags": ["invoice", "recurring", "q4", "approved-by-finance", "eu-sepa"],
  "approval": {"requested": true, "threshold": 250000, "approver_ids": [1042, 2077, 3155]},
  "metadata": {"requested_by": "user-7f3a", "channel": "chat", "confidence": 0.93, "attempt": 1, "notes": null}
}`)

func BenchmarkDigest1KiB(b *testing.B) {
	v, err := Decode(args1KiB)
	if err != nil {
		b.Fatal(err)
	}
	canon, _ := Marshal(v)
	b.SetBytes(int64(len(canon)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Digest(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDigestJSON1KiB(b *testing.B) {
	b.SetBytes(int64(len(args1KiB)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DigestJSON(args1KiB); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate1KiB(b *testing.B) {
	b.SetBytes(int64(len(args1KiB)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Validate(args1KiB); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTransform1KiB(b *testing.B) {
	b.SetBytes(int64(len(args1KiB)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Transform(args1KiB); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode1KiB(b *testing.B) {
	b.SetBytes(int64(len(args1KiB)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(args1KiB); err != nil {
			b.Fatal(err)
		}
	}
}

// The library path this package would otherwise take, for comparison:
// jcs.Transform (without the exactness check) and SHA-256.
func BenchmarkReferenceJCSDigest1KiB(b *testing.B) {
	b.SetBytes(int64(len(args1KiB)))
	b.ReportAllocs()
	for b.Loop() {
		out, err := jcs.Transform(args1KiB)
		if err != nil {
			b.Fatal(err)
		}
		sha256.Sum256(out)
	}
}

func TestBenchmarkInputSize(t *testing.T) {
	canon, err := Transform(args1KiB)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(canon); n < 900 || n > 1200 {
		t.Fatalf("canonical benchmark input is %d bytes, want about 1 KiB", n)
	}
}
