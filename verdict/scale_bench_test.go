package verdict

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/verdictgate/verdict/canonical"
)

// argumentSizes are the argument object sizes the scaling benchmark measures, as in canonical's
// BenchmarkDigestScale.
var argumentSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"16KiB", 16 << 10}, {"256KiB", 256 << 10}, {"1MiB", 1 << 20}}

// scaleArgs returns the argument object canonical's scaling benchmark digests: at most size
// bytes, transfer fields and invoice line items, members out of canonical order.
func scaleArgs(size int) []byte {
	const head = `{"to_account":"DE89370400440532013000","from_account":"DE02120300000000202051",` +
		`"amount":500000,"currency":"EUR","reference":"Invoice 2026-11-0042 — Müller & Söhne GmbH","line_items":[`
	const tail = `],"metadata":{"requested_by":"user-7f3a","channel":"chat","confidence":0.93,"attempt":1,"notes":null}}`
	var b bytes.Buffer
	b.WriteString(head)
	for i := 0; ; i++ {
		item := fmt.Sprintf(`{"sku":"A-%05d","description":"Consulting — Hauptstraße %d, München","quantity":%d,"unit_price":%d.%02d,"tax_rate":0.19}`,
			i, i, i%17+1, 1000+i%9000, i%100)
		if i > 0 && b.Len()+1+len(item)+len(tail) > size {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteString(tail)
	return b.Bytes()
}

// BenchmarkVerifyDigestScale is the executor's verification of one call as the arguments grow:
// the canonical digest of the argument text it was sent, then Verify of a verdict that binds
// that digest. Interleaved in the same loop is its floor: SHA-256 of the same text and a raw
// ed25519.Verify of the same token.
//
//	op-ns     canonical.DigestJSON + Verify
//	floor-ns  sha256.Sum256 + ed25519.Verify
//	x-floor   op-ns over floor-ns
func BenchmarkVerifyDigestScale(b *testing.B) {
	for _, s := range argumentSizes {
		b.Run("size="+s.name, func(b *testing.B) {
			f := newFixture(b)
			data := scaleArgs(s.n)
			digest, err := canonical.DigestJSON(data)
			if err != nil {
				b.Fatal(err)
			}
			f.claims.Arguments = digest
			token, err := Sign(f.a, f.claims)
			if err != nil {
				b.Fatal(err)
			}
			h, p, sg := parts(token)
			input := []byte(h + "." + p)
			sig, _ := b64.DecodeString(sg)
			pub := f.a.Public().Key().(ed25519.PublicKey)
			want := f.want
			var op, floor time.Duration
			for b.Loop() {
				t0 := time.Now()
				d, err := canonical.DigestJSON(data)
				if err != nil {
					b.Fatal(err)
				}
				want.ArgumentsDigest = d
				if _, err := Verify(token, want); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				sha256.Sum256(data)
				if !ed25519.Verify(pub, input, sig) {
					b.Fatal("does not verify")
				}
				floor += time.Since(t1)
				op += t1.Sub(t0)
			}
			b.ReportMetric(float64(op)/float64(b.N), "op-ns")
			b.ReportMetric(float64(floor)/float64(b.N), "floor-ns")
			b.ReportMetric(float64(op)/float64(floor), "x-floor")
		})
	}
}
