package release

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
)

// The markers around the sizes table in docs/deploy.md: what lies between them is
// SizesTable's output, and deploy/release -sizes-doc rewrites it from the release it built.
const (
	SizesBegin = "<!-- sizes: written by go run ./deploy/release -sizes-doc docs/deploy.md; do not edit -->"
	SizesEnd   = "<!-- sizes: end -->"
)

// sizeKinds are the table's columns after the daemon: the artifact kinds it measures.
var sizeKinds = []struct{ kind, title string }{
	{"binary", "binary"},
	{"image", "image (`.oci.tar`)"},
	{"deb", "Debian package"},
}

// Sizes are the byte sizes of a release's artifacts: Sizes[daemon command][kind][target].
type Sizes map[string]map[string]map[Target]int64

// MeasureSizes reads the sizes of the binaries, images and packages among arts.
func MeasureSizes(arts []Artifact) (Sizes, error) {
	s := Sizes{}
	for _, a := range arts {
		if a.Daemon == "" {
			continue
		}
		fi, err := os.Stat(a.Path)
		if err != nil {
			return nil, fmt.Errorf("sizes: %w", err)
		}
		if s[a.Daemon] == nil {
			s[a.Daemon] = map[string]map[Target]int64{}
		}
		if s[a.Daemon][a.Kind] == nil {
			s[a.Daemon][a.Kind] = map[Target]int64{}
		}
		s[a.Daemon][a.Kind][a.Target] = fi.Size()
	}
	return s, nil
}

// SizesTable formats s as the Markdown table docs/deploy.md quotes, in MiB with one decimal, a
// column per kind and in it a value per target, for every daemon and target: a size missing
// from s is an error (a release built without images, say, cannot write the table).
// goVersion is the toolchain that built them (runtime.Version()).
func SizesTable(s Sizes, daemons []Daemon, targets []Target, goVersion string) (string, error) {
	var arches []string
	for _, t := range targets {
		arches = append(arches, t.Arch)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Built with %s, in MiB (2^20 bytes), %s:\n\n", goVersion, strings.Join(arches, " / "))
	b.WriteString("| daemon |")
	for _, k := range sizeKinds {
		b.WriteString(" " + k.title + " |")
	}
	b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(sizeKinds)) + "\n")
	for _, d := range daemons {
		fmt.Fprintf(&b, "| `%s` |", d.Command)
		for _, k := range sizeKinds {
			var vals []string
			for _, t := range targets {
				n, ok := s[d.Command][k.kind][t]
				if !ok {
					return "", fmt.Errorf("sizes: no %s of %s for %s in the release", k.kind, d.Command, t)
				}
				vals = append(vals, fmt.Sprintf("%.1f", float64(n)/(1<<20)))
			}
			b.WriteString(" " + strings.Join(vals, " / ") + " |")
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// ReplaceSizes returns doc with the text between SizesBegin and SizesEnd replaced by table.
func ReplaceSizes(doc []byte, table string) ([]byte, error) {
	before, _, after, err := cutSizes(doc)
	if err != nil {
		return nil, err
	}
	return slices.Concat(before, []byte(SizesBegin+"\n"+table+SizesEnd), after), nil
}

// DocSizes returns the text between SizesBegin and SizesEnd in doc.
func DocSizes(doc []byte) (string, error) {
	_, table, _, err := cutSizes(doc)
	return string(table), err
}

// cutSizes cuts doc into what comes before SizesBegin's line, the table after it, and what
// comes after SizesEnd.
func cutSizes(doc []byte) (before, table, after []byte, err error) {
	before, rest, ok := bytes.Cut(doc, []byte(SizesBegin+"\n"))
	if !ok {
		return nil, nil, nil, fmt.Errorf("sizes: no line %q", SizesBegin)
	}
	table, after, ok = bytes.Cut(rest, []byte(SizesEnd))
	if !ok {
		return nil, nil, nil, fmt.Errorf("sizes: no %q after %q", SizesEnd, SizesBegin)
	}
	return before, table, after, nil
}
