// Package store owns the durable records of verdictd and the executor: one bbolt file per
// process, written through a group-commit writer, holding decision records (verdictd),
// execution records (executor) and whatever other buckets the daemons keep beside them (the
// nonce package keeps its single-use verdict ids in the same file).
//
// # Group commit
//
// A bbolt commit waits for the disk (fdatasync), so a commit per request caps a daemon near the
// disk's sync rate. [DB.Update] instead queues its function. The caller that finds no commit
// under way becomes the writer: it takes everything queued at that moment (its own function
// first; no timer, so an idle system commits at once), runs it in one read-write transaction,
// commits once and reports each caller its own result; then, if more was queued meanwhile, it
// hands the writing to the first caller waiting, which does the same. One caller at a time
// commits on its own goroutine with no hand-off at all; under load a commit costs one hand-off
// for its whole batch.
//
// Functions passed to Update must follow two rules:
//
//   - A function may be run more than once and must not retain slices it got from the
//     transaction. When a function in a batch returns an error (or panics), the writer rolls the
//     whole transaction back and runs the functions that succeeded again in a fresh one, so
//     nothing a failing function wrote is ever committed, whatever it wrote before failing.
//     Outside the transaction a function should only record its result.
//   - A function must not call Update or View itself: the writer would wait for itself.
//
// A failed commit (a disk error) fails every caller of its batch: nothing in it is committed,
// and no caller is told otherwise.
//
// # Reading
//
// [DB.View] runs a read-only transaction. The iterators of this package ([Executions.Since],
// [Decisions.ByActionKey], the JSONL exports) read in chunks and call back outside any
// transaction, so a slow consumer (an HTTP client reading an export) never holds a read
// transaction open and never delays the writer, and no iteration loads every record in memory.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	boltErrors "go.etcd.io/bbolt/errors"

	"github.com/verdictgate/verdict/internal/opfile"
)

// Errors callers branch on. Every error returned by this package that means one of these wraps
// it, so errors.Is works through the added context.
var (
	// ErrNotFound: no record with that id.
	ErrNotFound = errors.New("store: not found")
	// ErrExists: a record with that id (or a unique index value, such as a decision's verdict
	// id) is already stored. Records are append-only.
	ErrExists = errors.New("store: already exists")
	// ErrInvalid: the record handed to the store is incomplete or inconsistent.
	ErrInvalid = errors.New("store: invalid record")
	// ErrNotStarted: Finish was called on a record that is not in the started state.
	ErrNotStarted = errors.New("store: execution is not in the started state")
	// ErrCorrupt: a stored value could not be decoded.
	ErrCorrupt = errors.New("store: corrupt value")
	// ErrClosed: the DB is closed or closing.
	ErrClosed = errors.New("store: closed")
	// ErrReadOnly: Update on a DB opened read-only.
	ErrReadOnly = errors.New("store: opened read-only")
	// ErrLocked: another process (or another DB in this process) holds the file.
	ErrLocked = errors.New("store: database file is locked by another process")
	// ErrFormat: the file was written by an incompatible version of this package.
	ErrFormat = errors.New("store: unsupported file format")
	// ErrApprovalChanged: an approval written as a compare and set (WriteTx) was changed
	// since it was read.
	ErrApprovalChanged = errors.New("store: approval changed since it was read")
)

// formatVersion is written into every file this package creates and checked on open.
const formatVersion = "1"

// Options configure Open. The zero value is usable.
type Options struct {
	// LockTimeout bounds the wait for the file lock, so that a second process opening the same
	// file fails with ErrLocked instead of hanging. Zero means one second.
	LockTimeout time.Duration
	// ReadOnly opens the file with a shared lock and no writer (the audit command reads a
	// file this way). Update then returns ErrReadOnly.
	ReadOnly bool
	// MaxBatch caps how many queued updates one commit takes. Zero means 1024.
	MaxBatch int
	// InitialMmapSize is passed to bbolt: a map large enough for the file's lifetime means a
	// growing file never waits for open read transactions.
	InitialMmapSize int
	// FileMode of a newly created file. Zero means 0600: records can hold account numbers.
	FileMode os.FileMode
	// Outbox makes every record write also append to the record-change log that record
	// shipping reads (see Outbox).
	Outbox bool
}

// DB is a bbolt file with a group-commit writer. It is safe for concurrent use.
type DB struct {
	bolt     *bolt.DB
	readOnly bool
	maxBatch int
	outbox   bool

	mu      sync.Mutex
	closed  bool
	queue   []*request    // waiting for a commit, in their order
	writing bool          // a caller is the writer (queue is empty when not)
	drained chan struct{} // closed once closed and no caller writes any more
	abort   chan struct{} // closed by Close when its context ends: fail what is still queued

	commits, committed atomic.Uint64
}

