package vault

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/verdictgate/verdict/store"
)

// TestLoadKey: the file age-keygen writes loads; every other file is refused by an error that
// names the file and says what is wrong, without quoting key material.
func TestLoadKey(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	other, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	secret := id.String()
	// One character of the key's data changed: the bech32 checksum no longer holds.
	last := secret[len(secret)-1]
	swapped := secret[:len(secret)-1] + string("QP"[btoi(last == 'Q')])
	pq, err := age.GenerateHybridIdentity()
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name    string
		content *string // nil: no file
		mode    fs.FileMode
		msg     string // in the error; "" means the key loads
	}{
		{"age-keygen's file", ptr(keyFileText(id)), 0o600, ""},
		{"read-only", ptr(keyFileText(id)), 0o400, ""},
		{"the bare identity", ptr(secret), 0o600, ""},
		{"CRLF and blank lines", ptr("# a comment\r\n\r\n" + secret + "\r\n\r\n"), 0o600, ""},
		{"missing", nil, 0, "no such file or directory; make it with \"age-keygen -o "},
		{"empty", ptr(""), 0o600, "no identity"},
		{"comments only", ptr("# created: 2026-01-02T03:04:05Z\n# public key: " + id.Recipient().String() + "\n"), 0o600, "no identity"},
		{"readable by others", ptr(keyFileText(id)), 0o644, "has mode 0644"},
		{"readable by others only", ptr(keyFileText(id)), 0o604, "has mode 0604"},
		{"writable by the group", ptr(keyFileText(id)), 0o620, "has mode 0620"},
		{"not a key", ptr("hello\n"), 0o600, "line 1: not an age identity"},
		{"a recipient instead", ptr("# the public key\n" + id.Recipient().String() + "\n"), 0o600, "line 2: a recipient"},
		{"two identities", ptr(secret + "\n" + other.String() + "\n"), 0o600, "line 2: a second identity (the first is on line 1)"},
		{"a post-quantum identity", ptr(pq.String() + "\n"), 0o600, "line 1: a post-quantum hybrid identity"},
		{"bad checksum", ptr(swapped + "\n"), 0o600, "line 1: malformed secret key"},
		{"a truncated identity", ptr(secret[:40] + "\n"), 0o600, "line 1: malformed secret key"},
		{"lower case", ptr(strings.ToLower(secret) + "\n"), 0o600, "line 1: not an age identity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vault.key")
			if tc.content != nil {
				if err := os.WriteFile(path, []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tc.mode); err != nil { // past the umask
					t.Fatal(err)
				}
			}
			k, err := LoadKey(path)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("LoadKey: %v", err)
				}
				if k.recipient.String() != id.Recipient().String() {
					t.Fatal("loaded another key")
				}
				if s := fmt.Sprintf("%v %+v %#v %s", k, k, k, k); strings.Contains(s, secret) || strings.Contains(s, id.Recipient().String()) {
					t.Fatalf("the key prints its material: %s", s)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), path) {
				t.Errorf("%q does not name the file", err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%q does not say %q", err, tc.msg)
			}
			if tc.content != nil {
				for _, line := range strings.Split(*tc.content, "\n") {
					if line = strings.TrimSpace(line); len(line) > 20 && !strings.HasPrefix(line, "#") && strings.Contains(err.Error(), line[:20]) {
						t.Errorf("%q quotes the file", err)
					}
				}
			}
		})
	}
}

// TestLoadKeyCredentialsDirectory: a systemd credential is the file
// $CREDENTIALS_DIRECTORY/<name>; systemd opens it to the unit's user with an ACL that stat
// shows as the group's read bit, which keys.CheckPrivate accepts there and nowhere else.
func TestLoadKeyCredentialsDirectory(t *testing.T) {
	creds := t.TempDir()
	elsewhere := t.TempDir()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{creds, elsewhere} {
		path := filepath.Join(dir, "vault.key")
		if err := os.WriteFile(path, []byte(keyFileText(id)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o440); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("CREDENTIALS_DIRECTORY", creds)
	if _, err := LoadKey(filepath.Join(os.Getenv("CREDENTIALS_DIRECTORY"), "vault.key")); err != nil {
		t.Fatalf("the credential: %v", err)
	}
	// The same mode outside the credentials directory, in a group that is root's (tests may
	// run as root) or not the process's own, is refused.
	if os.Getegid() == 0 {
		if _, err := LoadKey(filepath.Join(elsewhere, "vault.key")); err == nil || !strings.Contains(err.Error(), "0440") {
			t.Fatalf("mode 0440 outside the credentials directory: %v", err)
		}
	}
}

// TestOpenWithLoadedKeys: a vault is opened with keys from files, and a record written under
// one file's key reads under a vault opened from the same file again.
func TestOpenWithLoadedKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k, keyPath := writeKey(t, dir, "vault.key")
	path := filepath.Join(dir, "executor.db")
	v := openVault(t, path, []*Key{k}, Options{})
	if err := v.Put(ctx, sampleGrant("alice", "files")); err != nil {
		t.Fatal(err)
	}
	v.Close()
	again, err := LoadKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	v = openVault(t, path, []*Key{again}, Options{})
	if _, err := v.Get(ctx, "alice", "files"); err != nil {
		t.Fatal(err)
	}
	// A second Open of the same file waits for the lock and says so.
	if _, err := Open(path, []*Key{again}, Options{}); err == nil || !errors.Is(err, store.ErrLocked) {
		t.Fatalf("a second Open: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
