package mcpgate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/keys"
)

// TestReadStateKey checks the requestState key file: long enough, and readable by its owner
// alone, as a signing key must be.
func TestReadStateKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	tests := []struct {
		name    string
		data    []byte
		mode    os.FileMode
		wantErr string
	}{
		{"owner only", key, 0o600, ""},
		{"read-only", append(key, '\n'), 0o400, ""},
		{"too short", key[:31], 0o600, "need at least 32"},
		{"world-readable", key, 0o644, "chmod 600"},
		{"group-writable", key, 0o620, "chmod 600"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.key")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			got, err := ReadStateKey(path)
			if tt.wantErr == "" {
				if err != nil || string(got) != string(key) {
					t.Fatalf("ReadStateKey = %q, %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Fatalf("ReadStateKey: %v, want an error naming %s and saying %q", err, path, tt.wantErr)
			}
			var pe *keys.PermissionError
			if tt.mode&0o077 != 0 && !errors.As(err, &pe) {
				t.Errorf("ReadStateKey: %v is not a *keys.PermissionError", err)
			}
		})
	}
}

// A state key file that is not there says where a relative path led and the line that makes
// one, and still matches fs.ErrNotExist.
func TestReadStateKeyMissing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	_, err := ReadStateKey("secrets/state.key")
	want := "state key: open secrets/state.key (resolved against " + dir + " as " + filepath.Join(dir, "secrets/state.key") +
		`): no such file or directory; make it with "(umask 077 && head -c 32 /dev/urandom | base64 > secrets/state.key)"`
	if err == nil || err.Error() != want {
		t.Fatalf("ReadStateKey: %v\nwant %s", err, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(err, fs.ErrNotExist) is false: %v", err)
	}
}
