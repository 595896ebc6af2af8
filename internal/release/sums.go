package release

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// WriteSums writes dir/SHA256SUMS over files (paths under dir), in the format sha256sum -c
// reads: the hex digest, two spaces, the path relative to dir. Lines are sorted by path.
func WriteSums(dir string, files []string) error {
	var lines []string
	for _, f := range files {
		rel, err := filepath.Rel(dir, f)
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("SHA256SUMS: %s is not under %s", f, dir)
		}
		sum, err := fileSHA256(f)
		if err != nil {
			return fmt.Errorf("SHA256SUMS: %w", err)
		}
		lines = append(lines, sum+"  "+filepath.ToSlash(rel)+"\n")
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Join(lines, "")), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
