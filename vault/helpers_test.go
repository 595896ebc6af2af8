package vault

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"
	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/internal/testing/etcdtest"
)

// Two fixed identities, for the fuzz target's seeds (a record sealed to testKeyA must open
// in every later run) and for tests that need a known key. They protect nothing.
const (
	testKeyA = "AGE-SECRET-KEY-15KE3CR9FRE43KFQWWH5J9GMXQSGN7WM7R7VYSG2EXD0Z0XN2YNAQF33886"
	testKeyB = "AGE-SECRET-KEY-1ZEAZUWAVLRHRN54F9Y24QRYH5QMPZZW5XP59S24UCZWUWWGUX00QMH2FEE"
)

// keyFileText is a key file as age-keygen writes it.
func keyFileText(id *age.X25519Identity) string {
	return fmt.Sprintf("# created: 2026-01-02T03:04:05Z\n# public key: %s\n%s\n", id.Recipient(), id)
}

// writeKey writes a fresh identity to dir/name, mode 0600 as age-keygen does, and loads it
// with LoadKey.
func writeKey(t testing.TB, dir, name string) (*Key, string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(keyFileText(id)), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return k, path
}

// fixedKey is one of the fixed identities as a Key.
func fixedKey(t testing.TB, secret string) *Key {
	t.Helper()
	k, err := parseKey("fixed test key", []byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testClock is a clock tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Unix(1_800_000_000, 123_000_000).UTC()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A testBackend is one kind of records the vault's tests run on, as convstate's and nonce's
// conformance suites do: every test that is not about one kind runs on each.
type testBackend struct {
	name string
	// start readies the kind for t (an etcd of its own) and returns its places.
	start func(t *testing.T) places
}

// places makes fresh places for records and opens vaults over them. Every vault opened over
// one place sees the same records: one executor reopening its file, or the executors sharing
// an etcd prefix.
type places struct {
	// fresh is a new, empty place, and how to remove it.
	fresh func() (place string, remove func(), err error)
	open  func(place string, keys []*Key, opts Options) (*Vault, error)
	// endpoint is the etcd the places are in; "" for bbolt.
	endpoint string
}

func backends() []testBackend {
	return []testBackend{
		{"bbolt", func(t *testing.T) places {
			return places{
				fresh: func() (string, func(), error) {
					dir, err := os.MkdirTemp("", "vault")
					if err != nil {
						return "", nil, err
					}
					return filepath.Join(dir, "executor.db"), func() { os.RemoveAll(dir) }, nil
				},
				open: func(place string, keys []*Key, opts Options) (*Vault, error) { return Open(place, keys, opts) },
			}
		}},
		{"etcd", func(t *testing.T) places {
			endpoint := etcdtest.Start(t)
			var n atomic.Int64
			return places{
				fresh: func() (string, func(), error) { return fmt.Sprintf("/vault-test/%d/", n.Add(1)), func() {}, nil },
				open: func(place string, keys []*Key, opts Options) (*Vault, error) {
					// A request timeout no healthy etcd reaches, however loaded the machine: these
					// tests are of what the vault keeps, and an answer late past the default's 2s
					// would fail them by timing. TestEtcdDown sets its own.
					return NewEtcd(context.Background(), EtcdOptions{Endpoints: []string{endpoint}, Prefix: place, RequestTimeout: time.Minute}, keys, opts)
				},
				endpoint: endpoint,
			}
		}},
	}
}

// opener opens vaults over one place for a test; each is closed when the test ends unless the
// test closed it.
type opener func(keys []*Key, opts Options) *Vault

// eachBackend runs test on every backend, with a fresh place.
func eachBackend(t *testing.T, test func(t *testing.T, open opener)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ps := b.start(t)
			place, remove, err := ps.fresh()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(remove)
			test(t, func(keys []*Key, opts Options) *Vault {
				t.Helper()
				v, err := ps.open(place, keys, opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { v.Close() })
				return v
			})
		})
	}
}

// openVault opens a vault on path, closed when the test ends unless the test closed it.
func openVault(t testing.TB, path string, keys []*Key, opts Options) *Vault {
	t.Helper()
	v, err := Open(path, keys, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// sampleGrant is a complete grant of principal at server, with tokens that name both.
func sampleGrant(principal, server string) Grant {
	return Grant{
		Principal:    principal,
		Server:       server,
		Kind:         KindUserGrant,
		Subject:      "upstream-user-" + principal,
		AccessToken:  "at-" + principal + "-" + server + "-secret",
		RefreshToken: "rt-" + principal + "-" + server + "-secret",
		TokenType:    "Bearer",
		Expiry:       time.Unix(1_800_003_600, 0).UTC(),
		Scopes:       []string{"read", "write:files"},
	}
}

// raw reads the stored bytes of (principal, server) from the vault's backend.
func raw(t testing.TB, v *Vault, principal, server string) []byte {
	t.Helper()
	b, err := v.recs.get(context.Background(), principal, server)
	if err != nil || b == nil {
		t.Fatalf("raw %q %q: %v (%d bytes)", principal, server, err, len(b))
	}
	return b
}

// setRaw writes value as the stored bytes of (principal, server), as someone with write
// access to the file or the cluster could.
func setRaw(t testing.TB, v *Vault, principal, server string, value []byte) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch b := v.recs.(type) {
	case *boltBackend:
		err = b.db.Update(ctx, func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(bucketGrants)).Put(pairKey(principal, server), value)
		})
	case *etcdBackend:
		_, err = b.cli.Put(ctx, b.key(principal, server), string(value))
	default:
		err = fmt.Errorf("no raw write on a %T", b)
	}
	if err != nil {
		t.Fatal(err)
	}
}
