package vault

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	bolt "go.etcd.io/bbolt"
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

// raw reads the stored bytes of (principal, server) from the vault's file.
func raw(t testing.TB, v *Vault, principal, server string) []byte {
	t.Helper()
	var b []byte
	err := v.db.View(context.Background(), func(tx *bolt.Tx) error {
		b = append([]byte(nil), tx.Bucket([]byte(bucketGrants)).Get(pairKey(principal, server))...)
		return nil
	})
	if err != nil || b == nil {
		t.Fatalf("raw %q %q: %v (%d bytes)", principal, server, err, len(b))
	}
	return b
}

// setRaw writes value as the stored bytes of (principal, server), as someone with write
// access to the file could.
func setRaw(t testing.TB, v *Vault, principal, server string, value []byte) {
	t.Helper()
	err := v.db.Update(context.Background(), func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketGrants)).Put(pairKey(principal, server), value)
	})
	if err != nil {
		t.Fatal(err)
	}
}
