package store

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"syscall"
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
	cpu0 := processCPU(b)
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
	reportFloorLatency(b, lat, processCPU(b)-cpu0)
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
	cpu0 := processCPU(b)
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
	reportFloorLatency(b, lat, processCPU(b)-cpu0)
}

// reportFloorLatency reports the rate, the latency percentiles and the process's CPU time per
// operation (user and system: on a virtual machine's disk a sync costs CPU time of its own,
// which a daemon pays once per commit, twice for bbolt's data and meta syncs).
func reportFloorLatency(b *testing.B, lat []time.Duration, cpu time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
