package main

import (
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/bench/internal/loadgen"
)

// What the floors measure between two turns: enough to average over the run, little enough
// that the pause between turns stays short next to a turn.
const (
	floorCommits = 32
	floorSigs    = 256
	floorValue   = 1 << 10 // bytes a commit puts, about a decision or execution record
	floorMessage = 600     // bytes signed, about a verdict's or a receipt's signing input
)

// floorMeter measures, in this process, the work a gated call cannot do without: durable bbolt
// commits and ed25519 signatures. It runs between turns, while the hosts are idle, on the same
// machine and disk as the stacks, so that the daemons' CPU per gated call can be set against
// it within one run.
type floorMeter struct {
	db     *bolt.DB
	bucket []byte
	key    uint64
	value  []byte
	priv   ed25519.PrivateKey
	pub    ed25519.PublicKey
	msg    []byte
	tally  floorTally
}

// openFloor opens a bbolt file in dir as store.Open opens the daemons' (see store/db.go),
// with one bucket, and makes a signing key.
func openFloor(dir string) (*floorMeter, error) {
	db, err := bolt.Open(filepath.Join(dir, "floor.db"), 0o600, &bolt.Options{
		Timeout:        time.Second,
		FreelistType:   bolt.FreelistMapType,
		NoFreelistSync: true,
	})
	if err != nil {
		return nil, fmt.Errorf("floor: open bbolt: %w", err)
	}
	f := &floorMeter{db: db, bucket: []byte("floor"), value: make([]byte, floorValue), msg: make([]byte, floorMessage)}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(f.bucket); return err }); err != nil {
		db.Close()
		return nil, fmt.Errorf("floor: create bucket: %w", err)
	}
	for i := range f.value {
		f.value[i] = byte(i)
	}
	for i := range f.msg {
		f.msg[i] = byte('a' + i%26)
	}
	if f.pub, f.priv, err = ed25519.GenerateKey(nil); err != nil {
		db.Close()
		return nil, fmt.Errorf("floor: key: %w", err)
	}
	return f, nil
}

// measure makes commits durable commits, each one Update putting one value under a fresh key,
// then sigs signatures and sigs verifications, and adds their CPU and wall time to the tally.
// The goroutine keeps its thread, whose own CPU time is read, so that nothing else this process
// does is counted; the kernel's work for an fsync that runs on other threads is not counted,
// as it is not in the daemons' /proc time either.
func (f *floorMeter) measure(commits, sigs int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var key [8]byte
	cpu0 := loadgen.ThreadCPU()
	for range commits {
		f.key++
		binary.BigEndian.PutUint64(key[:], f.key)
		t0 := time.Now()
		err := f.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(f.bucket).Put(key[:], f.value) })
		f.tally.commitWall += time.Since(t0)
		if err != nil {
			return fmt.Errorf("floor: commit: %w", err)
		}
	}
	cpu1 := loadgen.ThreadCPU()
	var sig []byte
	for range sigs {
		sig = ed25519.Sign(f.priv, f.msg)
	}
	cpu2 := loadgen.ThreadCPU()
	for range sigs {
		if !ed25519.Verify(f.pub, f.msg, sig) {
			return errors.New("floor: a signature did not verify")
		}
	}
	cpu3 := loadgen.ThreadCPU()
	f.tally.commits += commits
	f.tally.commitCPU += cpu1 - cpu0
	f.tally.sigs += sigs
	f.tally.signCPU += cpu2 - cpu1
	f.tally.verifyCPU += cpu3 - cpu2
	return nil
}

// floorTally is what the floors measured over the run.
type floorTally struct {
	commits               int
	commitCPU, commitWall time.Duration
	sigs                  int // signatures made, and as many verified
	signCPU, verifyCPU    time.Duration
}

// perCommit, perSign and perVerify are the tally's means per operation.
func (t floorTally) perCommit() (cpu, wall time.Duration) {
	return perOp(t.commitCPU, t.commits), perOp(t.commitWall, t.commits)
}

func (t floorTally) perSign() time.Duration   { return perOp(t.signCPU, t.sigs) }
func (t floorTally) perVerify() time.Duration { return perOp(t.verifyCPU, t.sigs) }

func perOp(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
}

// gated is the CPU a gated call cannot go under across the three daemons: three durable
// commits (verdictd's decision record, the executor's start and its finish), two signatures
// (the verdict by verdictd, the receipt by the executor) and each verified once.
func (t floorTally) gated() time.Duration {
	commit, _ := t.perCommit()
	return 3*commit + 2*t.perSign() + 2*t.perVerify()
}
