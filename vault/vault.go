// Package vault keeps the OAuth grants the executor holds for its principals: for each
// (principal, upstream server) one grant, its access and refresh tokens encrypted at rest with
// age (filippo.io/age), in a bucket of the executor's own bbolt file (New, Open) or in an etcd
// cluster that the replicas of one executor share (NewEtcd).
//
// # Storage
//
// Each grant is one record: the age encryption, to the current key's recipient, of the grant's
// JSON. The backend sees these bytes only: a record is sealed before it leaves the vault and
// opened after it comes back, so neither the file nor etcd ever holds a token in clear.
//
//   - bbolt, bucket vault_grants: key = principal ‖ 0x00 ‖ server.
//   - etcd: key = Prefix ‖ "vault/" ‖ escape(principal) ‖ "/" ‖ escape(server), escape being
//     url.PathEscape, which leaves no '/' in either name.
//
// The record repeats the principal and server of its key, so a record moved or swapped to
// another key is refused (ErrForeign) rather than handed to the wrong principal; a value that
// does not decrypt, authenticate or decode is refused as ErrTampered. Neither ever comes back
// as a grant. The principals and servers are the keys, and so are readable in the file or the
// cluster; the tokens, subjects, scopes and times are not.
//
// age encryption is to a public key, and carries no signature: whoever has the recipient
// (age1…) could write a record this vault reads as its own. The vault therefore never prints
// the recipient, and the key file that holds it (age-keygen's "public key" comment) is as
// secret as the identity.
//
// # Several writers
//
// On etcd several executors read and write the same records. A principal's bound is checked
// in the transaction that adds a grant, on either backend. A refresh is stored with
// PutIfUnchanged, a compare-and-swap on the record's bytes: of two executors that refreshed
// one grant at once, the second learns ErrChanged and takes what the first stored. An etcd
// that gives no definite answer is ErrUnavailable, never a grant.
//
// # Keys and rotation
//
// Open takes the current key first and then older keys that still decrypt. Records are
// written to the current key only; reading tries every key. To rotate: load the new key first
// and the old one after it, call Rekey until it reports every record re-encrypted, then open
// with the new key alone. docs/credentials.md has the steps.
package vault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"filippo.io/age"

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
	// server: it was moved or copied to its key. It is never used; Revoke removes it.
	ErrForeign = errors.New("vault: stored grant belongs to another principal or server")
	// ErrTooMany: the principal holds Options.MaxPerPrincipal grants already.
	ErrTooMany = errors.New("vault: too many grants for the principal")
	// ErrChanged: PutIfUnchanged or RevokeIfUnchanged found another grant stored than the one
	// it was given: another executor (or call) stored one since it was read. Nothing was
	// written; Get returns the one stored.
	ErrChanged = errors.New("vault: the stored grant changed since it was read")
	// ErrUnavailable: the etcd cluster gave no definite answer (unreachable, slower than the
	// request timeout, or refusing). A read returned nothing; a write may or may not have been
	// applied, and Get tells which. The bbolt backend never returns it.
	ErrUnavailable = errors.New("vault: store unavailable")
	// ErrInvalid: an argument or a grant breaks the vault's rules; the message says which.
	ErrInvalid = errors.New("vault: invalid")
	// ErrClosed: the vault is closed.
	ErrClosed = errors.New("vault: closed")
)

// DefaultMaxPerPrincipal is Options.MaxPerPrincipal's default.
const DefaultMaxPerPrincipal = 32

// Options configure a Vault. The zero value is usable.
type Options struct {
	// MaxPerPrincipal bounds how many grants one principal holds (one per server), so a
	// principal cannot grow the store without end. Zero means DefaultMaxPerPrincipal. Every
	// executor sharing an etcd vault should use the same bound: each enforces its own.
	MaxPerPrincipal int
	// Now is the clock that stamps Created and Updated; nil means time.Now.
	Now func() time.Time
}

// rekeyBatch bounds the records one Rekey round reads and rewrites, so a rotation over many
// grants never holds a read transaction or the writer long.
const rekeyBatch = 256

// maxReported bounds the unreadable records Rekey's error lists one by one; it counts them all.
const maxReported = 16

