package nonce

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

// newJTI is a jti as verdictd makes it: 128 random bits, base64url.
func newJTI() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

type benchEnv struct {
	db    *store.DB
	n     *Bolt
	execs *store.Executions
	ttl   time.Duration // verdict lifetime: exp = now + ttl
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	db := openDB(b, filepath.Join(b.TempDir(), "executor.db"))
	n, err := NewBolt(db, BoltOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{db: db, n: n, execs: db.Executions(), ttl: time.Minute}
}

// execute is the executor's durable path around one tool call: consume the nonce and write the
// started record in one commit, then (with finish) write the outcome in a second one.
func (e *benchEnv) execute(ctx context.Context, finish bool) error {
	now := time.Now()
	x := &api.ExecutionRecord{
		ExecutorID: "executor-bank", VerdictID: newJTI(), ActionKey: "u_01:send money:bank/transfer",
		RefPhase: "at_trigger", RefRecord: store.NewRecordID("rec_", now), Principal: "u_01",
		Server: "bank", Tool: "transfer", StartedAt: now,
		ArgumentsDigest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Verdict:         "eyJhbGciOiJFZERTQSIsImtpZCI6IngiLCJ0eXAiOiJ2ZXJkaWN0K2p3dCJ9." + strings.Repeat("x", 600) + ".sig",
	}
	err := e.db.Update(ctx, func(tx *bolt.Tx) error {
		if err := e.n.ConsumeTx(tx, x.VerdictID, now.Add(e.ttl)); err != nil {
			return err
		}
		return e.execs.StartTx(tx, x)
	})
	if err != nil || !finish {
		return err
	}
	_, err = e.execs.Finish(ctx, x.RecordID, api.ExecutionExecuted, "", "sha256:00", time.Now())
	return err
}

// runParallel runs op from 32 goroutines (16 per core on the 2-core machine) and reports
// throughput and latency percentiles.
func runParallel(b *testing.B, db *store.DB, op func(context.Context) error) {
	before := db.Stats()
	defer func() {
		after := db.Stats()
		if c := after.Commits - before.Commits; c > 0 {
			b.ReportMetric(float64(after.Updates-before.Updates)/float64(c), "updates/commit")
		}
	}()
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	var (
		mu  sync.Mutex
		all []time.Duration
	)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		var lat []time.Duration
		for pb.Next() {
			t := time.Now()
			if err := op(ctx); err != nil {
				b.Error(err)
				return
			}
			lat = append(lat, time.Since(t))
		}
		mu.Lock()
		all = append(all, lat...)
		mu.Unlock()
	})
	b.StopTimer()
	reportLatency(b, all)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkNonceConsumeParallel: 32 concurrent executions against one file, group commit.
//
//	consume        nonce only
//	consume+start  nonce and started record in one commit (before the tool call)
//	execution      consume+start, then the outcome: two commits, a whole durable execution
func BenchmarkNonceConsumeParallel(b *testing.B) {
	b.Run("consume", func(b *testing.B) {
		e := newBenchEnv(b)
		runParallel(b, e.db, func(ctx context.Context) error { return e.n.Consume(ctx, newJTI(), time.Now().Add(time.Minute)) })
	})
	b.Run("consume+start", func(b *testing.B) {
		e := newBenchEnv(b)
		runParallel(b, e.db, func(ctx context.Context) error { return e.execute(ctx, false) })
	})
	b.Run("execution", func(b *testing.B) {
		e := newBenchEnv(b)
		runParallel(b, e.db, func(ctx context.Context) error { return e.execute(ctx, true) })
	})
}

// BenchmarkUpdateSerial: the same consume+start, one caller, so one commit (fsync) per op.
func BenchmarkUpdateSerial(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t := time.Now()
		if err := e.execute(ctx, false); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkNonceWith1MEntries: consume+start from 32 goroutines with a million live nonces
// already stored (a ten-minute TTL at ≈1,700 verdicts/s).
func BenchmarkNonceWith1MEntries(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	const entries, perCommit = 1_000_000, 100_000
	now := time.Now()
	for i := 0; i < entries; i += perCommit {
		err := e.db.Update(ctx, func(tx *bolt.Tx) error {
			for j := i; j < i+perCommit; j++ {
				// Expiries spread over the next ten minutes, as a steady load leaves them.
				exp := now.Add(time.Duration(j) * (10 * time.Minute) / entries)
				if err := e.n.ConsumeTx(tx, newJTI(), exp); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if n, err := e.n.Len(ctx); err != nil || n != entries {
		b.Fatalf("Len %d, %v", n, err)
	}
	// A fresh verdict's exp is now + TTL, after every stored one.
	e.ttl = 11 * time.Minute
	b.Run("consume+start", func(b *testing.B) {
		runParallel(b, e.db, func(ctx context.Context) error { return e.execute(ctx, false) })
	})
	b.Run("len", func(b *testing.B) {
		for range b.N {
			if _, err := e.n.Len(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
