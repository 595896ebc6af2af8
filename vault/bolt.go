package vault

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/store"
)

// bucketGrants is the bucket of the grants (a constant: a package-level slice could be changed
// by anyone holding it).
const bucketGrants = "vault_grants"

// keySep separates the principal from the server in a bbolt key. Neither may hold it
// (checkName refuses control characters), so one key names one pair, and principal ‖ keySep
// is the exact prefix of that principal's keys.
const keySep = 0x00

// boltBackend keeps the records in bucket vault_grants of a bbolt file, each operation one
// transaction through the store's group commit.
type boltBackend struct {
	db  *store.DB
	own bool // Open made db: close closes it
}

// newBolt prepares the bucket of db.
func newBolt(db *store.DB, own bool) (*boltBackend, error) {
	// Bucket creation is a local file write that returns at the next commit; it has no caller
	// deadline to honour.
	err := db.Update(context.Background(), func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte(bucketGrants))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("vault: prepare bucket: %w", err)
	}
	return &boltBackend{db: db, own: own}, nil
}

// pairKey is the bbolt key of (principal, server).
func pairKey(principal, server string) []byte {
	k := make([]byte, 0, len(principal)+1+len(server))
	k = append(k, principal...)
	k = append(k, keySep)
	return append(k, server...)
}

func principalPrefix(principal string) []byte {
	return append([]byte(principal), keySep)
}

func (b *boltBackend) get(ctx context.Context, principal, server string) ([]byte, error) {
	var value []byte
	err := b.db.View(ctx, func(tx *bolt.Tx) error {
		value = bytes.Clone(tx.Bucket([]byte(bucketGrants)).Get(pairKey(principal, server)))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vault: read: %w", err)
	}
	return value, nil
}

func (b *boltBackend) put(ctx context.Context, principal, server string, value []byte, max int) error {
	key := pairKey(principal, server)
	return b.db.Update(ctx, func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(bucketGrants))
		if bk.Get(key) == nil {
			if n := count(bk, principalPrefix(principal), max); n >= max {
				return fmt.Errorf("%w: %q holds %d grants, the most allowed (revoke one first)", ErrTooMany, principal, n)
			}
		}
		return bk.Put(key, value)
	})
}

// count counts the keys under prefix, stopping at limit.
func count(b *bolt.Bucket, prefix []byte, limit int) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < limit; k, _ = c.Next() {
		n++
	}
	return n
}

func (b *boltBackend) swap(ctx context.Context, principal, server string, old, value []byte) error {
	key := pairKey(principal, server)
	return b.db.Update(ctx, func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(bucketGrants))
		switch cur := bk.Get(key); {
		case cur == nil:
			return fmt.Errorf("%w for %q at %q", ErrNoGrant, principal, server)
		case !bytes.Equal(cur, old):
			return fmt.Errorf("%w: grant of %q at %q", ErrChanged, principal, server)
		case value == nil:
			return bk.Delete(key)
		}
		return bk.Put(key, value)
	})
}

func (b *boltBackend) remove(ctx context.Context, principal, server string) error {
	key := pairKey(principal, server)
	return b.db.Update(ctx, func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(bucketGrants))
		if bk.Get(key) == nil {
			return fmt.Errorf("%w for %q at %q", ErrNoGrant, principal, server)
		}
		return bk.Delete(key)
	})
}

func (b *boltBackend) list(ctx context.Context, principal string) ([]entry, error) {
	prefix := principalPrefix(principal)
	var out []entry
	err := b.db.View(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucketGrants)).Cursor()
		for k, val := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, val = c.Next() {
			out = append(out, entry{principal: principal, server: string(k[len(prefix):]), value: bytes.Clone(val)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vault: read: %w", err)
	}
	return out, nil
}

func (b *boltBackend) scan(ctx context.Context, after string, limit int) ([]entry, error) {
	var out []entry
	err := b.db.View(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucketGrants)).Cursor()
		k, val := c.First()
		if after != "" {
			k, val = c.Seek([]byte(after))
			if k != nil && string(k) == after {
				k, val = c.Next()
			}
		}
		for ; k != nil && len(out) < limit; k, val = c.Next() {
			e := entry{cursor: string(k), value: bytes.Clone(val)}
			principal, server, ok := bytes.Cut(k, []byte{keySep})
			if ok {
				e.principal, e.server = string(principal), string(server)
			} else {
				e.bad = fmt.Errorf("%w: key %q has no separator", ErrTampered, k)
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

func (b *boltBackend) rewrite(ctx context.Context, changes []change) (int, error) {
	n := 0
	err := b.db.Update(ctx, func(tx *bolt.Tx) error {
		n = 0 // the function may run more than once
		bk := tx.Bucket([]byte(bucketGrants))
		for _, c := range changes {
			key := pairKey(c.principal, c.server)
			if !bytes.Equal(bk.Get(key), c.old) {
				continue
			}
			if err := bk.Put(key, c.value); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

func (b *boltBackend) close() error {
	if b.own {
		// Only this vault's own calls can be queued, and each already waits for its commit.
		return b.db.Close(context.Background())
	}
	return nil
}