// Stats are counters of the writer since Open.
type Stats struct {
	Commits uint64 // successful commits
	Updates uint64 // update functions committed; Updates/Commits is the mean batch size
	// Pages is how many pages the file's read-write transactions wrote, each commit's meta page
	// included (bbolt's count): beside the fdatasyncs, what a commit costs grows with it.
	Pages uint64
}

// Stats returns the writer's counters.
func (db *DB) Stats() Stats {
	bs := db.bolt.Stats()
	return Stats{Commits: db.commits.Load(), Updates: db.committed.Load(), Pages: uint64(bs.TxStats.GetWrite())}
}

type request struct {
	ctx  context.Context
	fn   func(*bolt.Tx) error
	done chan error // buffered: the writer never blocks on a caller that left
	// lead tells the caller that it writes next. Buffered: the writer hands over without
	// waiting.
	lead chan struct{}
}

// Open opens (creating if needed) the bbolt file at path.
func Open(path string, opts Options) (*DB, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = time.Second
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 1024
	}
	if opts.FileMode == 0 {
		opts.FileMode = 0o600
	}
	bdb, err := bolt.Open(path, opts.FileMode, &bolt.Options{
		Timeout:         opts.LockTimeout,
		ReadOnly:        opts.ReadOnly,
		InitialMmapSize: opts.InitialMmapSize,
		// As etcd runs bbolt: the hashmap freelist stays fast when garbage collection of
		// nonces frees many pages, and not writing the freelist keeps each commit small; the
		// cost is a freelist rebuild when the file is opened.
		FreelistType:   bolt.FreelistMapType,
		NoFreelistSync: true,
	})
	if errors.Is(err, boltErrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (waited %s)", ErrLocked, path, opts.LockTimeout)
	}
	if err != nil {
		if e := opfile.Explain(err); e != err {
			return nil, fmt.Errorf("store: %w", e)
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db := &DB{bolt: bdb, readOnly: opts.ReadOnly, maxBatch: opts.MaxBatch, outbox: opts.Outbox}
	if err := db.checkFormat(); err != nil {
		bdb.Close()
		return nil, err
	}
	if opts.ReadOnly {
		return db, nil
	}
	db.abort = make(chan struct{})
	db.drained = make(chan struct{})
	return db, nil
}

// checkFormat stamps a new file with the format version and refuses a file with another one.
// It also creates the buckets this package owns, so readers can rely on them.
func (db *DB) checkFormat() error {
	if db.readOnly {
		return db.bolt.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket(bucketMeta); b != nil {
				if v := b.Get(keyFormat); v != nil && string(v) != formatVersion {
					return fmt.Errorf("%w: %q", ErrFormat, v)
				}
			}
			return nil
		})
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return fmt.Errorf("store: create bucket: %w", err)
		}
		switch v := meta.Get(keyFormat); {
		case v == nil:
			if err := meta.Put(keyFormat, []byte(formatVersion)); err != nil {
				return fmt.Errorf("store: write format: %w", err)
			}
		case string(v) != formatVersion:
			return fmt.Errorf("%w: %q", ErrFormat, v)
		}
		for _, name := range ownedBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("store: create bucket %s: %w", name, err)
			}
		}
		return nil
	})
}

// Path is the file's path.
func (db *DB) Path() string { return db.bolt.Path() }

// FileID returns the file's own random id, written by its first call and never changed: what
// names the process that writes this file's records in a store shared with other processes
// (the executor's nonce store), where a daemon id is shared by replicas and a path or a host
// name can be reused.
func (db *DB) FileID(ctx context.Context) (string, error) {
	var id string
	err := db.View(ctx, func(tx *bolt.Tx) error {
		id = string(tx.Bucket(bucketMeta).Get(keyInstance))
		return nil
	})
	if err != nil || id != "" {
		return id, err
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("store: file id: %w", err)
	}
	fresh := "f_" + hex.EncodeToString(b[:])
	err = db.Update(ctx, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyInstance); v != nil {
			id = string(v) // another caller wrote it first
			return nil
		}
		id = fresh
		return meta.Put(keyInstance, []byte(fresh))
	})
	if err != nil {
		return "", fmt.Errorf("store: write file id: %w", err)
	}
	return id, nil
}

