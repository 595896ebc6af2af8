package store

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The floors under every durable write of this package, measured on the same disk as its own
// benchmarks: what one bbolt commit costs when each write waits for its own fsync, and what
// the disk's sync itself costs. A group commit beats the first by sharing one commit among
// many writers; nothing beats the second.

// BenchmarkFloorBoltUpdate is one bbolt Update (a 256-byte put) with the default fsync, one
// caller, straight on bbolt: the cost of a per-request commit, and so the throughput cap
// (ops/s) of a daemon that commits each request on its own.
func BenchmarkFloorBoltUpdate(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "floor.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	bucket := []byte("floor")
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 256)
	var key [8]byte
	var i uint64
	lat := make([]time.Duration, 0, 1024)
	for b.Loop() {
		t := time.Now()
		i++
		binary.BigEndian.PutUint64(key[:], i)
		err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key[:], value) })
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	reportFloorLatency(b, lat)
}

// BenchmarkFloorFsync is a 4 KiB write followed by fsync of the file: the disk's own sync cost,
// under any commit.
func BenchmarkFloorFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "sync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	lat := make([]time.Duration, 0, 1024)
	for b.Loop() {
		t := time.Now()
		if _, err := f.WriteAt(page, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	reportFloorLatency(b, lat)
}

func reportFloorLatency(b *testing.B, lat []time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
