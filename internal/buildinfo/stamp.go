package buildinfo

import "cmp"

// A release build says which build it is with the linker rather than with what the go command
// records: a release is built with -trimpath from an exported tree, or with -buildvcs=false, and
// then the toolchain records no revision and "(devel)" as the version. The release tool sets
// these with -ldflags "-X github.com/verdictgate/verdict/internal/buildinfo.stampVersion=v1.2.3"
// and so on. They are the only package-level variables here, written by the linker alone and
// never at run time.
var (
	stampVersion  string
	stampRevision string
	stampTime     string
	stampModified string // "true" or "false"; empty leaves the toolchain's word
)

// Stamp is what a release build's linker flags say of the build. An empty field says nothing.
type Stamp struct {
	Version  string
	Revision string
	Time     string
	Modified string // "true", "false" or ""
}

// linked returns the stamp the linker wrote into this binary.
func linked() Stamp {
	return Stamp{Version: stampVersion, Revision: stampRevision, Time: stampTime, Modified: stampModified}
}

// Apply returns in with every field the stamp sets replaced by the stamp's value: the release
// tool knows the tag and the revision better than a toolchain that recorded none.
func (s Stamp) Apply(in Info) Info {
	in.Version = cmp.Or(s.Version, in.Version)
	in.Revision = cmp.Or(s.Revision, in.Revision)
	in.Time = cmp.Or(s.Time, in.Time)
	switch s.Modified {
	case "true":
		in.Modified = true
	case "false":
		in.Modified = false
	}
	return in
}

// LinkerFlags returns the -X flags that write s into a binary that links this package.
func (s Stamp) LinkerFlags() []string {
	const pkg = "github.com/verdictgate/verdict/internal/buildinfo."
	var flags []string
	add := func(name, v string) {
		if v != "" {
			flags = append(flags, "-X", pkg+name+"="+v)
		}
	}
	add("stampVersion", s.Version)
	add("stampRevision", s.Revision)
	add("stampTime", s.Time)
	add("stampModified", s.Modified)
	return flags
}
