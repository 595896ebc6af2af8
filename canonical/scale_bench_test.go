package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// argumentSizes are the argument object sizes the scaling benchmarks measure, from a typical
// tool call to the largest body the daemons accept by default.
var argumentSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"16KiB", 16 << 10}, {"256KiB", 256 << 10}, {"1MiB", 1 << 20}}

// scaleArgs returns a tool-call argument object of at most size bytes (and within one line item
// of it): a few transfer fields and as many invoice line items as fit, with non-ASCII text,
// integers and decimals, members out of canonical order. verdict's scaling benchmark builds the
// same objects.
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

func TestScaleArgs(t *testing.T) {
	for _, s := range argumentSizes {
		data := scaleArgs(s.n)
		if len(data) > s.n || len(data) < s.n-200 {
			t.Errorf("%s: %d bytes", s.name, len(data))
		}
		if _, err := DigestJSON(data); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
	}
}

// BenchmarkDigestScale measures how the canonical digest grows with the argument object, and
// its floors, interleaved in one loop so that every figure of a size sees the same machine load:
//
//	digest-ns  Digest of the decoded value (verdictd digests the call it assembled)
//	json-ns    DigestJSON of the JSON text (the executor digests the arguments it was sent)
//	sha256-ns  SHA-256 of the same text: the floor no digest can go under
//	naive-ns   encoding/json decode into any and encode again (sorted keys): the naive
//	           canonicalization a digest would otherwise be built on
//
// x-sha256 and x-naive are json-ns over the two floors. ns/op is the sum of all four.
func BenchmarkDigestScale(b *testing.B) {
	for _, s := range argumentSizes {
		b.Run("size="+s.name, func(b *testing.B) {
			data := scaleArgs(s.n)
			v, err := Decode(data)
			if err != nil {
				b.Fatal(err)
			}
			runs := 10
			if s.n > 64<<10 {
				runs = 2
			}
			// Counted before the loop: its figures are time only, and the loop's own B/op and
			// allocs/op would mix all four operations.
			valueAllocs := testing.AllocsPerRun(runs, func() { Digest(v) })
			textAllocs := testing.AllocsPerRun(runs, func() { DigestJSON(data) })
			var value, text, sum, naive time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := Digest(v); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := DigestJSON(data); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				sha256.Sum256(data)
				t3 := time.Now()
				var x any
				if err := json.Unmarshal(data, &x); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(x); err != nil {
					b.Fatal(err)
				}
				t4 := time.Now()
				value += t1.Sub(t0)
				text += t2.Sub(t1)
				sum += t3.Sub(t2)
				naive += t4.Sub(t3)
			}
			n := float64(b.N)
			b.ReportMetric(float64(value)/n, "digest-ns")
			b.ReportMetric(float64(text)/n, "json-ns")
			b.ReportMetric(float64(sum)/n, "sha256-ns")
			b.ReportMetric(float64(naive)/n, "naive-ns")
			b.ReportMetric(float64(text)/float64(sum), "x-sha256")
			b.ReportMetric(float64(text)/float64(naive), "x-naive")
			b.ReportMetric(valueAllocs, "digest-allocs")
			b.ReportMetric(textAllocs, "json-allocs")
		})
	}
}
