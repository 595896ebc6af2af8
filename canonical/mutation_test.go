package canonical

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDigestMutantsFail holds the package's tests to the digest itself: a
// copy of the package whose digest hashes anything but the canonical bytes
// must fail them. Each mutant is a copy of this package, with one edit,
// tested by go test in a module of its own; the copy without an edit must
// pass, so that a mutant's failure is its edit's and not the copy's.
func TestDigestMutantsFail(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests copies of the package")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	tests := []struct {
		name      string
		file      string
		old, new  string
		mustCatch string // a test that must fail
	}{
		{"unaltered", "", "", "", ""},
		{"newline appended to the hashed bytes", "canonical.go",
			"sha256.Sum256(canon)", "sha256.Sum256(append(canon[:len(canon):len(canon)], '\\n'))", "TestPinnedDigests"},
		{"input hashed instead of its canonical form", "canonical.go",
			"return digestOf(canon), nil", "_ = canon; return digestOf(data), nil", "TestRFC8785Digests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyPackage(t)
			if tt.file != "" {
				path := filepath.Join(dir, "canonical", tt.file)
				src, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if n := bytes.Count(src, []byte(tt.old)); n != 1 {
					t.Fatalf("%s holds %q %d times, want once: update the mutant", tt.file, tt.old, n)
				}
				if err := os.WriteFile(path, bytes.Replace(src, []byte(tt.old), []byte(tt.new), 1), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.CommandContext(t.Context(), gobin, "test", "-count=1", "./canonical")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOPROXY=off", "GOTOOLCHAIN=local")
			out, err := cmd.CombinedOutput()
			if tt.mustCatch == "" {
				if err != nil {
					t.Fatalf("the unaltered copy fails its tests: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("the tests pass with the digest altered (%s)\n%s", tt.name, out)
			}
			if bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")) {
				t.Fatalf("the mutant does not build: edit it\n%s", out)
			}
			if !bytes.Contains(out, []byte("--- FAIL: "+tt.mustCatch)) {
				t.Fatalf("%s did not fail\n%s", tt.mustCatch, out)
			}
		})
	}
}

// copyPackage copies the module's go.mod and go.sum and this package's
// files (its tests and test data included, this file excluded) into a
// temporary directory, and returns it.
func copyPackage(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		copyFile(t, filepath.Join("..", f), filepath.Join(dst, f))
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		to := filepath.Join(dst, "canonical", path)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case path == "mutation_test.go", strings.HasPrefix(path, "testdata/rapid"):
			return nil
		}
		copyFile(t, path, to)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
