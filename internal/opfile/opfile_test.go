package opfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExplain(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("keys", 0o700); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(dir, "keys", "signing.jwk")
	tests := []struct {
		name string
		open func() error
		want string // the whole message
	}{
		{"relative, missing", func() error { _, err := ReadFile("keys/signing.jwk"); return err },
			"open keys/signing.jwk (resolved against " + dir + " as " + abs + "): no such file or directory"},
		{"relative with dots", func() error { _, err := Open("./keys/../keys/signing.jwk"); return err },
			"open ./keys/../keys/signing.jwk (resolved against " + dir + " as " + abs + "): no such file or directory"},
		{"absolute, missing", func() error { _, err := Open(abs); return err },
			"open " + abs + ": no such file or directory"},
		{"relative, a directory", func() error { _, err := OpenFile("keys", os.O_WRONLY, 0); return err },
			"open keys (resolved against " + dir + " as " + filepath.Join(dir, "keys") + "): is a directory"},
	}
	for _, tt := range tests {
		err := tt.open()
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: error = %v\nwant %s", tt.name, err, tt.want)
			continue
		}
		// Wrapped, not replaced: callers still branch on what the os package said.
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path == "" {
			t.Errorf("%s: not an *fs.PathError underneath: %#v", tt.name, err)
		}
		if strings.Contains(tt.want, "no such file") && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: errors.Is(err, fs.ErrNotExist) is false", tt.name)
		}
	}
}

// Explain leaves alone what is not an *fs.PathError of its own: a wrapped one keeps the
// wording its wrapper chose.
func TestExplainLeavesOthers(t *testing.T) {
	t.Chdir(t.TempDir())
	_, perr := os.Open("missing")
	for _, err := range []error{nil, errors.New("other"), &wrapped{perr}} {
		if got := Explain(err); got != err {
			t.Errorf("Explain(%v) = %v, want it unchanged", err, got)
		}
	}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }
