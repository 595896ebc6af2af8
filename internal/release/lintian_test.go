package release

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

func lintianBin(t *testing.T) string {
	t.Helper()
	return testtool.Path(t, "lintian", "Debian's package lintian checks the packages against Debian policy")
}

// taggedSource is a tagged release: its Debian version has no "-", so its packages are native
// ones, which lintian holds to other rules (the changelog's name among them) than the tests'
// pseudo-version.
var taggedSource = Source{
	Version:  "v1.2.3",
	Revision: testSource.Revision,
	Time:     testSource.Time,
}

// taggedDebs builds the packages of taggedSource with the release command testRelease built.
func taggedDebs(t *testing.T) []string {
	t.Helper()
	testRelease(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(t.TempDir(), "dist")
	run := exec.Command(filepath.Join(built.dir, "release"), "-out", dist, "-targets", hostTarget.String(), "-no-images",
		"-version", taggedSource.Version, "-revision", taggedSource.Revision, "-time", taggedSource.Time.Format(time.RFC3339))
	run.Dir = root
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("deploy/release -version %s: %v\n%s", taggedSource.Version, err, out)
	}
	var debs []string
	for _, d := range Daemons {
		debs = append(debs, filepath.Join(dist, DebFileName(d, taggedSource, hostTarget)))
	}
	return debs
}

// lintianTag is one line of lintian's output: "W: verdictd: tag-name context".
var lintianTag = regexp.MustCompile(`^([EWIPXCO]): (\S+?)(?: \S+)?: (\S+)(?: (.*))?$`)

// TestDebLintian runs Debian's lintian on every package, of a pseudo-version and of a tag, and
// fails on any error or warning, and on any override the package ships that lintian no longer
// needs: what a package raises on purpose is in LintianOverrides, shipped in the package and
// listed in docs/deploy.md.
func TestDebLintian(t *testing.T) {
	bin := lintianBin(t)
	_, arts := testRelease(t)
	var debs []string
	for _, a := range arts {
		if a.Kind == "deb" {
			debs = append(debs, a.Path)
		}
	}
	debs = append(debs, taggedDebs(t)...)
	cmd := exec.Command(bin, append([]string{"--no-cfg", "--display-info", "--show-overrides", "--tag-display-limit", "0", "--fail-on", "none"}, debs...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("lintian: %v\n%s%s", err, stdout.Bytes(), stderr.Bytes())
	}
	overridden := map[string]bool{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		m := lintianTag.FindStringSubmatch(sc.Text())
		if m == nil {
			continue // N: lines (the overrides' comments), blank lines
		}
		severity, pkg, tag, context := m[1], m[2], m[3], m[4]
		switch {
		case severity == "E" || severity == "W":
			t.Errorf("lintian: %s", sc.Text())
		case severity == "O":
			overridden[pkg+": "+tag+" "+context] = true
		case tag == "unused-override":
			t.Errorf("lintian: %s: drop it from LintianOverrides and docs/deploy.md", sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// Every override shipped was needed; unused-override says the same, this names it.
	for _, d := range Daemons {
		for _, o := range LintianOverrides(d) {
			if !overridden[d.Package+": "+o.Tag+" "+o.Context] {
				t.Errorf("%s: lintian raised no %s %s to override", d.Package, o.Tag, o.Context)
			}
		}
	}
	if t.Failed() {
		t.Logf("lintian's whole output:\n%s", stdout.Bytes())
	}
}

// TestLintianOverridesDocumented checks that docs/deploy.md lists every override with its
// reason, and that each override is one line of the overrides file after its one-line reason.
func TestLintianOverridesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Daemons {
		lines := strings.Split(strings.TrimSuffix(string(lintianOverrides(d)), "\n"), "\n")
		if len(lines) != 2*len(LintianOverrides(d)) {
			t.Fatalf("%s's overrides file has %d lines for %d overrides", d.Package, len(lines), len(LintianOverrides(d)))
		}
		for i, o := range LintianOverrides(d) {
			if strings.Contains(o.Reason, "\n") {
				t.Errorf("%s: the reason of %s is not one line", d.Package, o.Tag)
			}
			if got, want := lines[2*i], "# "+o.Reason; got != want {
				t.Errorf("%s overrides line %d = %q, want %q", d.Package, 2*i+1, got, want)
			}
			if got, want := lines[2*i+1], d.Package+": "+o.Tag+" "+o.Context; got != want {
				t.Errorf("%s overrides line %d = %q, want %q", d.Package, 2*i+2, got, want)
			}
			row := "| `" + o.Tag + "` |"
			at := bytes.Index(doc, []byte(row))
			if at < 0 {
				t.Errorf("docs/deploy.md has no row %q for %s's override", row, d.Package)
				continue
			}
			end := bytes.IndexByte(doc[at:], '\n')
			if end < 0 {
				end = len(doc) - at
			}
			if !strings.Contains(string(doc[at:at+end]), o.Reason) {
				t.Errorf("docs/deploy.md's row for %s does not give its reason %q", o.Tag, o.Reason)
			}
		}
	}
}
