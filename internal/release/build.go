package release

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/verdictgate/verdict/internal/buildinfo"
)

// BuildBinaries builds cmd/<command> of the module at root, for every daemon, for t into the
// directory out, and returns the binaries' paths in the order of daemons. One go build builds
// them all, so the packages they share are compiled once. The binaries are static
// (CGO_ENABLED=0), record no file system paths (-trimpath) and no build id, and carry stamp
// (see buildinfo.Stamp).
func BuildBinaries(ctx context.Context, root, out string, t Target, daemons []Daemon, stamp buildinfo.Stamp) ([]string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("build for %s: %w", t, err)
	}
	ldflags := append([]string{"-s", "-w", "-buildid="}, stamp.LinkerFlags()...)
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", strings.Join(ldflags, " "), "-o", out + string(filepath.Separator)}
	var bins []string
	for _, d := range daemons {
		args = append(args, "./cmd/"+d.Command)
		bins = append(bins, filepath.Join(out, d.Command))
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch, "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("build for %s: %w\n%s", t, err, stderr.Bytes())
	}
	return bins, nil
}
