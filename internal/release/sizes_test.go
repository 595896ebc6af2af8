package release

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sizesTolerance is how far a size the tests build may be from docs/deploy.md's before the
// table counts as stale (docs/deploy.md states it).
const sizesTolerance = 0.20

func readDeployDoc(t *testing.T) []byte {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

var (
	sizesHeader = regexp.MustCompile(`^Built with (\S+), in MiB`)
	sizesCell   = regexp.MustCompile("^`([a-z-]+)`$")
)

// parseSizesTable reads SizesTable's output back: the toolchain and, per daemon, kind and
// target, the size (MiB times 2^20, which formats back to the same decimal).
func parseSizesTable(t *testing.T, table string) (Sizes, string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	m := sizesHeader.FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("sizes table starts with %q, not SizesTable's header", lines[0])
	}
	s := Sizes{}
	for _, line := range lines[1:] {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 1+len(sizeKinds) {
			continue
		}
		name := sizesCell.FindStringSubmatch(strings.TrimSpace(cells[0]))
		if name == nil {
			continue
		}
		s[name[1]] = map[string]map[Target]int64{}
		for i, k := range sizeKinds {
			vals := strings.Split(strings.TrimSpace(cells[1+i]), " / ")
			if len(vals) != len(DefaultTargets) {
				t.Fatalf("sizes row %q: %d values for %s, want one per target", line, len(vals), k.kind)
			}
			s[name[1]][k.kind] = map[Target]int64{}
			for j, v := range vals {
				mib, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("sizes row %q: %v", line, err)
				}
				s[name[1]][k.kind][DefaultTargets[j]] = int64(math.Round(mib * (1 << 20)))
			}
		}
	}
	return s, m[1]
}

// TestSizesDoc checks that docs/deploy.md's sizes table is exactly what SizesTable writes (so
// that deploy/release -sizes-doc renews it in place), for every daemon and default target, and
// that the host's binaries, images and packages the tests build are within sizesTolerance of
// it.
func TestSizesDoc(t *testing.T) {
	table, err := DocSizes(readDeployDoc(t))
	if err != nil {
		t.Fatalf("docs/deploy.md: %v", err)
	}
	doc, goVersion := parseSizesTable(t, table)
	regen, err := SizesTable(doc, Daemons, DefaultTargets, goVersion)
	if err != nil {
		t.Fatalf("docs/deploy.md's sizes table: %v", err)
	}
	if regen != table {
		t.Fatalf("docs/deploy.md's sizes table is not in SizesTable's format: run go run ./deploy/release -sizes-doc docs/deploy.md\nhave:\n%s\nwant:\n%s", table, regen)
	}

	_, arts := testRelease(t)
	built, err := MeasureSizes(arts)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Daemons {
		for _, k := range sizeKinds {
			got, want := built[d.Command][k.kind][hostTarget], doc[d.Command][k.kind][hostTarget]
			if drift := math.Abs(float64(got-want)) / float64(want); drift > sizesTolerance {
				t.Errorf("%s %s for %s: %.1f MiB built, %.1f MiB in docs/deploy.md (%.0f%% apart, more than %.0f%%): run go run ./deploy/release -sizes-doc docs/deploy.md",
					d.Command, k.kind, hostTarget, float64(got)/(1<<20), float64(want)/(1<<20), drift*100, sizesTolerance*100)
			}
		}
	}
}

// TestReplaceSizes checks that the table is replaced in place, the text around it kept, and
// that a file without the markers is refused.
func TestReplaceSizes(t *testing.T) {
	doc := "intro\n" + SizesBegin + "\nold table\n" + SizesEnd + "\nafter\n"
	got, err := ReplaceSizes([]byte(doc), "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + SizesBegin + "\nnew table\n" + SizesEnd + "\nafter\n"; string(got) != want {
		t.Errorf("ReplaceSizes = %q, want %q", got, want)
	}
	for _, bad := range []string{"no markers\n", SizesBegin + "\nno end\n", SizesEnd + "\n" + SizesBegin + "\n"} {
		if _, err := ReplaceSizes([]byte(bad), "t\n"); err == nil {
			t.Errorf("ReplaceSizes(%q) accepted it", bad)
		}
	}
}

// TestSizesTableIncomplete checks that a release without a kind or a target writes no table.
func TestSizesTableIncomplete(t *testing.T) {
	full := Sizes{}
	for _, d := range Daemons {
		full[d.Command] = map[string]map[Target]int64{}
		for _, k := range sizeKinds {
			full[d.Command][k.kind] = map[Target]int64{}
			for _, tg := range DefaultTargets {
				full[d.Command][k.kind][tg] = 1 << 20
			}
		}
	}
	if _, err := SizesTable(full, Daemons, DefaultTargets, "go1"); err != nil {
		t.Fatalf("a whole release: %v", err)
	}
	delete(full[Daemons[0].Command]["image"], DefaultTargets[1])
	if _, err := SizesTable(full, Daemons, DefaultTargets, "go1"); err == nil {
		t.Error("a release without one image wrote the table")
	}
}
