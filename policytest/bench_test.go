package policytest

import (
	"testing"

	"github.com/verdictgate/verdict/policy"
)

// BenchmarkRun1000Cases runs 1,000 cases of the example policy's tests (its cases over and over,
// 2.5 steps each on average) through one Runner: one op is the whole run, which should stay
// well under 2 s (BENCHMARKS.md).
func BenchmarkRun1000Cases(b *testing.B) {
	pol, err := policy.Load(examplePolicy)
	if err != nil {
		b.Fatal(err)
	}
	f, err := Load(exampleTests)
	if err != nil {
		b.Fatal(err)
	}
	cases := f.Cases
	f.Cases = make([]*Case, 1000)
	for i := range f.Cases {
		f.Cases[i] = cases[i%len(cases)]
	}
	r, err := NewRunner(pol)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.Run(b.Context(), f)
		if err != nil {
			b.Fatal(err)
		}
		if n := res.Failed(); n > 0 {
			b.Fatalf("%d cases failed", n)
		}
	}
}
