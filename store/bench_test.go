package store

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDecisionAppendParallel: verdictd's write path, one decision record (~1.5 KiB) per
// preflight, from 32 concurrent callers through the group-commit writer.
func BenchmarkDecisionAppendParallel(b *testing.B) {
	db := openTest(b)
	d := db.Decisions()
	record := decisionJSON("rec_x", "u_01:send money:bank/transfer", "verdict_issued", "jti_x", t0)
	record = append(record[:len(record)-1], fmt.Appendf(nil, `,"pad":%q}`, strings.Repeat("x", 1200))...)
	var seq atomic.Int64
	before := db.Stats()
	var (
		mu  sync.Mutex
		all []time.Duration
	)
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		var lat []time.Duration
		for pb.Next() {
			now := time.Now()
			i := seq.Add(1)
			meta := DecisionMeta{
				RecordID: NewRecordID("rec_", now), ActionKey: fmt.Sprintf("u_%d:send money:bank/transfer", i%1000),
				Outcome: "verdict_issued", VerdictID: fmt.Sprintf("jti_%d", i), Time: now,
			}
			if err := d.Append(ctx, meta, record); err != nil {
				b.Error(err)
				return
			}
			lat = append(lat, time.Since(now))
		}
		mu.Lock()
		all = append(all, lat...)
		mu.Unlock()
	})
	b.StopTimer()
	after := db.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if c := after.Commits - before.Commits; c > 0 {
		b.ReportMetric(float64(after.Updates-before.Updates)/float64(c), "updates/commit")
	}
	if len(all) > 0 {
		slices.Sort(all)
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
}
