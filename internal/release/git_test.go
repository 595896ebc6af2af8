package release

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// TestDescribe runs Describe on a repository of its own: a commit without a tag gets a
// pseudo-version, a tagged one the tag, and changes are refused unless allowed.
func TestDescribe(t *testing.T) {
	testtool.Path(t, "git", "Debian package git; Describe is not tried on a repository")
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(),
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_COMMITTER_DATE=2026-12-02T03:04:05Z",
			"GIT_AUTHOR_DATE=2026-12-02T03:04:05Z", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("1")
	git("add", "f")
	git("commit", "-q", "-m", "one")
	ctx := context.Background()

	s, err := Describe(ctx, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Revision) != 40 || s.Modified || !s.Time.Equal(testSource.Time) {
		t.Fatalf("Describe = %+v", s)
	}
	if want := "v0.0.0-20261202030405-" + s.Revision[:12]; s.Version != want {
		t.Errorf("untagged version %q, want %q", s.Version, want)
	}

	git("tag", "v1.2.3")
	if s, err = Describe(ctx, dir, false); err != nil || s.Version != "v1.2.3" {
		t.Errorf("tagged: %+v, %v; want v1.2.3", s, err)
	}

	// A tag of an ancestor does not name a later commit.
	write("2")
	git("commit", "-q", "-am", "two")
	if s, err = Describe(ctx, dir, false); err != nil || !strings.HasPrefix(s.Version, "v0.0.0-") {
		t.Errorf("after the tag: %+v, %v; want a pseudo-version", s, err)
	}

	write("3")
	if _, err = Describe(ctx, dir, false); !errors.Is(err, ErrModified) {
		t.Errorf("a modified tree: %v, want ErrModified", err)
	}
	if s, err = Describe(ctx, dir, true); err != nil || !s.Modified || s.Stamp().Modified != "true" {
		t.Errorf("a modified tree, allowed: %+v, %v", s, err)
	}
}
