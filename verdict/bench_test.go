package verdict

import (
	"crypto/ed25519"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/keys"
)

// The raw crypto/ed25519 benchmarks sign and verify the same bytes a verdict signs, so the cost
// Verify adds over the floor is measured in one run.

func BenchmarkRawEd25519Sign(b *testing.B) {
	f := newFixture(b)
	priv := privateKey(b, f.a).(ed25519.PrivateKey)
	input := []byte(f.token[:len(f.token)-87])
	b.ReportAllocs()
	for b.Loop() {
		ed25519.Sign(priv, input)
	}
}

func BenchmarkRawEd25519Verify(b *testing.B) {
	f := newFixture(b)
	h, p, s := parts(f.token)
	input := []byte(h + "." + p)
	sig, _ := b64.DecodeString(s)
	pub := f.a.Public().Key().(ed25519.PublicKey)
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, input, sig) {
			b.Fatal("does not verify")
		}
	}
}

func BenchmarkSignEdDSA(b *testing.B) {
	f := newFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sign(f.a, f.claims); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignES256(b *testing.B) {
	f := newFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sign(f.ec, f.claims); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyEdDSA(b *testing.B) {
	f := newFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(f.token, f.want); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyES256(b *testing.B) {
	f := newFixture(b)
	tok, err := Sign(f.ec, f.claims)
	if err != nil {
		b.Fatal(err)
	}
	want := f.want
	want.Algorithms = []jose.SignatureAlgorithm{keys.EdDSA, keys.ES256}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(tok, want); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyRefusedAlgNone measures how cheaply a hostile token is turned away.
func BenchmarkVerifyRefusedAlgNone(b *testing.B) {
	f := newFixture(b)
	h := f.header(f.a)
	h["alg"] = "none"
	tok := forge(nil, mustJSON(h), mustJSON(f.claimsMap()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(tok, f.want); ReasonOf(err) != AlgNotAllowed {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyEdDSAOverRaw interleaves a full Verify with a raw ed25519.Verify of the same
// token and reports the ratio of their times: on a shared, noisy machine both see the same load,
// so the ratio is steadier than two separate benchmarks.
func BenchmarkVerifyEdDSAOverRaw(b *testing.B) {
	f := newFixture(b)
	h, p, s := parts(f.token)
	input := []byte(h + "." + p)
	sig, _ := b64.DecodeString(s)
	pub := f.a.Public().Key().(ed25519.PublicKey)
	var full, raw time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := Verify(f.token, f.want); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if !ed25519.Verify(pub, input, sig) {
			b.Fatal("does not verify")
		}
		raw += time.Since(t1)
		full += t1.Sub(t0)
	}
	b.ReportMetric(float64(full)/float64(raw), "x-raw")
}

// BenchmarkGoJoseVerifyOverRaw is the library's own floor, measured the same way: go-jose's
// compact parse and verify against raw ed25519.Verify.
func BenchmarkGoJoseVerifyOverRaw(b *testing.B) {
	f := newFixture(b)
	h, p, s := parts(f.token)
	input := []byte(h + "." + p)
	sig, _ := b64.DecodeString(s)
	pub := f.a.Public().Key().(ed25519.PublicKey)
	algs := []jose.SignatureAlgorithm{keys.EdDSA}
	var full, raw time.Duration
	for b.Loop() {
		t0 := time.Now()
		obj, err := jose.ParseSignedCompact(f.token, algs)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := obj.Verify(pub); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if !ed25519.Verify(pub, input, sig) {
			b.Fatal("does not verify")
		}
		raw += time.Since(t1)
		full += t1.Sub(t0)
	}
	b.ReportMetric(float64(full)/float64(raw), "x-raw")
}

// BenchmarkDecodeClaims measures the strict claims decoder alone, on the fixture's payload.
func BenchmarkDecodeClaims(b *testing.B) {
	f := newFixture(b)
	_, p, _ := parts(f.token)
	payload, err := b64.DecodeString(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeClaims(payload); err != nil {
			b.Fatal(err)
		}
	}
}
