// Command release builds a release into dist/: static binaries of verdictd, the executor,
// mcpgate and the review console (verdict-console) for linux/amd64 and linux/arm64, a Debian package per daemon and architecture, an
// OCI image layout tarball per daemon and architecture, and SHA256SUMS. Run it from the
// module's root:
//
//	go run ./deploy/release [-out dist] [-targets linux/amd64,linux/arm64] [-allow-modified]
//	go run ./deploy/release -sizes-doc docs/deploy.md
//
// -sizes-doc rewrites the table of the artifacts' sizes in that file (between
// release.SizesBegin and release.SizesEnd) from the release just built; it needs every
// target, package and image.
//
// See docs/deploy.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"

	"github.com/verdictgate/verdict/internal/release"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "dist", "the directory the release is written to (emptied first)")
	targets := fs.String("targets", "linux/amd64,linux/arm64", "the platforms, comma-separated")
	allowModified := fs.Bool("allow-modified", false, "build a tree with uncommitted changes (the binaries say so)")
	noDebs := fs.Bool("no-debs", false, "leave out the Debian packages")
	noImages := fs.Bool("no-images", false, "leave out the container images")
	maintainer := fs.String("maintainer", release.DefaultMaintainer, "the packages' Maintainer field")
	sizesDoc := fs.String("sizes-doc", "", "a file whose sizes table (docs/deploy.md's) is rewritten from this release")
	// A release rebuilt from an export of the tree (no .git), or a test's release, names its
	// commit instead of reading it: all three or none.
	version := fs.String("version", "", "the version, instead of the commit's tag or pseudo-version (with -revision and -time)")
	revision := fs.String("revision", "", "the full commit hash, instead of reading it from git (with -version and -time)")
	commitTime := fs.String("time", "", "the commit time, RFC 3339, instead of reading it from git (with -version and -revision)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "release: no arguments expected")
		return 2
	}
	ts, err := release.ParseTargets(*targets)
	if err != nil {
		fmt.Fprintln(stderr, "release:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var src release.Source
	switch given := *version != "" || *revision != "" || *commitTime != ""; {
	case given:
		src, err = release.NamedSource(*version, *revision, *commitTime)
		if err != nil {
			fmt.Fprintln(stderr, "release:", err)
			return 2
		}
	default:
		if src, err = release.Describe(ctx, ".", *allowModified); err != nil {
			fmt.Fprintln(stderr, "release:", err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "release %s (revision %s, modified %v)\n", src.Version, src.Revision, src.Modified)
	arts, err := release.Run(ctx, release.Options{
		Root: ".", Out: *out, Source: src, Targets: ts,
		NoDebs: *noDebs, NoImages: *noImages, Maintainer: *maintainer,
		Logf: func(f string, a ...any) { fmt.Fprintf(stdout, f+"\n", a...) },
	})
	if err != nil {
		fmt.Fprintln(stderr, "release:", err)
		return 1
	}
	if *sizesDoc != "" {
		if err := writeSizes(*sizesDoc, arts); err != nil {
			fmt.Fprintln(stderr, "release:", err)
			return 1
		}
		fmt.Fprintf(stdout, "sizes %s\n", *sizesDoc)
	}
	return 0
}

// writeSizes rewrites the sizes table in doc from arts, for every daemon and default target:
// the table quotes the whole release, so a partial one does not write it.
func writeSizes(doc string, arts []release.Artifact) error {
	sizes, err := release.MeasureSizes(arts)
	if err != nil {
		return err
	}
	table, err := release.SizesTable(sizes, release.Daemons, release.DefaultTargets, runtime.Version())
	if err != nil {
		return err
	}
	old, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	updated, err := release.ReplaceSizes(old, table)
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	return os.WriteFile(doc, updated, 0o644)
}
