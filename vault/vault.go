// Package vault keeps the OAuth grants the executor holds for its principals: for each
// (principal, upstream server) one grant, its access and refresh tokens encrypted at rest with
// age (filippo.io/age) in a bucket of a bbolt file, the executor's own.
//
// # Storage
//
// Bucket vault_grants: key = principal ‖ 0x00 ‖ server, value = the age encryption, to the
// current key's recipient, of the grant's JSON record. The record repeats the principal and
// server of its key, so a record moved or swapped to another key in the file is refused
// (ErrForeign) rather than handed to the wrong principal; a value that does not decrypt,
// authenticate or decode is refused as ErrTampered. Neither ever comes back as a grant. The
// principals and servers are the keys, and so are readable in the file; the tokens, subjects,
// scopes and times are not.
//
// age encryption is to a public key, and carries no signature: whoever has the recipient
// (age1…) could write a record this vault reads as its own. The vault therefore never prints
// the recipient, and the key file that holds it (age-keygen's "public key" comment) is as
// secret as the identity.
//
// # Keys and rotation
//
// Open takes the current key first and then older keys that still decrypt. Records are
// written to the current key only; reading tries every key. To rotate: load the new key first
// and the old one after it, call Rekey until it reports every record re-encrypted, then open
// with the new key alone. docs/credentials.md has the steps.
package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"filippo.io/age"
	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

// Errors callers branch on with errors.Is. Every error of this package that means one of
// these wraps it.
var (
	// ErrNoGrant: no grant is stored for that principal and server.
	ErrNoGrant = errors.New("vault: no grant")
	// ErrTampered: the stored record does not decrypt under any of the vault's keys, does not
	// authenticate (bytes changed, truncated, extended) or does not decode. It is never used;
	// Revoke removes it.
	ErrTampered = errors.New("vault: stored grant does not decrypt or decode")
	// ErrForeign: the stored record is sound but is the grant of another principal or
	// server: it was moved or copied within the file. It is never used; Revoke removes it.
	ErrForeign = errors.New("vault: stored grant belongs to another principal or server")
	// ErrTooMany: the principal holds Options.MaxPerPrincipal grants already.
	ErrTooMany = errors.New("vault: too many grants for the principal")
	// ErrInvalid: an argument or a grant breaks the vault's rules; the message says which.
	ErrInvalid = errors.New("vault: invalid")
	// ErrClosed: the vault is closed.
	ErrClosed = errors.New("vault: closed")
)

// bucketGrants is the bucket of the grants (a constant: a package-level slice could be changed
// by anyone holding it).
const bucketGrants = "vault_grants"

// keySep separates the principal from the server in a bbolt key. Neither may hold it
// (checkName refuses control characters), so one key names one pair, and principal ‖ keySep
// is the exact prefix of that principal's keys.
const keySep = 0x00

// DefaultMaxPerPrincipal is Options.MaxPerPrincipal's default.
const DefaultMaxPerPrincipal = 32

// Options configure a Vault. The zero value is usable.
type Options struct {
	// MaxPerPrincipal bounds how many grants one principal holds (one per server), so a
	// principal cannot grow the file without end. Zero means DefaultMaxPerPrincipal.
	MaxPerPrincipal int
	// Now is the clock that stamps Created and Updated; nil means time.Now.
	Now func() time.Time
}

// rekeyBatch bounds the records one Rekey round reads and rewrites, so a rotation over many
// grants never holds a read transaction or the writer long.
const rekeyBatch = 256

// maxReported bounds the unreadable records Rekey's error lists one by one; it counts them all.
const maxReported = 16

// A Vault is the grants of a bbolt file. It is safe for concurrent use.
type Vault struct {
	db         *store.DB
	own        bool // Open made db: Close closes it
	recipient  age.Recipient
	current    []age.Identity // the current key alone: what Rekey leaves alone
	identities []age.Identity // every key, current first: what reading tries
	max        int
	now        func() time.Time
	closed     atomic.Bool
}

// Open opens (creating if needed) the bbolt file at path as a store.DB of its own, with the
// store's conventions (mode 0600, a lock a second process waits for in vain, group commit),
// and its grants with keys: keys[0] encrypts every record written, and every key decrypts.
// Close closes the file.
func Open(path string, keys []*Key, opts Options) (*Vault, error) {
	if err := checkKeys(keys); err != nil {
		return nil, err
	}
	db, err := store.Open(path, store.Options{})
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	v, err := New(db, keys, opts)
	if err != nil {
		db.Close(context.Background())
		return nil, err
	}
	v.own = true
	return v, nil
}

