package keys

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// TestCheckPrivate holds each mode of a private key file to the rule: the owner's bits are its
// own; a group may only read, and only the daemon's own group or a systemd credential's ACL
// mask; others nothing.
func TestCheckPrivate(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.Mkdir(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		mode        os.FileMode
		ownGroup    bool // the file's group is the process's effective group
		credentials bool // the file is under $CREDENTIALS_DIRECTORY
		ok          bool
	}{
		{"0600", 0o600, false, false, true},
		{"0400", 0o400, false, false, true},
		{"0700", 0o700, false, false, true},
		{"0644 world-readable", 0o644, false, false, false},
		{"0604 world-readable", 0o604, false, false, false},
		{"0640 another group", 0o640, false, false, false},
		{"0660 group-writable", 0o660, true, false, false},
		{"0640 the daemon's own group (Kubernetes' fsGroup)", 0o640, true, false, true},
		{"0440 the daemon's own group", 0o440, true, false, true},
		{"0644 the daemon's own group, but world-readable", 0o644, true, false, false},
		{"0440 systemd credential", 0o440, false, true, true},
		{"0444 systemd credential, world-readable", 0o444, false, true, false},
		{"0440 outside the credentials directory", 0o440, false, false, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := dir
			if tt.credentials {
				parent = creds
			}
			path := filepath.Join(parent, "key"+string(rune('a'+i)))
			if err := os.WriteFile(path, []byte("k"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			if os.Geteuid() == 0 {
				// Root's group never counts as the daemon's own: give the file the id a
				// Kubernetes pod's fsGroup would be, as the chart sets it.
				if err := os.Chown(path, -1, 65532); err != nil {
					t.Fatal(err)
				}
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			gid, ok := fileGroup(fi)
			if !ok {
				t.Skip("no Unix file groups here")
			}
			egid := gid + 1 // not the file's group
			if tt.ownGroup {
				if gid == 0 {
					t.Skip("the test's files belong to group 0, which never counts as the daemon's own")
				}
				egid = gid
			}
			err = checkPrivate(path, fi, egid, creds)
			if tt.ok {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			var pe *PermissionError
			if !errors.As(err, &pe) || pe.Path != path || pe.Mode != tt.mode {
				t.Fatalf("got %v, want a *PermissionError for %s mode %04o", err, path, tt.mode)
			}
		})
	}
}

// TestLoadSignerRefusesAnExposedKey checks that a signing key others can read is not loaded, and
// that the error names the file and the fix.
func TestLoadSignerRefusesAnExposedKey(t *testing.T) {
	dir := t.TempDir()
	if _, err := Keygen(dir, jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, PrivateKeyFile)
	if _, err := LoadSigner(path); err != nil {
		t.Fatalf("a key Keygen wrote does not load: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadSigner(path)
	var pe *PermissionError
	if !errors.As(err, &pe) {
		t.Fatalf("LoadSigner of a mode 0644 key: %v, want a *PermissionError", err)
	}
	for _, want := range []string{path, "0644", "chmod 600 " + path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
