package release

import (
	"fmt"
	"strings"
)

// A Target is a platform binaries are built for. Only linux is shipped: the units, the packages
// and the images are linux's.
type Target struct {
	OS, Arch string
}

func (t Target) String() string { return t.OS + "/" + t.Arch }

// DefaultTargets are the platforms a release is built for.
var DefaultTargets = []Target{{"linux", "amd64"}, {"linux", "arm64"}}

// ParseTargets reads a comma-separated list of os/arch pairs.
func ParseTargets(s string) ([]Target, error) {
	var ts []Target
	for _, f := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || os != "linux" || (arch != "amd64" && arch != "arm64") {
			return nil, fmt.Errorf("target %q: want linux/amd64 or linux/arm64", f)
		}
		ts = append(ts, Target{os, arch})
	}
	return ts, nil
}
