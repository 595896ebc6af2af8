package keys

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/verdictgate/verdict/internal/opfile"
)

// A PermissionError is a private key file that someone other than its owner could read or
// change: the daemon refuses to start on it rather than sign with a key others may hold.
type PermissionError struct {
	Path string
	Mode fs.FileMode
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("keys: private key %s has mode %04o: it must be readable by its owner alone; run chmod 600 %s (or 400)",
		e.Path, uint32(e.Mode), e.Path)
}

// CheckPrivate refuses a private key file (fi, as stat'ed from the open file at path) that
// others can read or write. Its owner's permissions are its own; any permission for others is
// refused, and so is any for the group, with two exceptions where the group's read bit gives
// nobody else the key:
//   - the file's group is the process's own effective group, and not root's: Kubernetes
//     mounts a Secret root-owned and readable by the pod's fsGroup, which is the daemon's;
//   - the file is under $CREDENTIALS_DIRECTORY: systemd writes a credential mode 0400 and
//     grants the unit's user read access with an ACL, whose mask stat shows as the group's
//     read bit.
func CheckPrivate(path string, fi fs.FileInfo) error {
	return checkPrivate(path, fi, os.Getegid(), os.Getenv("CREDENTIALS_DIRECTORY"))
}

func checkPrivate(path string, fi fs.FileInfo, egid int, credentials string) error {
	perm := fi.Mode().Perm()
	if perm&0o077 == 0 {
		return nil
	}
	if perm&0o037 == 0 { // the group may read, nothing more, and others nothing
		if gid, ok := fileGroup(fi); ok && gid == egid && gid != 0 {
			return nil
		}
		if credentials != "" && within(credentials, path) {
			return nil
		}
	}
	return &PermissionError{Path: path, Mode: perm}
}

// within reports whether path is dir or below it, lexically.
func within(dir, path string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && filepath.IsLocal(rel)
}

// ReadPrivate reads the private key file at path, at most limit bytes: the file is refused
// when others could read or write it (CheckPrivate, checked on the open file) or when it is
// larger. Errors name the file, and where a relative path led.
func ReadPrivate(path string, limit int64) ([]byte, error) {
	return readFile(path, limit, true)
}

// readFile reads the file at path, at most limit bytes, refusing it first when check is set
// and others could read or write it.
func readFile(path string, limit int64, check bool) ([]byte, error) {
	f, err := opfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if check {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if err := CheckPrivate(path, fi); err != nil {
			return nil, err
		}
	}
	data, err := readAtMost(f, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// readAtMost reads r to its end, refusing it when it holds more than limit bytes: a key file or
// key set is small, and whoever controls a larger one must not make us buffer it.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return data, nil
}