// Update queues fn to run in a read-write transaction shared with whatever else is queued,
// and returns fn's own error, or the commit's error if the commit fails. See the package
// documentation for the rules fn must follow.
//
// If ctx ends before a writer takes fn up, fn never runs and Update returns ctx.Err(). Once
// fn's batch has started, Update waits for the commit (one fsync) whatever ctx does, so its
// answer is never ambiguous: nil means committed, an error means not committed.
func (db *DB) Update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if db.readOnly {
		return ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &request{ctx: ctx, fn: fn, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	db.queue = append(db.queue, r)
	lead := !db.writing
	db.writing = true
	db.mu.Unlock()
	if !lead {
		select {
		case err := <-r.done:
			return err
		case <-r.lead:
		}
	}
	db.write()
	return <-r.done
}

// View runs fn in a read-only transaction. fn must not retain slices it got from tx.
func (db *DB) View(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := db.bolt.View(fn)
	if errors.Is(err, boltErrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// Close stops accepting updates, commits everything already queued and closes the file. If
// ctx ends first, what is still queued fails with ErrClosed, the commit under way finishes,
// the file is closed and Close returns ctx.Err().
func (db *DB) Close(ctx context.Context) error {
	if db.readOnly {
		return db.closeFile()
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	db.closed = true
	if !db.writing {
		close(db.drained)
	}
	db.mu.Unlock()

	var ctxErr error
	select {
	case <-db.drained:
	case <-ctx.Done():
		ctxErr = ctx.Err()
		close(db.abort)
		<-db.drained
	}
	if err := db.closeFile(); err != nil {
		return err
	}
	if ctxErr != nil {
		return fmt.Errorf("store: close: queued updates abandoned: %w", ctxErr)
	}
	return nil
}

func (db *DB) closeFile() error {
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", db.bolt.Path(), err)
	}
	return nil
}

// write is the writer's turn, taken by the caller at the head of the queue: it commits what is
// queued (at most maxBatch, the caller's own first), then hands the writing to the next caller
// waiting, or, with nobody waiting, ends the writing. After Close gave up on the queue, the
// writer fails everything queued with ErrClosed instead.
func (db *DB) write() {
	db.mu.Lock()
	n := min(len(db.queue), db.maxBatch)
	batch := db.queue[:n:n]
	db.queue = db.queue[n:]
	db.mu.Unlock()
	select {
	case <-db.abort:
		for _, r := range batch {
			r.done <- ErrClosed
		}
	default:
		db.commitOrCrash(batch)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if len(db.queue) > 0 {
		db.queue[0].lead <- struct{}{}
		return
	}
	db.queue = nil
	db.writing = false
	if db.closed {
		close(db.drained)
	}
}

// commitOrCrash commits batch. The functions' own panics are their callers' errors (call); a
// panic of bbolt itself (its Begin or Commit, on a corrupt file) may leave the file's writer
// lock held, so that nothing could ever commit again, and the writer is a caller's goroutine,
// whose panic an HTTP server would recover: the panic is raised again on a goroutine of its
// own, which stops the process, as when the writer was a goroutine of the store's.
func (db *DB) commitOrCrash(batch []*request) {
	defer func() {
		if p := recover(); p != nil {
			stack := debug.Stack()
			go panic(fmt.Sprintf("store: commit of %s panicked: %v\n%s", db.bolt.Path(), p, stack))
			select {} // until the panic above stops the process
		}
	}()
	db.commit(batch, make([]error, len(batch)))
}

// commit runs batch in one transaction. A function that fails is answered and dropped, and
// the survivors run again in a fresh transaction, so a failing function's writes are never
// committed. Each round drops at least one function, so this ends; in practice a batch takes
// at most two rounds.
func (db *DB) commit(batch []*request, errs []error) {
	live := batch[:0]
	for _, r := range batch {
		// A caller that gave up before its turn is answered without running fn, so "not run"
		// is certain for it.
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			continue
		}
		live = append(live, r)
	}
	for len(live) > 0 {
		tx, err := db.bolt.Begin(true)
		if err != nil {
			err = fmt.Errorf("store: begin: %w", err)
			for _, r := range live {
				r.done <- err
			}
			return
		}
		failed := false
		for i, r := range live {
			errs[i] = call(r.fn, tx)
			failed = failed || errs[i] != nil
		}
		if !failed {
			if err := tx.Commit(); err != nil {
				err = fmt.Errorf("store: commit: %w", err)
				for _, r := range live {
					r.done <- err
				}
				return
			}
			db.commits.Add(1)
			db.committed.Add(uint64(len(live)))
			for _, r := range live {
				r.done <- nil
			}
			return
		}
		_ = tx.Rollback() // nothing to report: the transaction is discarded either way
		next := live[:0]
		for i, r := range live {
			if errs[i] != nil {
				r.done <- errs[i]
				continue
			}
			next = append(next, r)
		}
		live = next
	}
}

// call runs fn, turning a panic into an error for its caller alone.
func call(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: update function panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(tx)
}
