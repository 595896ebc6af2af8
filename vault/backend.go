package vault

import "context"

// backend keeps a vault's records: the bucket of a bbolt file (boltBackend) or keys of an etcd
// cluster (etcdBackend). It sees sealed bytes only, and never opens them: the Vault seals a
// record before it hands it over and opens what comes back. Every method is one transaction
// of the backend (or, where it says so, one per record), and a principal and server reaching
// it have passed checkPair.
type backend interface {
	// get returns the record of (principal, server); nil when there is none.
	get(ctx context.Context, principal, server string) ([]byte, error)
	// put stores value as the record of (principal, server), in place of any. Adding one is
	// refused with ErrTooMany when the principal holds max records already, counted in the
	// transaction that adds it: the bound holds however many writers there are.
	put(ctx context.Context, principal, server string, value []byte, max int) error
	// swap replaces the record of (principal, server) by value, or removes it when value is
	// nil, only if its bytes are still old: ErrChanged when they are other bytes, ErrNoGrant
	// when there is none. The compare and the write are one transaction.
	swap(ctx context.Context, principal, server string, old, value []byte) error
	// remove removes the record of (principal, server): ErrNoGrant when there is none.
	remove(ctx context.Context, principal, server string) error
	// list returns principal's records, in no particular order.
	list(ctx context.Context, principal string) ([]entry, error)
	// scan returns up to limit records, in the backend's order, after the one whose cursor is
	// after ("" for the first).
	scan(ctx context.Context, after string, limit int) ([]entry, error)
	// rewrite applies each change whose record still holds its old bytes, leaving the others,
	// and returns how many it applied.
	rewrite(ctx context.Context, changes []change) (int, error)
	// close releases what the backend holds of its own (the file Open opened, the etcd
	// connection).
	close() error
}

// entry is a record as a backend read it.
type entry struct {
	principal, server string
	value             []byte
	// cursor is where a scan resumes after this record.
	cursor string
	// bad, when set, says the key names no (principal, server): an ErrTampered, reported and
	// never opened.
	bad error
}

// change is one record's rewrite: value in place of old.
type change struct {
	principal, server string
	old, value        []byte
}
