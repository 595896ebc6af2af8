//go:build unix

package keys

import (
	"io/fs"
	"syscall"
)

// fileGroup is the group id that owns the file.
func fileGroup(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Gid), true
}
