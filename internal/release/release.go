package release

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Options are what a release is built from and into.
type Options struct {
	// Root is the module's root; Out the directory the artifacts are written to (dist/).
	Root, Out string
	// Source is the commit being built (Describe).
	Source Source
	// Targets are the platforms; empty is DefaultTargets.
	Targets []Target
	// Daemons are what is built; empty is Daemons.
	Daemons []Daemon
	// NoDebs and NoImages leave out the Debian packages and the images.
	NoDebs, NoImages bool
	// Maintainer is the packages' Maintainer field; empty is DefaultMaintainer.
	Maintainer string
	// Logf, if set, is told of each artifact as it is written.
	Logf func(format string, args ...any)
}

// An Artifact is one file a release wrote.
type Artifact struct {
	Kind   string // "binary", "deb", "image" or "sums"
	Daemon string // the daemon's command, "" for SHA256SUMS
	Target Target
	Path   string
}

// BinaryDir is the directory under dist/ that holds a target's binaries.
func BinaryDir(src Source, t Target) string {
	return fmt.Sprintf("verdict_%s_%s_%s", src.Version, t.OS, t.Arch)
}

// Run builds the release into o.Out: per target, the binaries under
// verdict_<version>_<os>_<arch>/, a Debian package per daemon and an image per daemon, then
// SHA256SUMS over all of them. o.Out is emptied first, so that SHA256SUMS covers exactly one
// release.
func Run(ctx context.Context, o Options) ([]Artifact, error) {
	targets, daemons := o.Targets, o.Daemons
	if len(targets) == 0 {
		targets = DefaultTargets
	}
	if len(daemons) == 0 {
		daemons = Daemons
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	scripts, err := os.MkdirTemp("", "verdict-deb-scripts-")
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	defer os.RemoveAll(scripts)

	var arts []Artifact
	add := func(a Artifact) {
		arts = append(arts, a)
		logf("%s %s", a.Kind, a.Path)
	}
	for _, t := range targets {
		dir := filepath.Join(o.Out, BinaryDir(o.Source, t))
		bins, err := BuildBinaries(ctx, o.Root, dir, t, daemons, o.Source.Stamp())
		if err != nil {
			return nil, err
		}
		for i, d := range daemons {
			bin := bins[i]
			add(Artifact{"binary", d.Command, t, bin})
			if !o.NoDebs {
				out := filepath.Join(o.Out, DebFileName(d, o.Source, t))
				opts := DebOptions{Root: o.Root, Binary: bin, Scripts: scripts, Maintainer: o.Maintainer}
				if err := BuildDeb(opts, d, o.Source, t, out); err != nil {
					return nil, err
				}
				add(Artifact{"deb", d.Command, t, out})
			}
			if !o.NoImages {
				out := filepath.Join(o.Out, ImageFileName(d, o.Source, t))
				if _, err := BuildImage(d, o.Source, t, bin, out); err != nil {
					return nil, err
				}
				add(Artifact{"image", d.Command, t, out})
			}
		}
	}
	var paths []string
	for _, a := range arts {
		paths = append(paths, a.Path)
	}
	if err := WriteSums(o.Out, paths); err != nil {
		return nil, err
	}
	add(Artifact{Kind: "sums", Path: filepath.Join(o.Out, "SHA256SUMS")})
	return arts, nil
}
