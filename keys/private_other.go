//go:build !unix

package keys

import "io/fs"

// fileGroup is unknown where files have no Unix group.
func fileGroup(fs.FileInfo) (int, bool) { return 0, false }
