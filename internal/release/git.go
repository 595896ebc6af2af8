package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/buildinfo"
)

// ErrModified is returned by Describe for a tree with uncommitted changes to tracked files,
// unless they are allowed: a release must be the commit it names.
var ErrModified = errors.New("the tree has uncommitted changes")

// A Source is the commit a release is built from.
type Source struct {
	// Version is the commit's tag (v1.2.3) when it has one, else a Go pseudo-version
	// (v0.0.0-20260102030405-0123456789ab) naming the commit.
	Version string
	// Revision is the full commit hash.
	Revision string
	// Time is the commit time: every file time in the packages and images, and the images'
	// creation time, so that a rebuild of the commit is the same bytes.
	Time time.Time
	// Modified reports uncommitted changes to tracked files.
	Modified bool
}

// Stamp is what the binaries are stamped with.
func (s Source) Stamp() buildinfo.Stamp {
	return buildinfo.Stamp{
		Version:  s.Version,
		Revision: s.Revision,
		Time:     s.Time.UTC().Format(time.RFC3339),
		Modified: fmt.Sprint(s.Modified),
	}
}

// Describe reads the commit checked out at root. A tree with changes is ErrModified unless
// allowModified; then Source.Modified is set, and the binaries say "(modified)".
func Describe(ctx context.Context, root string, allowModified bool) (Source, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	var s Source
	var err error
	if s.Revision, err = git("rev-parse", "HEAD"); err != nil {
		return Source{}, err
	}
	unix, err := git("show", "-s", "--format=%ct", "HEAD")
	if err != nil {
		return Source{}, err
	}
	var secs int64
	if _, err := fmt.Sscan(unix, &secs); err != nil {
		return Source{}, fmt.Errorf("commit time %q: %w", unix, err)
	}
	s.Time = time.Unix(secs, 0).UTC()
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return Source{}, err
	}
	s.Modified = status != ""
	if s.Modified && !allowModified {
		return Source{}, fmt.Errorf("%w:\n%s", ErrModified, status)
	}
	// A tag on the commit itself names the release; any other commit gets a pseudo-version,
	// never a tag of an ancestor that would claim to be something it is not.
	if tag, err := git("describe", "--tags", "--exact-match", "--match", "v[0-9]*", "HEAD"); err == nil {
		s.Version = tag
	} else {
		s.Version = "v0.0.0-" + s.Time.Format("20060102150405") + "-" + s.Revision[:12]
	}
	return s, nil
}

// NamedSource is a Source given rather than read from git: a version starting with "v", a full
// hexadecimal commit hash and an RFC 3339 commit time, all required.
func NamedSource(version, revision, commitTime string) (Source, error) {
	if !strings.HasPrefix(version, "v") || len(version) < 2 {
		return Source{}, fmt.Errorf("version %q: want v followed by the version", version)
	}
	if len(revision) != 40 || strings.Trim(revision, "0123456789abcdef") != "" {
		return Source{}, fmt.Errorf("revision %q: want a full commit hash (40 lower-case hex digits)", revision)
	}
	t, err := time.Parse(time.RFC3339, commitTime)
	if err != nil {
		return Source{}, fmt.Errorf("time %q: want RFC 3339: %w", commitTime, err)
	}
	return Source{Version: version, Revision: revision, Time: t.UTC()}, nil
}
