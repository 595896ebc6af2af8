// Package buildinfo says which build a binary is, from what the Go toolchain embedded in it. Every
// command prints it from its version subcommand, and every daemon exports it as
// <name>_build_info, so that a dashboard can tell which build answered.
package buildinfo

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Unknown stands for what the binary does not say: a build without module information, or
// without version control information (-buildvcs=false, or a tree outside a checkout).
const Unknown = "unknown"

// Info is what a binary says of its own build.
type Info struct {
	// Version is the main module's version: a tag or pseudo-version when the go command could
	// derive one, "(devel)" for a build from a work tree it could not, Unknown without module
	// information.
	Version string
	// Revision is the version control revision of the tree built, or Unknown.
	Revision string
	// Time is the commit time of Revision (RFC 3339), or "".
	Time string
	// Modified reports that the tree had changes Revision does not hold.
	Modified  bool
	GoVersion string
}

// Read returns the running binary's build information: what the toolchain recorded, overridden by
// what a release build's linker flags stamped (see Stamp).
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return linked().Apply(Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version()})
	}
	return linked().Apply(FromBuildInfo(bi))
}

// FromBuildInfo extracts an Info from what runtime/debug read. Empty fields become Unknown.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version, Revision: Unknown, GoVersion: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	in.Version = cmp.Or(in.Version, Unknown)
	in.Revision = cmp.Or(in.Revision, Unknown)
	in.GoVersion = cmp.Or(in.GoVersion, runtime.Version())
	return in
}

// String is the line a version subcommand prints after the command's name.
func (in Info) String() string {
	rev := in.Revision
	if in.Modified {
		rev += " (modified)"
	}
	if in.Time != "" {
		rev += " of " + in.Time
	}
	return fmt.Sprintf("version %s, revision %s, built with %s for %s/%s", in.Version, rev, in.GoVersion, runtime.GOOS, runtime.GOARCH)
}

// RevisionLabel is Revision as the build_info series carries it: with a "-modified" suffix for a
// tree that had changes, so that two different builds never share a label set.
func (in Info) RevisionLabel() string {
	if in.Modified && in.Revision != Unknown {
		return in.Revision + "-modified"
	}
	return in.Revision
}

// Collector returns the gauge name, always 1, whose labels version, revision and go_version
// say which build is running (the Prometheus convention for build information).
func (in Info) Collector(name, help string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        name,
		Help:        help,
		ConstLabels: prometheus.Labels{"version": in.Version, "revision": in.RevisionLabel(), "go_version": in.GoVersion},
	})
	g.Set(1)
	return g
}
