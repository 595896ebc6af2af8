package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkExecutionVerdictIndex measures the executor's two commits per execution (Start,
// then FinishStarted) from 32 callers on a file that already holds `stored` executions, for
// two forms of verdict id: 128 random bits, and a millisecond time prefix before the same
// random bits. The verdict index is keyed by verdict id, so random ids put every insert on a
// random page of a tree that only grows; time-prefixed ids keep the inserts of one commit on
// the same few pages.
func BenchmarkExecutionVerdictIndex(b *testing.B) {
	for _, stored := range []int{0, 200_000} {
		for _, form := range []string{"random", "time-prefixed"} {
			b.Run(fmt.Sprintf("stored=%d/%s", stored, form), func(b *testing.B) {
				benchVerdictIndex(b, stored, form == "time-prefixed")
			})
		}
	}
}

func benchJTI(now time.Time, timePrefixed bool) string {
	var raw [22]byte
	if !timePrefixed {
		rand.Read(raw[:16])
		return base64.RawURLEncoding.EncodeToString(raw[:16])
	}
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(now.UnixMilli()))
	copy(raw[:6], ms[2:])
	rand.Read(raw[6:])
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

func benchVerdictIndex(b *testing.B, stored int, timePrefixed bool) {
	db := openTest(b)
	ex := db.Executions()
	token := strings.Repeat("x", 900) // a compact verdict is about this long
	ctx := context.Background()
	start := time.Now().Add(-time.Hour)
	for i := 0; i < stored; {
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			for j := 0; j < 2000 && i < stored; j, i = j+1, i+1 {
				at := start.Add(time.Duration(i) * time.Millisecond / 10)
				x := newExecution(benchJTI(at, timePrefixed), at)
				x.Verdict = token
				if err := ex.StartTx(tx, x); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	before, sizeBefore := db.bolt.Stats(), benchDBSize(b, db)
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := time.Now()
			x := newExecution(benchJTI(now, timePrefixed), now)
			x.Verdict = token
			if err := ex.Start(ctx, x); err != nil {
				b.Error(err)
				return
			}
			if _, err := ex.FinishStarted(ctx, x, api.ExecutionExecuted, "", "sha256:cd", now); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	after, sizeAfter := db.bolt.Stats(), benchDBSize(b, db)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "executions/s")
	// Pages written and page bytes allocated per execution do not depend on the machine's
	// noise, unlike the rate.
	b.ReportMetric(float64(after.TxStats.GetWrite()-before.TxStats.GetWrite())/float64(b.N), "page-writes/op")
	b.ReportMetric(float64(after.TxStats.GetPageAlloc()-before.TxStats.GetPageAlloc())/float64(b.N), "page-bytes/op")
	b.ReportMetric(float64(sizeAfter-sizeBefore)/float64(b.N), "file-bytes/op")
}

// benchDBSize is the size of the data in db's file (its high-water mark, not its length on
// disk, which bbolt grows in steps).
func benchDBSize(b *testing.B, db *DB) int64 {
	var n int64
	if err := db.bolt.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
		b.Fatal(err)
	}
	return n
}
