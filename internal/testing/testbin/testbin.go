// Package testbin owns building the project's commands for tests that run them as real
// processes: one `go build` per command and test binary, however many tests use it.
package testbin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Build compiles pkg (an import path, or a directory relative to the working directory) into
// dir/name and returns that path. A failed build's error carries the compiler's output.
func Build(dir, name, pkg string) (string, error) {
	return BuildTags(dir, name, pkg)
}

// BuildTags is Build with build tags: a test's own build of a command, such as one with the
// fault points only a test build has.
func BuildTags(dir, name, pkg string, tags ...string) (string, error) {
	out := filepath.Join(dir, name)
	var stderr bytes.Buffer
	args := []string{"build", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", pkg, err, stderr.Bytes())
	}
	return out, nil
}

// A Binary is a command built on first use and shared by every test of one test binary. Its
// zero value is not usable; make one with New, as a package-level variable of the test package,
// and call Remove from TestMain after m.Run.
type Binary struct {
	pkg  string
	once sync.Once
	dir  string
	path string
	err  error
}

// New describes the command at pkg, built as a file named after the package's last element.
func New(pkg string) *Binary { return &Binary{pkg: pkg} }

// Path builds the command the first time it is asked for, and fails t if that build failed.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "testbin-"); b.err != nil {
			return
		}
		b.path, b.err = Build(b.dir, filepath.Base(b.pkg), b.pkg)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Remove deletes the built command, if it was built.
func (b *Binary) Remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}