// New keeps grants in db, a file opened by its owner (the executor's store.DB, beside its
// records and nonces). The Vault does not own db: Close leaves it open.
func New(db *store.DB, keys []*Key, opts Options) (*Vault, error) {
	if err := checkKeys(keys); err != nil {
		return nil, err
	}
	v := &Vault{db: db, recipient: keys[0].recipient, current: []age.Identity{keys[0].identity},
		max: opts.MaxPerPrincipal, now: opts.Now}
	for _, k := range keys {
		v.identities = append(v.identities, k.identity)
	}
	if v.max <= 0 {
		v.max = DefaultMaxPerPrincipal
	}
	if v.now == nil {
		v.now = time.Now
	}
	// Bucket creation is a local file write that returns at the next commit; it has no caller
	// deadline to honour.
	err := db.Update(context.Background(), func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte(bucketGrants))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("vault: prepare bucket: %w", err)
	}
	return v, nil
}

func checkKeys(keys []*Key) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: no key: the vault needs its current key (and may take older ones after it)", ErrInvalid)
	}
	for i, k := range keys {
		if k == nil || k.identity == nil {
			return fmt.Errorf("%w: keys[%d] is not a loaded key (use LoadKey)", ErrInvalid, i)
		}
	}
	return nil
}

// Close closes the vault, and the file when Open opened it. Calls after Close fail with
// ErrClosed.
func (v *Vault) Close() error {
	if v.closed.Swap(true) {
		return ErrClosed
	}
	if v.own {
		// Only this vault's own calls can be queued, and each already waits for its commit.
		return v.db.Close(context.Background())
	}
	return nil
}

func (v *Vault) usable() error {
	if v.closed.Load() {
		return ErrClosed
	}
	return nil
}

// pairKey is the bbolt key of (principal, server); both have passed checkName.
func pairKey(principal, server string) []byte {
	k := make([]byte, 0, len(principal)+1+len(server))
	k = append(k, principal...)
	k = append(k, keySep)
	return append(k, server...)
}

func principalPrefix(principal string) []byte {
	return append([]byte(principal), keySep)
}

func checkPair(principal, server string) error {
	if err := checkName("principal", principal, maxPrincipal); err != nil {
		return err
	}
	return checkName("server", server, maxServer)
}

// Put stores g as the grant of g.Principal at g.Server, in place of any grant stored there.
// An empty g.ID gets a fresh random id, a zero g.Created the time of this call; Updated is
// always the time of this call. Times are stored in UTC. The grant is checked first (see the
// ErrInvalid messages); a principal that holds MaxPerPrincipal grants already can replace one
// but not add another (ErrTooMany).
//
// The record is encrypted before the transaction, to the current key, so Put costs one age
// encryption (an X25519 operation) and one commit.
func (v *Vault) Put(ctx context.Context, g Grant) error {
	if err := v.usable(); err != nil {
		return err
	}
	now := v.now().UTC()
	if g.ID == "" {
		g.ID = newID()
	}
	if g.Created.IsZero() {
		g.Created = now
	}
	g.Updated = now
	g.Created, g.Expiry = g.Created.UTC(), g.Expiry.UTC()
	if len(g.Scopes) == 0 {
		g.Scopes = nil
	}
	if err := g.check(); err != nil {
		return err
	}
	value, err := seal(g, v.recipient)
	if err != nil {
		return err
	}
	key := pairKey(g.Principal, g.Server)
	return v.db.Update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketGrants))
		if b.Get(key) == nil {
			if n := count(b, principalPrefix(g.Principal), v.max); n >= v.max {
				return fmt.Errorf("%w: %q holds %d grants, the most allowed (revoke one first)", ErrTooMany, g.Principal, n)
			}
		}
		return b.Put(key, value)
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

// Get returns the grant of principal at server: ErrNoGrant when there is none, ErrTampered or
// ErrForeign when the stored record cannot be trusted as that grant. It costs one read
// transaction and one age decryption, outside the transaction.
func (v *Vault) Get(ctx context.Context, principal, server string) (Grant, error) {
	if err := v.usable(); err != nil {
		return Grant{}, err
	}
	if err := checkPair(principal, server); err != nil {
		return Grant{}, err
	}
	var value []byte
	err := v.db.View(ctx, func(tx *bolt.Tx) error {
		value = bytes.Clone(tx.Bucket([]byte(bucketGrants)).Get(pairKey(principal, server)))
		return nil
	})
	if err != nil {
		return Grant{}, fmt.Errorf("vault: read: %w", err)
	}
	if value == nil {
		return Grant{}, fmt.Errorf("%w for %q at %q", ErrNoGrant, principal, server)
	}
	return openRecord(v.identities, principal, server, value)
}