// A Vault is the grants of a bbolt file or of an etcd cluster. It is safe for concurrent use,
// and on etcd by several executors at once.
type Vault struct {
	recs       backend
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
	recs, err := newBolt(db, true)
	if err != nil {
		db.Close(context.Background())
		return nil, err
	}
	return newVault(recs, keys, opts), nil
}

// New keeps grants in db, a file opened by its owner (the executor's store.DB, beside its
// records and nonces). The Vault does not own db: Close leaves it open.
func New(db *store.DB, keys []*Key, opts Options) (*Vault, error) {
	if err := checkKeys(keys); err != nil {
		return nil, err
	}
	recs, err := newBolt(db, false)
	if err != nil {
		return nil, err
	}
	return newVault(recs, keys, opts), nil
}

// newVault is the vault of recs with keys, which passed checkKeys.
func newVault(recs backend, keys []*Key, opts Options) *Vault {
	v := &Vault{recs: recs, recipient: keys[0].recipient, current: []age.Identity{keys[0].identity},
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
	return v
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

// Close closes the vault: the file when Open opened it, the etcd connection of NewEtcd. Calls
// after Close fail with ErrClosed.
func (v *Vault) Close() error {
	if v.closed.Swap(true) {
		return ErrClosed
	}
	return v.recs.close()
}

func (v *Vault) usable() error {
	if v.closed.Load() {
		return ErrClosed
	}
	return nil
}

func checkPair(principal, server string) error {
	if err := checkName("principal", principal, maxPrincipal); err != nil {
		return err
	}
	return checkName("server", server, maxServer)
}

// prepare fills in what Put fills in (id, times) and checks g.
func (v *Vault) prepare(g *Grant) error {
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
	return g.check()
}

// Put stores g as the grant of g.Principal at g.Server, in place of any grant stored there.
// An empty g.ID gets a fresh random id, a zero g.Created the time of this call; Updated is
// always the time of this call. Times are stored in UTC. The grant is checked first (see the
// ErrInvalid messages); a principal that holds MaxPerPrincipal grants already can replace one
// but not add another (ErrTooMany), which the transaction that adds it checks.
//
// The record is encrypted before the transaction, to the current key, so Put costs one age
// encryption (an X25519 operation) and one commit: on etcd one transaction to replace a
// grant, two to add one.
func (v *Vault) Put(ctx context.Context, g Grant) error {
	if err := v.usable(); err != nil {
		return err
	}
	if err := v.prepare(&g); err != nil {
		return err
	}
	value, err := seal(g, v.recipient)
	if err != nil {
		return err
	}
	return v.recs.put(ctx, g.Principal, g.Server, value, v.max)
}

// PutIfUnchanged stores next, as Put does, in place of old only if old is still the grant
// stored for its principal and server: how a refresh is stored, so that an executor never
// overwrites what another stored since it read old (the other's own refresh, or a grant the
// user connected anew). next is of old's principal and server. It returns ErrChanged when
// another grant is stored, ErrNoGrant when none is (it was revoked meanwhile, and stays so),
// and ErrTampered or ErrForeign when the stored record does not open.
//
// The stored record is read and opened, compared with old field by field, and swapped for
// next's only if its bytes are still those read: one read, one age decryption and encryption,
// and one commit.
func (v *Vault) PutIfUnchanged(ctx context.Context, old, next Grant) error {
	if err := v.usable(); err != nil {
		return err
	}
	if next.Principal != old.Principal || next.Server != old.Server {
		return fmt.Errorf("%w: the new grant is of %q at %q, the old one of %q at %q", ErrInvalid, next.Principal, next.Server, old.Principal, old.Server)
	}
	if err := v.prepare(&next); err != nil {
		return err
	}
	stored, err := v.stored(ctx, old)
	if err != nil {
		return err
	}
	value, err := seal(next, v.recipient)
	if err != nil {
		return err
	}
	return v.recs.swap(ctx, old.Principal, old.Server, stored, value)
}

// RevokeIfUnchanged removes old only if it is still the grant stored for its principal and
// server: how a grant whose refresh was refused is removed, so that a grant another executor
// stored meanwhile stays. Its errors are PutIfUnchanged's.
func (v *Vault) RevokeIfUnchanged(ctx context.Context, old Grant) error {
	if err := v.usable(); err != nil {
		return err
	}
	stored, err := v.stored(ctx, old)
	if err != nil {
		return err
	}
	return v.recs.swap(ctx, old.Principal, old.Server, stored, nil)
}

// stored returns the bytes of the record stored for old's pair if they open to old.
func (v *Vault) stored(ctx context.Context, old Grant) ([]byte, error) {
	cur, value, err := v.read(ctx, old.Principal, old.Server)
	if err != nil {
		return nil, err
	}
	if !cur.same(old) {
		return nil, fmt.Errorf("%w: grant of %q at %q", ErrChanged, old.Principal, old.Server)
	}
	return value, nil
}

// Get returns the grant of principal at server: ErrNoGrant when there is none, ErrTampered or
// ErrForeign when the stored record cannot be trusted as that grant. It costs one read and one
// age decryption, outside the read.
func (v *Vault) Get(ctx context.Context, principal, server string) (Grant, error) {
	if err := v.usable(); err != nil {
		return Grant{}, err
	}
	g, _, err := v.read(ctx, principal, server)
	return g, err
}

// read returns the grant of principal at server and the bytes of its record (Get's errors).
func (v *Vault) read(ctx context.Context, principal, server string) (Grant, []byte, error) {
	if err := checkPair(principal, server); err != nil {
		return Grant{}, nil, err
	}
	value, err := v.recs.get(ctx, principal, server)
	if err != nil {
		return Grant{}, nil, err
	}
	if value == nil {
		return Grant{}, nil, fmt.Errorf("%w for %q at %q", ErrNoGrant, principal, server)
	}
	g, err := openRecord(v.identities, principal, server, value)
	return g, value, err
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
	return v.recs.remove(ctx, principal, server)
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
	entries, err := v.recs.list(ctx, principal)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.server, b.server) })
	infos := make([]api.Grant, 0, len(entries))
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if e.bad != nil {
			return nil, e.bad
		}
		g, err := openRecord(v.identities, principal, e.server, e.value)
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
// On etcd one executor runs it for all: the records are theirs in common.
//
// Rekey reads and rewrites at most a few hundred records per round (one bbolt transaction each
// way; on etcd one read and a transaction per record), decrypting and encrypting outside them;
// a record changed by Put or Revoke meanwhile is left to that call.
func (v *Vault) Rekey(ctx context.Context) (int, error) {
	if err := v.usable(); err != nil {
		return 0, err
	}
	var (
		rewritten int
		nbad      int
		bad       []error // the first maxReported of them
		after     string  // the cursor of the last record read; "" before the first round
	)
	report := func(err error) {
		nbad++
		if len(bad) < maxReported {
			bad = append(bad, err)
		}
	}
	for {
		batch, err := v.recs.scan(ctx, after, rekeyBatch)
		if err != nil {
			return rewritten, fmt.Errorf("vault: rekey: read: %w", err)
		}
		if len(batch) == 0 {
			break
		}
		after = batch[len(batch)-1].cursor
		var todo []change
		for _, e := range batch {
			if err := ctx.Err(); err != nil {
				return rewritten, err
			}
			if e.bad != nil {
				report(e.bad)
				continue
			}
			if _, err := openRecord(v.current, e.principal, e.server, e.value); err == nil {
				continue // already the current key's
			}
			g, err := openRecord(v.identities, e.principal, e.server, e.value)
			if err != nil {
				report(err)
				continue
			}
			value, err := seal(g, v.recipient)
			if err != nil {
				return rewritten, err
			}
			todo = append(todo, change{principal: e.principal, server: e.server, old: e.value, value: value})
		}
		if len(todo) == 0 {
			continue
		}
		// Only over the bytes that were read: anything else was written since, by a Put (to
		// the current key) or a Revoke.
		n, err := v.recs.rewrite(ctx, todo)
		rewritten += n
		if err != nil {
			return rewritten, fmt.Errorf("vault: rekey: write: %w", err)
		}
	}
	if nbad > 0 {
		return rewritten, fmt.Errorf("vault: rekey: %d records no key reads, left as they are (Revoke removes them): %w", nbad, errors.Join(bad...))
	}
	return rewritten, nil
}