// Revoke removes the grant of principal at server, whatever the stored record holds (a
// tampered or foreign record is removed the same way): ErrNoGrant when there is none. It
// forgets the tokens here only; revoking them at the upstream is the caller's.
func (v *Vault) Revoke(ctx context.Context, principal, server string) error {
	if err := v.usable(); err != nil {
		return err
	}
	if err := checkPair(principal, server); err != nil {
		return err
	}
	key := pairKey(principal, server)
	return v.db.Update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketGrants))
		if b.Get(key) == nil {
			return fmt.Errorf("%w for %q at %q", ErrNoGrant, principal, server)
		}
		return b.Delete(key)
	})
}

// List returns what may be shown of principal's grants (no tokens), in the byte order of
// their servers; none is an empty list. Each record is decrypted: one that cannot be trusted
// fails the whole list with its ErrTampered or ErrForeign, naming the server, so that it is
// seen and revoked rather than silently left out.
func (v *Vault) List(ctx context.Context, principal string) ([]api.Grant, error) {
	if err := v.usable(); err != nil {
		return nil, err
	}
	if err := checkName("principal", principal, maxPrincipal); err != nil {
		return nil, err
	}
	prefix := principalPrefix(principal)
	var servers []string
	var values [][]byte
	err := v.db.View(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucketGrants)).Cursor()
		for k, val := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, val = c.Next() {
			servers = append(servers, string(k[len(prefix):]))
			values = append(values, bytes.Clone(val))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vault: read: %w", err)
	}
	infos := make([]api.Grant, 0, len(values))
	for i, val := range values {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g, err := openRecord(v.identities, principal, servers[i], val)
		if err != nil {
			return nil, err
		}
		infos = append(infos, g.Info())
	}
	return infos, nil
}

// Rekey re-encrypts to the current key every record that only an older key decrypts, and
// returns how many it rewrote. The grants themselves are unchanged (Updated included). A
// record that no key reads is left as it is and reported: the error joins each one's
// ErrTampered or ErrForeign, after every other record was re-encrypted. When Rekey returns
// (0, nil) on a vault whose writers all use the current key, the older keys can be dropped.
//
// Rekey reads and rewrites at most a few hundred records per transaction, decrypting and
// encrypting outside them; a record changed by Put or Revoke meanwhile is left to that call.
func (v *Vault) Rekey(ctx context.Context) (int, error) {
	if err := v.usable(); err != nil {
		return 0, err
	}
	var (
		rewritten int
		nbad      int
		bad       []error // the first maxReported of them
		after     []byte  // the last key read; nil before the first round
	)
	for {
		type entry struct{ key, old, new []byte }
		var batch []entry
		err := v.db.View(ctx, func(tx *bolt.Tx) error {
			c := tx.Bucket([]byte(bucketGrants)).Cursor()
			k, val := c.First()
			if after != nil {
				k, val = c.Seek(after)
				if k != nil && bytes.Equal(k, after) {
					k, val = c.Next()
				}
			}
			for ; k != nil && len(batch) < rekeyBatch; k, val = c.Next() {
				batch = append(batch, entry{key: bytes.Clone(k), old: bytes.Clone(val)})
			}
			return nil
		})
		if err != nil {
			return rewritten, fmt.Errorf("vault: rekey: read: %w", err)
		}
		if len(batch) == 0 {
			break
		}
		after = batch[len(batch)-1].key
		todo := batch[:0]
		for _, e := range batch {
			if err := ctx.Err(); err != nil {
				return rewritten, err
			}
			principal, server, ok := bytes.Cut(e.key, []byte{keySep})
			if !ok {
				nbad++
				if len(bad) < maxReported {
					bad = append(bad, fmt.Errorf("%w: key %q has no separator", ErrTampered, e.key))
				}
				continue
			}
			if _, err := openRecord(v.current, string(principal), string(server), e.old); err == nil {
				continue // already the current key's
			}
			g, err := openRecord(v.identities, string(principal), string(server), e.old)
			if err != nil {
				nbad++
				if len(bad) < maxReported {
					bad = append(bad, err)
				}
				continue
			}
			if e.new, err = seal(g, v.recipient); err != nil {
				return rewritten, err
			}
			todo = append(todo, e)
		}
		if len(todo) == 0 {
			continue
		}
		n := 0
		err = v.db.Update(ctx, func(tx *bolt.Tx) error {
			n = 0 // the function may run more than once
			b := tx.Bucket([]byte(bucketGrants))
			for _, e := range todo {
				// Only over the bytes that were read: anything else was written since, by
				// a Put (to the current key) or a Revoke.
				if !bytes.Equal(b.Get(e.key), e.old) {
					continue
				}
				if err := b.Put(e.key, e.new); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return rewritten, fmt.Errorf("vault: rekey: write: %w", err)
		}
		rewritten += n
	}
	if nbad > 0 {
		return rewritten, fmt.Errorf("vault: rekey: %d records no key reads, left as they are (Revoke removes them): %w", nbad, errors.Join(bad...))
	}
	return rewritten, nil
}
